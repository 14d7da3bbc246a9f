import type { Address } from "viem";
import type { BroadcastRecord, BroadcastStore, PenaltyStore, SettlementRecord, SettlementStore } from "../ledger/types.js";
import type { SettlementChain } from "./chain.js";
import { decidePayment, penaltyOf, termsOf, type PaymentDecision } from "./decision.js";
import { KitError } from "../protocol/errors.js";

/**
 * What the reconciler did to a row. `settled`/`reverted`/`failed`: it moved the row to its outcome;
 * `rebroadcast`: the node had forgotten the transaction and got the stored one again; `requeued`: its
 * owner did not send in time and the row went back to the key holders; `abandoned`: nothing was sent
 * before the deadline.
 */
export type ReconcilerAction = "settled" | "reverted" | "failed" | "rebroadcast" | "requeued" | "abandoned";

/** A row left for a later round because the chain cannot tell yet whether its payment was made. */
export class UndecidedPaymentError extends KitError<"payment_undecided"> {
  override name = "UndecidedPaymentError";
  constructor(message: string, options?: ErrorOptions) {
    super("payment_undecided", message, options);
  }
}

/** Options of {@link Reconciler}. */
export interface ReconcilerOptions {
  ledger: Pick<SettlementStore, "takeDue" | "markSettled" | "markFailed" | "requeue" | "withdraw"> & Pick<BroadcastStore, "markTransaction"> & Pick<PenaltyStore, "penalize">;
  /** The chains this instance serves; rows of other chains are left to instances that serve them. */
  chains: readonly SettlementChain[];
  /** A payer whose payment failed by its own doing (a revert, a cancel, a substitute) is refused this long, in chain seconds; default 0 (never). */
  revertPenaltySeconds?: number;
  /** Rows per round; default 20. */
  batch?: number;
  /** A row still pending is looked at again after this long; default 5 s. */
  recheckMs?: number;
  /** Milliseconds since the epoch; default `Date.now`. */
  clock?: () => number;
  /** Whether this instance may broadcast from relayer key `relayer` now (holds its lease); default yes. A row of another's key is left to its holder. */
  mayBroadcast?: (relayer: Address) => boolean;
  onAction?: (action: ReconcilerAction, record: SettlementRecord) => void;
  onError?: (error: unknown, record: SettlementRecord) => void;
}

const LIVE: ReadonlySet<BroadcastRecord["state"]> = new Set(["signed", "accepted", "mined", "reverted"]);

/**
 * Finishes settlements whose owner is gone or late. Every instance runs one; `takeDue` hands each due
 * row to one instance per round, so they share the work without doing it twice. For a sent row it asks
 * the one payment decision ({@link decidePayment}) with the row's transactions, and moves the row to
 * settled or failed; a transaction the node forgot is broadcast again from its stored raw form. A
 * claimed row whose owner did not send goes back to the queue, or is given up at its deadline.
 */
export class Reconciler {
  readonly #options: ReconcilerOptions;
  readonly #chains: Map<number, SettlementChain>;
  readonly #now: () => number;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<number> | undefined;

  constructor(options: ReconcilerOptions) {
    this.#options = options;
    this.#chains = new Map(options.chains.map((chain) => [chain.chainId, chain]));
    this.#now = options.clock ?? Date.now;
  }

  /** One round over the due rows; resolves with how many were looked at. */
  tick(): Promise<number> {
    this.#running ??= this.#round().finally(() => (this.#running = undefined));
    return this.#running;
  }

