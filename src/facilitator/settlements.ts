import type { Address, Hex, PublicClient } from "viem";
import { waitForReceipt } from "../chain/receipt.js";
import { FeeCapError, RelaySendError, type AdoptedTransaction, type RelayHooks, type RelayRequest, type SentTransaction } from "../chain/relayer.js";
import { IllegalTransitionError, NOT_SENT_ERROR, type ClaimInput, type Ledger, type SettlementCall, type SettlementRecord } from "../ledger/types.js";
import { SettleError } from "../protocol/reasons.js";
import type { SettlementChain } from "../settlement/chain.js";
import { decidePayment, paidTransferOf, penaltyOf, termsOf, type PaidTransfer, type PaymentDecision } from "../settlement/decision.js";
import type { Logger } from "./logger.js";
import { LedgerOutbox } from "./outbox.js";

/** What the settlement service needs of a relayer (the kit's {@link Relayer} is one). */
export interface RelayerPort {
  /** The key to send the next transaction from, among `among` (the keys this instance holds the lease of). */
  pick(among?: readonly Address[]): Address | undefined;
  /** Sends and follows the transaction until its nonce is mined (replaced when stuck, re-broadcast when dropped). */
  send(request: RelayRequest, from: Address, hooks?: RelayHooks): Promise<SentTransaction>;
  /** Follows recorded transactions of a key this instance just took (a restart, a key taken over), before its next send. */
  adopt?(address: Address, load: () => Promise<readonly AdoptedTransaction[]>): Promise<void>;
}

/** One network as the settlement service sends on it. */
export interface SettlementNetwork {
  chainId: number;
  /** Canonical network name (metrics, logs). */
  name: string;
  client: PublicClient;
  relayer: RelayerPort;
  /** The chain reads of the payment decision (the reconciler's too). */
  chain: Pick<SettlementChain, "authorizationUsed" | "spender" | "receipt" | "blockTime">;
}

/** Which relayer keys this instance may send from now (the lease keeper). */
export interface KeyHolder {
  held(): Address[];
}

/** Options of {@link SettlementService}. */
export interface SettlementServiceOptions {
  ledger: Ledger;
  instanceId: string;
  networks: ReadonlyMap<number, SettlementNetwork>;
  keys: KeyHolder;
  settleTimeoutMs: number;
  confirmations: number;
  pollingIntervalMs: number;
  /** How long an owner may take to record its first transaction before its claim may be handed on; default 30 s. */
  ownerTtlMs?: number;
  /** After this, the reconciler also looks at a sent row its owner is following (cheap, idempotent); default 10 s. */
  reconcileAfterMs?: number;
  /** A payer whose settlement reverted (and whose authorization nothing else used) is refused this long, in chain seconds; 0 = never. */
  revertPenaltySeconds: number;
  /** Key holders look for settlements handed to them this often, besides being notified; default 1 s. */
  queuePollMs?: number;
  /** Told of a ledger call that failed (the database may be down): the outage watch. */
  onLedgerFault?: (error: unknown) => void;
  /** Decides a row at once (the reconciler's check): used when its transaction's nonce went to a gap filler. */
  reconcile?: (record: SettlementRecord) => Promise<unknown>;
  logger: Logger;
  observe?: {
    confirmationWait?(network: string, seconds: number): void;
    revertedGas?(network: string, gas: bigint): void;
    rpcError?(network: string): void;
  };
}

