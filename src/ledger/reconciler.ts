import type { Address, Hex } from "viem";
import { RequestError, SettleError } from "../protocol/reasons.js";
import type { BroadcastRecord, Ledger, SettlementRecord } from "./types.js";

/** A transaction's receipt, with its block's time. */
export interface ChainReceipt {
  status: "success" | "reverted";
  blockNumber: bigint;
  /** Unix seconds. */
  blockTimestamp: bigint;
}

/**
 * What the reconciler needs from one chain: the ledger never talks to a node itself. The facilitator
 * injects an implementation over its RPC client (`src/chain/settlement-chain.ts`).
 */
export interface ReconcilerChain {
  chainId: number;
  /** The receipt of `hash`; undefined while it is not mined (or unknown). */
  receipt(hash: Hex): Promise<ChainReceipt | undefined>;
  /** Whether the node knows the transaction at all (in its pool, or mined). */
  knows(hash: Hex): Promise<boolean>;
  /** The latest block: its timestamp (Unix seconds) is the chain's clock. */
  head(): Promise<{ number: bigint; timestamp: bigint }>;
  /** The token's `authorizationState(authorizer, nonce)`: used or cancelled. */
  authorizationUsed(token: Address, authorizer: Address, nonce: Hex): Promise<boolean>;
  /**
   * The transaction that used the authorization (the token's `AuthorizationUsed` log); undefined when the
   * logs hold none. Rejects when the logs cannot be read: the row is then left for a later round, never
   * failed on a guess.
   */
  findAuthorizationTransaction(token: Address, authorizer: Address, nonce: Hex): Promise<Hex | undefined>;
  /** Broadcasts a stored signed transaction again: `accepted` (or already known) or `refused` (its nonce is spent). */
  rebroadcast(raw: Hex): Promise<"accepted" | "refused">;
}

/**
 * What the reconciler did to a row. `settled`/`reverted`/`failed`: it moved the row to its outcome;
 * `rebroadcast`: the node had forgotten the transaction and got the stored one again; `requeued`: its
 * owner did not send in time and the row went back to the key holders; `abandoned`: nothing was sent
 * before the deadline.
 */
export type ReconcilerAction = "settled" | "reverted" | "failed" | "rebroadcast" | "requeued" | "abandoned";

/** The `error` of a row given up before anything was broadcast (it may be claimed again). */
export const NOT_SENT_ERROR = `${RequestError.unavailable}: given up before any transaction was sent`;

/** Options of {@link Reconciler}. */
export interface ReconcilerOptions {
  ledger: Pick<Ledger, "takeDue" | "markSettled" | "markFailed" | "markTransaction" | "requeue" | "withdraw">;
  /** The chains this instance serves; rows of other chains are left to instances that serve them. */
  chains: readonly ReconcilerChain[];
  /** Rows per round; default 20. */
  batch?: number;
  /** A row still pending is looked at again after this long; default 5 s. */
  recheckMs?: number;
  /** Milliseconds since the epoch; default `Date.now`. */
  clock?: () => number;
  onAction?: (action: ReconcilerAction, record: SettlementRecord) => void;
  onError?: (error: unknown, record: SettlementRecord) => void;
}

const LIVE: ReadonlySet<BroadcastRecord["state"]> = new Set(["signed", "accepted", "mined", "reverted"]);

/**
 * Finishes settlements whose owner is gone or late. Every instance runs one; `takeDue` hands each due
 * row to one instance per round, so they share the work without doing it twice. For a sent row it
 * looks up the receipt of every hash the row holds, then the token's `authorizationState`, and moves
 * the row to settled or failed; a transaction the node forgot is broadcast again from its stored raw
 * form. A claimed row whose owner did not send goes back to the queue, or is given up at its deadline.
 */
export class Reconciler {
  readonly #options: ReconcilerOptions;
  readonly #chains: Map<number, ReconcilerChain>;
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