  async #round(): Promise<number> {
    const rows = await this.#options.ledger.takeDue({
      chainIds: [...this.#chains.keys()],
      limit: this.#options.batch ?? 20,
      recheckMs: this.#options.recheckMs ?? 5_000,
    });
    await Promise.all(
      rows.map(async (row) => {
        try {
          const action = await this.reconcile(row);
          if (action) this.#options.onAction?.(action, row);
        } catch (error) {
          this.#options.onError?.(error, row);
        }
      }),
    );
    return rows.length;
  }

  /**
   * Decides one row; undefined when it is still pending and nothing had to be done. Rejects with
   * {@link UndecidedPaymentError} when the chain cannot tell yet: the row stays as it is for a later round.
   */
  async reconcile(row: SettlementRecord): Promise<ReconcilerAction | undefined> {
    const chain = this.#chains.get(row.key.chainId);
    if (!chain) return undefined;
    const ledger = this.#options.ledger;
    const live = row.transactions.filter((tx) => LIVE.has(tx.state));
    if (row.status === "claimed" && live.length === 0) {
      const now = this.#now();
      // Requeued only with its call: an owner that died before simulating leaves nothing to send.
      if (row.owner !== undefined && row.call && (row.ownerExpiresAt ?? 0) <= now && (row.deadlineAt ?? 0) > now) {
        return (await ledger.requeue(row.id, row.owner)) ? "requeued" : undefined;
      }
      if ((row.deadlineAt ?? 0) <= now) {
        // Write-ahead: no recorded transaction means nothing was broadcast; a late owner's record is now refused.
        return (await ledger.withdraw(row.id, { code: "notSent", owner: row.owner ?? null })) ? "abandoned" : undefined;
      }
      return undefined;
    }
    if (row.status !== "sent" && row.status !== "claimed") return undefined;

    const decided = await this.#decide(chain, row, live);
    if (decided) return decided;
    // Unused: ours is not mined (or a receipt read missed it: the next round sees it).
    const head = await chain.head();
    if (head.timestamp >= row.validBefore) {
      // No later block can use it (the token requires block.timestamp < validBefore), and nothing did.
      await ledger.markFailed(row.id, { code: "expired" });
      return "failed";
    }
    for (const tx of live) if (await chain.knows(tx.hash)) return undefined; // still in the node's pool
    const latest = live.at(-1);
    if (latest && !(this.#options.mayBroadcast?.(latest.relayer) ?? true)) return undefined;
    if (latest) {
      const again = await chain.rebroadcast(latest);
      if (again === "accepted") return "rebroadcast";
      // The node holds it, or the slot is not mined yet (a pool may hold it): never failed while it may be mined.
      if (again !== "spent") return undefined;
    }
    // Its nonce is mined (or none of ours is live). Unless by ours (or the authorization was spent meanwhile), none of ours can be mined now.
    const late = await this.#decide(chain, row, live);
    if (late) return late;
    for (const tx of live) await ledger.markTransaction(tx.hash, "dropped");
    await ledger.markFailed(row.id, { code: "failedOnChain" });
    return "failed";
  }

  /**
   * Asks the payment decision with the row's transactions and records what it decided: settled by the
   * paying transfer, or failed (the payer penalised). Undefined when the authorization is unused.
   */
  async #decide(chain: SettlementChain, row: SettlementRecord, live: BroadcastRecord[]): Promise<ReconcilerAction | undefined> {
    const ledger = this.#options.ledger;
    // A read that fails throws: the row is left for the next round.
    const receipts = await Promise.all(live.map((tx) => chain.receipt(tx.hash)));
    const decision = await decidePayment(chain, termsOf(row), { ours: receipts.filter((r) => r !== undefined).reverse() });
    // Ours reverted: marked so (its other versions at that nonce can never be mined now), whatever paid.
    const reverted = live.find((_, i) => receipts[i]?.status === "reverted");
    if (reverted) {
      await ledger.markTransaction(reverted.hash, "reverted");
      for (const tx of live) if (tx.hash !== reverted.hash && tx.relayerNonce === reverted.relayerNonce && tx.relayer === reverted.relayer) await ledger.markTransaction(tx.hash, "replaced");
    }
    if (decision.outcome === "undecided") throw new UndecidedPaymentError(`settlement ${row.id} left undecided: ${decision.reason}`);
    if (decision.outcome === "unused") return undefined;
    if (decision.outcome === "paid") {
      const { txHash, blockNumber, blockTimestamp } = decision.transfer;
      await ledger.markSettled(row.id, { txHash, blockNumber, blockTimestamp });
      return "settled";
    }
    await ledger.markFailed(row.id, { code: decision.code, ...(reverted ? { txHash: reverted.hash } : {}) });
    await this.#penalize(chain, row, decision);
    return reverted ? "reverted" : "failed";
  }

  async #penalize(chain: SettlementChain, row: SettlementRecord, decision: Extract<PaymentDecision, { outcome: "failed" }>): Promise<void> {
    const seconds = this.#options.revertPenaltySeconds ?? 0;
    if (seconds <= 0) return;
    const penalty = penaltyOf(row, decision, await chain.blockTime(decision.by.blockNumber), seconds);
    if (penalty) await this.#options.ledger.penalize(penalty);
  }

  /** Runs a round every `intervalMs` (default 2 s) until {@link stop}. */
  start(intervalMs = 2_000, onError: (error: unknown) => void = () => {}): void {
    this.#timer = setInterval(() => void this.tick().catch(onError), intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running?.catch(() => undefined);
  }
}