/** What became of a settle, for its answer. */
export type SettlementResult =
  /** Paid (by this settle's transaction, a copy of it, or the key holder it handed the send to): `transfer` as the paying receipt tells it. */
  | { kind: "settled"; record: SettlementRecord; transfer: PaidTransfer }
  /**
   * Another settle owns (or finished) the authorization: `Authorization already used`. `record` is that
   * settle's row: its transaction is named only once confirmed as this very payment's (the caller's part).
   */
  | { kind: "alreadyUsed"; record: SettlementRecord }
  /** `payment.failed` with `error` (and the hash of ours when it was sent; never another transaction's). */
  | { kind: "failed"; error: string; txHash?: Hex }
  /** The payer's settles in flight already commit its balance. */
  | { kind: "overBalance" }
  /** Nothing was sent, and nothing will be: a fault (503). */
  | { kind: "notSent"; reason: string }
  /**
   * The chain cannot tell yet whether the payment was made (a read failed, or the authorization is used
   * and no log of it was found): a fault, 503, no verdict. The row stays sent for the reconciler, and a
   * retry gets its outcome. `txHash`: ours.
   */
  | { kind: "undecided"; reason: string; txHash?: Hex };

/** Parameters of {@link SettlementService.settle}. */
export type SettleClaim = Omit<ClaimInput, "owner" | "ownerTtlMs" | "deadlineMs" | "call">;

/** The simulated call, or the settle error that refuses it before anything is sent. */
export type Simulation = { call: SettlementCall } | { refusal: string };

/** A write-ahead record refused: the row changed hands (or a lease lapsed), so this instance must not broadcast. */
class Fenced extends Error {
  override name = "Fenced";
}

/**
 * Settles through the ledger, as one of several instances. The settle handler claims the
 * authorization (with its simulated call); an instance that holds a relayer key's lease sends it at
 * once, recording each signed transaction before its broadcast; otherwise the claim waits in the
 * ledger for a key holder (notified, with a poll as fallback). Either way the handler then waits,
 * bounded by the settle time-out, for the row's outcome. A claim that exists already is answered from
 * its owner's outcome: one transaction per authorization, whatever instance the settles reach.
 */
export class SettlementService {
  readonly #o: SettlementServiceOptions;
  readonly #ownerTtlMs: number;
  #unsubscribe: (() => void) | undefined;
  #poll: NodeJS.Timeout | undefined;
  #draining: Promise<void> | undefined;
  #again = false;
  readonly #inFlight = new Set<Promise<unknown>>();
  /** The ids of the claims this instance's settles are working on now. */
  readonly #active = new Set<number>();
  /** Outcomes answered while the ledger was unreachable, written when it is back ({@link recover}). */
  readonly outbox: LedgerOutbox;

  constructor(options: SettlementServiceOptions) {
    this.#o = options;
    this.#ownerTtlMs = options.ownerTtlMs ?? 30_000;
    this.outbox = new LedgerOutbox({ logger: options.logger });
  }

  /**
   * Settles one verified authorization: claims it (with the payer's balance reservation), then
   * simulates it with `simulate`, so duplicates and over-committed payers cost no simulation, then
   * sends it or hands it to a key holder, and waits for its outcome.
   */
  async settle(input: SettleClaim, simulate: () => Promise<Simulation>): Promise<SettlementResult> {
    try {
      return await this.#settle(input, simulate);
    } catch (error) {
      // Cheap when it was not the ledger: the watch probes the database once before it says anything.
      this.#o.onLedgerFault?.(error);
      throw error;
    }
  }