  /** Decides one row; undefined when it is still pending and nothing had to be done. */
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
        return (await ledger.withdraw(row.id, { error: NOT_SENT_ERROR, owner: row.owner ?? null })) ? "abandoned" : undefined;
      }
      return undefined;
    }
    if (row.status !== "sent" && row.status !== "claimed") return undefined;

    const mined = await this.#mined(chain, row, live);
    if (mined) return mined;

    // Used, but by none of our mined transactions: someone else submitted the authorization (or ours is
    // mined in a block our receipt read missed: the next round sees it).
    const elsewhere = await this.#usedElsewhere(chain, row);
    if (elsewhere !== "unused") return elsewhere === "settled" ? "settled" : undefined;
    const head = await chain.head();
    if (head.timestamp >= row.validBefore) {
      // No later block can use it (the token requires block.timestamp < validBefore), and nothing did.
      await ledger.markFailed(row.id, { error: SettleError.expired });
      return "failed";
    }
    for (const tx of live) if (await chain.knows(tx.hash)) return undefined; // still in the node's pool
    const latest = live.at(-1);
    if (latest && (await chain.rebroadcast(latest.raw)) === "accepted") return "rebroadcast";
    // Refused: its nonce is spent. Unless it was mined in the meantime, none of our transactions can be mined now.
    const late = await this.#mined(chain, row, live);
    if (late) return late;
    if (await chain.authorizationUsed(row.key.token, row.key.authorizer, row.key.nonce)) return undefined;
    for (const tx of live) await ledger.markTransaction(tx.hash, "dropped");
    await ledger.markFailed(row.id, { error: SettleError.failedOnChain });
    return "failed";
  }

  /** Settles (or fails, on a reverted receipt) the row when one of its transactions was mined. */
  async #mined(chain: ReconcilerChain, row: SettlementRecord, live: BroadcastRecord[]): Promise<ReconcilerAction | undefined> {
    const ledger = this.#options.ledger;
    let reverted: BroadcastRecord | undefined;
    for (const tx of [...live].reverse()) {
      const receipt = await chain.receipt(tx.hash);
      if (receipt?.status === "success") {
        await ledger.markSettled(row.id, { txHash: tx.hash, blockNumber: receipt.blockNumber, blockTimestamp: receipt.blockTimestamp });
        return "settled";
      }
      if (receipt) reverted ??= tx;
    }
    if (!reverted) return undefined;
    await ledger.markTransaction(reverted.hash, "reverted");
    // Its other versions at that nonce can never be mined now.
    for (const tx of live) if (tx.hash !== reverted.hash && tx.relayerNonce === reverted.relayerNonce && tx.relayer === reverted.relayer) await ledger.markTransaction(tx.hash, "replaced");
    // Ours reverted; if another transaction used the authorization, the payee was paid all the same. Failed
    // only on what the chain shows: unused, or used with no transfer in the token's logs (a cancel). A read
    // that fails throws, and a paying transaction without its receipt yet is "pending": the row stays as it
    // is for the next round.
    const elsewhere = await this.#usedElsewhere(chain, row);
    if (elsewhere === "settled") return "settled";
    if (elsewhere === "pending") return undefined;
    await ledger.markFailed(row.id, { error: SettleError.failedOnChain, txHash: reverted.hash });
    return "reverted";
  }

  /**
   * Settles the row with the transaction that used its authorization, when that is not one of ours.
   * `canceled`: used, with no `AuthorizationUsed` log in the look-back (no transfer); `pending`: used by a
   * transaction whose receipt is not there (yet).
   */
  async #usedElsewhere(chain: ReconcilerChain, row: SettlementRecord): Promise<"settled" | "pending" | "canceled" | "unused"> {
    const { token, authorizer, nonce } = row.key;
    if (!(await chain.authorizationUsed(token, authorizer, nonce))) return "unused";
    const other = await chain.findAuthorizationTransaction(token, authorizer, nonce);
    if (!other) return "canceled";
    const receipt = await chain.receipt(other);
    if (receipt?.status !== "success") return "pending";
    await this.#options.ledger.markSettled(row.id, { txHash: other, blockNumber: receipt.blockNumber, blockTimestamp: receipt.blockTimestamp });
    return "settled";
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
