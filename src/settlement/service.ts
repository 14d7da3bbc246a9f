import type { Address } from "viem";
import type { Ledger, SettlementRecord } from "../ledger/types.js";
import { adoptKey, releaseKey, takeHandedOver } from "./handover.js";
import { LedgerOutbox } from "./outbox.js";
import { sendClaimed } from "./send.js";
import { answerOfRow, type KeyHolder, type SettleClaim, type SettlementLogger, type SettlementNetwork, type SettlementResult, type SettlementSteps, type Simulation } from "./steps.js";

export { Fenced } from "./send.js";
export type { KeyHolder, RelayerPort, SettleClaim, SettlementLogger, SettlementNetwork, SettlementResult, Simulation } from "./steps.js";

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
  /** A payer whose payment failed by its own doing (a revert, a cancel, a substitute under its nonce) is refused this long, in chain seconds; 0 = never. */
  revertPenaltySeconds: number;
  /** Key holders look for settlements handed to them this often, besides being notified; default 1 s. */
  queuePollMs?: number;
  /** Told of a ledger call that failed (the database may be down): the outage watch. */
  onLedgerFault?: (error: unknown) => void;
  logger: SettlementLogger;
  observe?: {
    confirmationWait?(network: string, seconds: number): void;
    revertedGas?(network: string, gas: bigint): void;
    rpcError?(network: string): void;
  };
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
  readonly #steps: SettlementSteps;
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
    this.#steps = {
      ledger: options.ledger,
      instanceId: options.instanceId,
      outbox: this.outbox,
      logger: options.logger,
      confirmations: options.confirmations,
      pollingIntervalMs: options.pollingIntervalMs,
      reconcileAfterMs: options.reconcileAfterMs ?? 10_000,
      revertPenaltySeconds: options.revertPenaltySeconds,
      ...(options.onLedgerFault ? { onLedgerFault: options.onLedgerFault } : {}),
      // A forgotten transaction is broadcast again only by its key's lease holder.
      mayBroadcast: (relayer) => options.keys.holds(relayer),
      now: Date.now,
      ...(options.observe ? { observe: options.observe } : {}),
    };
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
      if (outcome.status === "failed" && outcome.errorCode === "notSent" && deadline - performance.now() > 1_000) continue;
      if (outcome.status === "failed") return answerOfRow(this.#steps, network, outcome);
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
      await ledger.withdraw(record.id, { code: "notSent", owner: instanceId }).catch(() => undefined);
      throw error;
    }
    if ("refusal" in simulation) {
      // Refused before sending: the row fails with the reason (and may be claimed again later).
      await ledger.withdraw(record.id, { code: simulation.refusal, owner: instanceId });
      return { kind: "failed", code: simulation.refusal };
    }
    const from = network.relayer.pick(this.#o.keys.held());
    const sent = from ? await this.#track(sendClaimed(this.#steps, record, simulation.call, network, from, deadline)) : "fenced";
    if (sent !== "fenced") return sent;
    // No key of ours to send from (or its lease lapsed meanwhile): a key holder sends it.
    if (await ledger.requeue(record.id, instanceId, simulation.call)) {
      this.#o.logger.debug({ id: record.id, network: network.name }, "settle handed to a relayer key holder");
    }
    record = (await this.#outcomeOf(record.id, deadline)) ?? record;
    if (record.status === "claimed") {
      // Nothing was sent in time: withdraw it (while nobody has recorded a transaction), so nothing is sent after the answer.
      const withdrawn = await ledger.withdraw(record.id, { code: "notSent", owner: record.owner ?? null });
      if (withdrawn) return { kind: "notSent", reason: "no relayer key holder sent the settlement in time" };
      record = (await ledger.getById(record.id)) ?? record;
    }
    return answerOfRow(this.#steps, network, record);
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
    const released = await this.#o.ledger.withdrawOwned({ owner: this.#o.instanceId, code: "notSent", keep: [...this.#active] });
    if (released.length > 0) this.#o.logger.info({ released }, "claims abandoned during the ledger outage released (nothing was sent for them)");
    return true;
  }

  #track<T>(work: Promise<T>): Promise<T> {
    this.#inFlight.add(work);
    void work.finally(() => this.#inFlight.delete(work)).catch(() => undefined);
    return work;
  }

  /**
   * Follows the relayer key `address`, leased to this instance now under generation `epoch`: the key's
   * recorded transactions in flight (settlements' and gap fillers) go to the relayer, which sends under
   * that lease only (after a restart, or a key taken over).
   */
  adopt(address: Address, epoch: number): void {
    adoptKey(this.#steps, this.#o.networks, this.#o.keys, address, epoch);
  }

  /**
   * The lease of `address` is no longer this instance's: nothing more is sent from the key here, and its
   * transactions in flight are left to their records for the next holder. Returns how many there were.
   */
  release(address: Address): number {
    return releaseKey(this.#o.networks, address);
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
    const taken = await takeHandedOver(this.#steps, { keys: this.#o.keys, networks: this.#o.networks, ownerTtlMs: this.#ownerTtlMs, settleTimeoutMs: this.#o.settleTimeoutMs });
    for (const { row, network, from, deadline } of taken) {
      this.#active.add(row.id);
      void this.#track(sendClaimed(this.#steps, row, row.call!, network, from, deadline))
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