  async #settle(input: SettleClaim, simulate: () => Promise<Simulation>): Promise<SettlementResult> {
    const { ledger, settleTimeoutMs, instanceId } = this.#o;
    const network = this.#o.networks.get(input.key.chainId);
    if (!network) return { kind: "notSent", reason: `chain ${input.key.chainId} is not served` };
    const deadline = performance.now() + settleTimeoutMs;
    for (;;) {
      const claim = await ledger.claim({ ...input, owner: instanceId, ownerTtlMs: this.#ownerTtlMs, deadlineMs: settleTimeoutMs });
      if (claim.outcome === "overBalance") return { kind: "overBalance" };
      if (claim.outcome === "claimed") {
        this.#active.add(claim.record.id);
        try {
          return await this.#settleClaimed(claim.record, network, simulate, deadline);
        } finally {
          this.#active.delete(claim.record.id);
        }
      }
      const { record } = claim;
      if (record.status === "settled") return { kind: "alreadyUsed", record };
      const outcome = (await this.#outcomeOf(record.id, deadline)) ?? record;
      // The settle it joined was given up before anything was sent (its instance lost the database
      // meanwhile, say): nothing is out there, so this one claims the authorization afresh.
      if (outcome.status === "failed" && outcome.error === NOT_SENT_ERROR && deadline - performance.now() > 1_000) continue;
      if (outcome.status === "failed") return this.#resultOf(outcome);
      return { kind: "alreadyUsed", record: outcome };
    }
  }

  async #settleClaimed(claimed: SettlementRecord, network: SettlementNetwork, simulate: () => Promise<Simulation>, deadline: number): Promise<SettlementResult> {
    const { ledger, instanceId } = this.#o;
    let record = claimed;
    let simulation: Simulation;
    try {
      simulation = await simulate();
    } catch (error) {
      await ledger.withdraw(record.id, { error: NOT_SENT_ERROR, owner: instanceId }).catch(() => undefined);
      throw error;
    }
    if ("refusal" in simulation) {
      // Refused before sending: the row fails with the reason (and may be claimed again later).
      await ledger.withdraw(record.id, { error: simulation.refusal, owner: instanceId });
      return { kind: "failed", error: simulation.refusal };
    }
    const from = network.relayer.pick(this.#o.keys.held());
    const sent = from ? await this.#track(this.#execute(record, simulation.call, network, from, deadline)) : "fenced";
    if (sent !== "fenced") return sent;
    // No key of ours to send from (or its lease lapsed meanwhile): a key holder sends it.
    if (await ledger.requeue(record.id, instanceId, simulation.call)) {
      this.#o.logger.debug({ id: record.id, network: network.name }, "settle handed to a relayer key holder");
    }
    record = (await this.#outcomeOf(record.id, deadline)) ?? record;
    if (record.status === "claimed") {
      // Nothing was sent in time: withdraw it (while nobody has recorded a transaction), so nothing is sent after the answer.
      const withdrawn = await ledger.withdraw(record.id, { error: NOT_SENT_ERROR, owner: record.owner ?? null });
      if (withdrawn) return { kind: "notSent", reason: "no relayer key holder sent the settlement in time" };
      record = (await ledger.getById(record.id)) ?? record;
    }
    return this.#resultOf(record);
  }

  /**
   * Waits until `deadline` for the outcome of a row another settle or a key holder is working on. The
   * send is out of this settle's hands, so a ledger that stops answering meanwhile is waited out (the
   * other side goes on, and writes its outcome when the database is back); only at the deadline does
   * the error stand.
   */
  async #outcomeOf(id: number, deadline: number): Promise<SettlementRecord | undefined> {
    for (;;) {
      try {
        return await this.#o.ledger.waitForOutcome(id, Math.max(0, deadline - performance.now()));
      } catch (error) {
        if (deadline - performance.now() < 500) throw error;
        this.#o.onLedgerFault?.(error);
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  /**
   * After the ledger was unreachable: writes the outcomes kept meanwhile (first), then gives up this
   * instance's claims whose settles were answered 503 meanwhile (nothing was recorded as sent for them),
   * so a retry of each claims it afresh. False while the ledger still refuses.
   */
  async recover(): Promise<boolean> {
    if (!(await this.outbox.drain())) return false;
    const released = await this.#o.ledger.withdrawOwned({ owner: this.#o.instanceId, error: NOT_SENT_ERROR, keep: [...this.#active] });
    if (released.length > 0) this.#o.logger.info({ released }, "claims abandoned during the ledger outage released (nothing was sent for them)");
    return true;
  }

  #resultOf(record: SettlementRecord): SettlementResult {
    if (record.status === "settled") return { kind: "settled", record, transfer: paidTransferOf(record) };
    if (record.status === "failed") {
      if (record.error === NOT_SENT_ERROR) return { kind: "notSent", reason: "the settlement was given up before anything was sent" };
      // Spent by something else: the row's hash is ours, which did not pay; the answer names none.
      const named = record.txHash && record.error !== SettleError.alreadyUsed ? { txHash: record.txHash } : {};
      return { kind: "failed", error: record.error ?? SettleError.failedOnChain, ...named };
    }
    // Still pending at the deadline: the hash lets the caller trace it (the status lookup tells the rest).
    return { kind: "failed", error: SettleError.failedOnChain, ...(record.txHash ? { txHash: record.txHash } : {}) };
  }

  #track<T>(work: Promise<T>): Promise<T> {
    this.#inFlight.add(work);
    void work.finally(() => this.#inFlight.delete(work)).catch(() => undefined);
    return work;
  }

  /**
   * Sends an owned claim from `from`, recording each signed transaction before its broadcast, then
   * follows it to its receipt until `deadline`. "fenced": the row changed hands meanwhile.
   */
  async #execute(
    record: SettlementRecord,
    call: SettlementCall,
    network: SettlementNetwork,
    from: Address,
    deadline: number,
  ): Promise<SettlementResult | "fenced"> {
    const { ledger, instanceId, logger } = this.#o;
    let sent: Pick<SentTransaction, "hashes" | "superseded">;
    try {
      sent = await network.relayer.send(call, from, this.#hooks(record.id));
    } catch (error) {
      if (error instanceof Fenced || (error instanceof RelaySendError && error.cause instanceof Fenced)) return "fenced";
      if (error instanceof RelaySendError && error.maybeSent) {
        logger.error({ id: record.id, txHash: error.hash, err: String(error.cause) }, "settle send failed midway");
        sent = error.transaction ?? { hashes: () => [error.hash], superseded: false };
      } else {
        // Refused outright (or the fee cap stopped it before signing, or the ledger refused its
        // write-ahead record): nothing is out there. The row fails as "not sent" and may be claimed
        // again; while the ledger is unreachable it stays claimed until {@link recover} releases it.
        await ledger.markFailed(record.id, { error: NOT_SENT_ERROR, owner: instanceId }).catch(() => undefined);
        if (error instanceof FeeCapError) return { kind: "notSent", reason: `${error.message}; nothing was sent` };
        return { kind: "notSent", reason: `relayer could not send: ${error instanceof Error ? error.message : String(error)}` };
      }
    }
    return this.#follow(record, network, sent, deadline);
  }

  /**
   * The ledger's part in each broadcast of a row's transaction: the write-ahead record of the first
   * (for the row's owner) and of every replacement (for the relayer key's lease holder), and refusals.
   */
  #hooks(id: number): RelayHooks {
    const { ledger, instanceId, logger } = this.#o;
    return {
      beforeBroadcast: async (tx) => {
        const fees = { feeCap: tx.feeCap, ...(tx.priorityFee !== undefined ? { priorityFee: tx.priorityFee } : {}) };
        const recorded = tx.replaces
          ? await ledger.recordReplacement({ id, holder: instanceId, hash: tx.hash, raw: tx.raw, relayer: tx.from, relayerNonce: tx.nonce, ...fees })
          : await ledger.recordBroadcast({
              id,
              owner: instanceId,
              hash: tx.hash,
              raw: tx.raw,
              relayer: tx.from,
              relayerNonce: tx.nonce,
              ...fees,
              checkAfterMs: this.#o.reconcileAfterMs ?? 10_000,
            });
        if (!recorded) throw new Fenced(`settlement ${id} is no longer ours to send`);
      },
      // Only a refusal changes what the ledger must know (that transaction never existed out there);
      // an accepted one stays `signed` until its receipt, which spares a write per settle.
      afterBroadcast: (tx, outcome) => {
        if (outcome !== "refused") return;
        ledger.markTransaction(tx.hash, outcome).catch((error: unknown) => logger.error({ txHash: tx.hash, err: String(error) }, "ledger: transaction state not recorded"));
      },
    };
  }

  /**
   * Follows the relayer key `address` of this instance's now: every unfinished row whose latest
   * transaction is that key's goes to the relayer, which replaces it when stuck and re-broadcasts it
   * when dropped (after a restart, or a key taken over from an instance that died).
   */
  adopt(address: Address): void {
    const { ledger, logger } = this.#o;
    for (const network of this.#o.networks.values()) {
      void network.relayer
        .adopt?.(address, async () => {
          const rows = await ledger.listPending({ chainIds: [network.chainId] });
          return rows.flatMap((row): AdoptedTransaction[] => {
            if (row.status !== "sent" || row.relayer?.toLowerCase() !== address.toLowerCase() || row.relayerNonce === undefined) return [];
            const versions = row.transactions
              .filter((tx) => tx.relayerNonce === row.relayerNonce && tx.relayer.toLowerCase() === address.toLowerCase() && (tx.state === "signed" || tx.state === "accepted"))
              .map((tx) => tx.raw);
            return versions.length > 0 ? [{ raws: versions, hooks: this.#hooks(row.id) }] : [];
          });
        })
        .catch((error: unknown) => logger.error({ relayer: address, network: network.name, err: String(error) }, "relayer: recorded transactions not taken over"));
    }
  }

  /**
   * Waits until `deadline` for the receipt of the transaction, whichever of its versions is mined
   * (the relayer replaces it when stuck), and records the outcome; a row still pending at the deadline
   * is left to the reconciler. When the relayer gave the nonce to a gap filler (the call no longer
   * succeeds), the row is decided at once.
   */
  async #follow(record: SettlementRecord, network: SettlementNetwork, sent: Pick<SentTransaction, "hashes" | "superseded" | "early">, deadline: number): Promise<SettlementResult> {
    const { ledger, logger } = this.#o;
    const sentAt = performance.now();
    // The latest block seen with the receipt reads: usually the mining block, whose time the answer carries.
    let latestBlock: { number: bigint; timestamp: bigint } | undefined;
    // Asked with the send: a chain that mined it at once has answered already.
    const early = this.#o.confirmations <= 1 ? await sent.early : undefined;
    if (early?.latest) latestBlock = early.latest;
    const receipt = early?.receipt ?? await waitForReceipt(network.client, {
      hash: () => sent.hashes(),
      confirmations: this.#o.confirmations,
      timeoutMs: Math.max(0, deadline - performance.now()),
      pollingIntervalMs: this.#o.pollingIntervalMs,
      onRpcError: () => this.#o.observe?.rpcError?.(network.name),
      abandon: () => sent.superseded,
      onLatestBlock: (block) => (latestBlock = block),
    });
    if (!receipt) {
      const latest = sent.hashes().at(-1);
      if (sent.superseded && this.#o.reconcile) {
        logger.warn({ id: record.id, txHash: latest }, "settle transaction's nonce went to a gap filler; deciding the row now");
        await this.#o.reconcile((await ledger.getById(record.id)) ?? record).catch((error: unknown) => logger.warn({ id: record.id, err: String(error) }, "reconciler: row left for the next round"));
      } else {
        // Not mined by the deadline: a cancel or a substitute may have spent the authorization meanwhile.
        const decision = await decidePayment(network.chain, termsOf(record), { ours: sent.hashes() });
        if (decision.outcome === "paid" || decision.outcome === "failed" || decision.outcome === "undecided") return this.#decided(record, network, decision);
        logger.warn({ id: record.id, txHash: latest }, "settle receipt not confirmed by the deadline; the reconciler follows it");
      }
      await ledger.deferCheck(record.id, 0).catch(() => undefined);
      // With the ledger unreachable, what this instance knows: the transaction it sent, not yet mined.
      const known = (await ledger.getById(record.id).catch(() => undefined)) ?? { ...record, status: "sent" as const, ...(latest ? { txHash: latest } : {}) };
      return this.#resultOf(known);
    }
    const hash = receipt.transactionHash;
    this.#o.observe?.confirmationWait?.(network.name, (performance.now() - sentAt) / 1000);
    if (receipt.status === "reverted") {
      // The other versions share its nonce: none of them can be mined now.
      for (const other of sent.hashes()) if (other !== hash) await ledger.markTransaction(other, "replaced").catch(() => undefined);
      await this.outbox.writeOrKeep(`transaction ${hash} reverted`, () => ledger.markTransaction(hash, "reverted"));
      this.#o.observe?.revertedGas?.(network.name, receipt.gasUsed);
    }
    return this.#decided(record, network, await decidePayment(network.chain, termsOf(record), { ours: [receipt], ...(latestBlock ? { knownBlock: latestBlock } : {}) }), hash);
  }

  /**
   * Records what the payment decision said of a row this settle followed, and answers it: settled by the
   * paying transfer (ours, or a copy of ours mined first); failed, its payer penalised; undecided (503),
   * left to the reconciler. `ours`: our transaction that was mined, if any.
   */
  async #decided(record: SettlementRecord, network: SettlementNetwork, decision: PaymentDecision, ours?: Hex): Promise<SettlementResult> {
    const { ledger, logger } = this.#o;
    switch (decision.outcome) {
      case "paid":
        // Anyone can resend our transaction's input from the pending pool with a higher tip: the copy paid
        // the payee, ours reverted. The payment was made, and the payer did nothing wrong.
        if (ours && decision.transfer.txHash !== ours) {
          logger.warn({ id: record.id, txHash: ours, paidBy: decision.transfer.txHash, payer: record.key.authorizer }, "settle transaction reverted: another transaction used the authorization first; settled with its hash");
        }
        return this.#settled(record, decision.transfer);
      case "unused":
      case "undecided": {
        // Failing it (and penalising its payer) would be a guess: the copy of a pending transaction is
        // common enough. The row stays sent; the reconciler decides it from the chain, and a retry of this
        // settle gets that outcome.
        const reason = decision.outcome === "undecided" ? decision.reason : "the transaction succeeded without using the authorization";
        logger.warn({ id: record.id, txHash: ours, payer: record.key.authorizer, reason }, "settle outcome not known yet: answered 503, left to the reconciler");
        await ledger.deferCheck(record.id, 0).catch(() => undefined);
        return { kind: "undecided", reason, ...(ours ? { txHash: ours } : {}) };
      }
      case "failed": {
        const mine = decision.cause === "reverted" ? decision.by.txHash : ours;
        const failure = { error: decision.error, ...(mine ? { txHash: mine } : {}) };
        await ledger.markFailed(record.id, failure).catch((error: unknown) => {
          this.outbox.add(`settlement ${record.id} failed`, () => ledger.markFailed(record.id, failure));
          this.#o.onLedgerFault?.(error);
          logger.warn({ id: record.id, txHash: mine, err: String(error) }, "settlement failed while the ledger is unreachable: record kept in the outbox");
        });
        await this.#penalize(record, network, decision);
        // Spent by something else: no transaction is named (ours did not pay, and the other is not this payment).
        return { kind: "failed", error: decision.error, ...(decision.cause === "reverted" ? { txHash: decision.by.txHash } : {}) };
      }
    }
  }

  /**
   * Records the row settled by `outcome` and answers settled. Mined is mined: with the ledger unreachable
   * the answer is still `settled`, and the record waits in the outbox until the database is back.
   */
  async #settled(record: SettlementRecord, transfer: PaidTransfer): Promise<SettlementResult> {
    const { ledger, logger } = this.#o;
    const outcome = { txHash: transfer.txHash, blockNumber: transfer.blockNumber, blockTimestamp: transfer.blockTimestamp };
    try {
      return { kind: "settled", record: await ledger.markSettled(record.id, outcome), transfer };
    } catch (error) {
      if (error instanceof IllegalTransitionError) throw error;
      this.outbox.add(`settlement ${record.id} settled by ${outcome.txHash}`, () => ledger.markSettled(record.id, outcome));
      this.#o.onLedgerFault?.(error);
      logger.warn({ id: record.id, txHash: outcome.txHash, err: String(error) }, "settlement mined while the ledger is unreachable: answered settled, record kept in the outbox");
      return { kind: "settled", record: { ...record, status: "settled", ...outcome }, transfer };
    }
  }

  /** A payment failed by its payer's doing (a revert, a cancel, a substitute under its nonce): refuse the payer for a while. */
  async #penalize(record: SettlementRecord, network: SettlementNetwork, failed: Extract<PaymentDecision, { outcome: "failed" }>): Promise<void> {
    const { logger, revertPenaltySeconds, ledger } = this.#o;
    logger.warn({ id: record.id, txHash: failed.by.txHash, payer: record.key.authorizer, cause: failed.cause }, failed.cause === "reverted" ? "settlement reverted on chain" : "settlement failed: the authorization was spent by another transaction");
    if (revertPenaltySeconds <= 0) return;
    // The deciding block's time; the wall clock only when the chain cannot say (a penalty, not a payment).
    const blockTime = await network.chain.blockTime(failed.by.blockNumber).catch(() => BigInt(Math.floor(Date.now() / 1000)));
    const penalty = penaltyOf(record, failed, blockTime, revertPenaltySeconds);
    if (!penalty) return;
    try {
      await this.outbox.writeOrKeep(`revert penalty of ${record.key.authorizer}`, () => ledger.penalize(penalty));
    } catch (error) {
      logger.error({ id: record.id, err: String(error) }, "ledger: revert penalty not recorded");
    }
  }

  /** Takes settlements handed to key holders while this instance holds keys, and sends them. */
  drain(): Promise<void> {
    if (this.#draining) {
      this.#again = true;
      return this.#draining;
    }
    this.#draining = (async () => {
      do {
        this.#again = false;
        await this.#drainOnce();
      } while (this.#again);
    })().finally(() => (this.#draining = undefined));
    return this.#draining;
  }

  async #drainOnce(): Promise<void> {
    const held = this.#o.keys.held();
    if (held.length === 0) return;
    const rows = await this.#o.ledger.takeQueued({
      owner: this.#o.instanceId,
      chainIds: [...this.#o.networks.keys()],
      limit: held.length * 8,
      ownerTtlMs: this.#ownerTtlMs,
    });
    for (const row of rows) {
      const network = this.#o.networks.get(row.key.chainId)!;
      const from = network.relayer.pick(this.#o.keys.held());
      if (!from) {
        await this.#o.ledger.requeue(row.id, this.#o.instanceId);
        continue;
      }
      // The handler waits on the ledger; the deadline is the row's (its settle time-out).
      const deadline = performance.now() + Math.max(0, (row.deadlineAt ?? 0) - Date.now()) + this.#o.settleTimeoutMs;
      this.#active.add(row.id);
      void this.#track(this.#execute(row, row.call!, network, from, deadline))
        .catch((error: unknown) => this.#o.logger.error({ id: row.id, err: String(error) }, "handed-off settle failed"))
        .finally(() => this.#active.delete(row.id));
    }
  }

  /** Starts taking handed-off settlements (notified by the ledger, and polling as a fallback). */
  start(): void {
    const wake = () => void this.drain().catch((error: unknown) => this.#o.logger.error({ err: String(error) }, "ledger: taking queued settlements failed"));
    this.#unsubscribe = this.#o.ledger.onQueued(wake);
    this.#poll = setInterval(wake, this.#o.queuePollMs ?? 1_000);
    this.#poll.unref();
    wake();
  }

  /** Stops taking new work and waits (up to `graceMs`) for the sends and receipt waits in flight. */
  async stop(graceMs = 30_000): Promise<void> {
    this.#unsubscribe?.();
    clearInterval(this.#poll);
    await Promise.race([Promise.allSettled([...this.#inFlight, this.#draining]), new Promise((r) => setTimeout(r, graceMs).unref())]);
  }
}
