import { setTimeout as delay } from "node:timers/promises";
import type { Address, PublicClient } from "viem";
import type { ChainHistoryRecord, Checkpoint, PendingHistoryChange, SettlementRecord } from "../ledger/types.js";
import { HistoryCheckError, HistoryReads, message, sameHash, type RowProver } from "./chain-history-reads.js";
import type { BlockRef, HistoryStore } from "./nonce-store.js";
import type { IndexLogger } from "./token-index-types.js";

export { HistoryCheckError, type RowProof, type RowProver } from "./chain-history-reads.js";

/** Parameters of {@link ChainHistory}. */
export interface ChainHistoryParameters {
  /** Names the network in logs. */
  network: string;
  client: PublicClient;
  chainId: number;
  token: Address;
  /** The ledger. */
  store: HistoryStore;
  logger: IndexLogger;
  /**
   * The one payment decision, for a settled row (settlement's `proveSettled` over the network's chain reads): a row is
   * kept, or set aside, by what it says.
   */
  prove: RowProver;
  /** How often the chain is checked against the ledger's trail of its blocks, and a checkpoint recorded; 0: only when asked. */
  checkIntervalMs: number;
  /** A change (or its undoing) is believed when the chain still shows it this long after it first did; default 2,000 ms. */
  confirmAfterMs?: number;
  /** Waits `ms` (default a timer): a test's clock moves instead. */
  wait?: (ms: number) => Promise<void>;
  /** Told how many rows of each kind a change set aside (metrics). */
  onSetAside?(counts: { settlements: number; penalties: number; paymentIdentifiers: number; catalogEntries: number; indexedNonces: number }): void;
  /** Told how many rows of each kind came back when a change was undone (metrics). */
  onRestored?(counts: { settlements: number; penalties: number; paymentIdentifiers: number; catalogEntries: number; indexedNonces: number }): void;
}

/** Settled rows after the common block whose receipts are read to keep them (the newest); older ones are set aside unread. */
export const PROOF_LIMIT = 1_000;
/** Receipts read at once. */
const PROOF_BATCH = 32;
/** Changes still set aside that each check asks the chain about (the latest). */
const PENDING_CHANGES = 4;
const DEFAULT_CONFIRM_MS = 2_000;

/**
 * A decision on what the ledger knows of the chain: the same history (`record`: the head is a checkpoint to record; not
 * when the node is behind every checkpoint), first sight, or another history from `common` on (nothing in common:
 * absent), proven by `evidence` (what the chain answered: a block's other hash, a settled row disproven).
 */
type Decision =
  | { kind: "same"; record: boolean }
  | { kind: "first" }
  | { kind: "change"; common?: BlockRef; since?: number; reason: string; evidence: string[]; disproven: number[] };
type Change = Extract<Decision, { kind: "change" }>;

/**
 * Binds what the ledger knows of a chain to the chain's history: its genesis hash and a trail of its blocks
 * (checkpoints: the index's stored progress, each start-up, a periodic look). At start-up, periodically, and when
 * the index finds the chain's history changed under it ({@link diverged}), it compares the trail with the chain:
 *
 * - another genesis: nothing in common;
 * - a block of the trail replaced (a snapshot reverted, a branch replaced, a local chain restarted): the newest block
 *   both share is common;
 * - a settled payment after the trail the chain disproves: the history changed after the trail's newest block;
 * - otherwise the same history; a head below every block of the trail is a node behind, never another history.
 *
 * It acts only on proof that survives a node behind: a block the node holds with another hash, a receipt (or a block)
 * that shows the payment is not there; and only when the chain shows it again `confirmAfterMs` later. The rows of the
 * other history are set aside by the ledger (`adoptChainHistory`): settled rows after the common block but those the
 * one payment decision proves here; with nothing in common, every row of the chain. Nothing is deleted: a change the
 * chain later shows wrong (the trail it set aside is the chain's after all, or the payments it disproved are proven) is
 * undone, every row back (`restoreChainHistory`).
 */
export class ChainHistory {
  readonly #p: ChainHistoryParameters;
  readonly #reads: HistoryReads;
  readonly #confirmMs: number;
  /** The last check asked for, settled either way: the next one runs after it. */
  #running: Promise<void> = Promise.resolve();
  #queued: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  readonly #stopping = new AbortController();

  constructor(parameters: ChainHistoryParameters) {
    this.#p = parameters;
    this.#reads = new HistoryReads(parameters.client, parameters.prove);
    this.#confirmMs = parameters.confirmAfterMs ?? DEFAULT_CONFIRM_MS;
  }

  /** Checks the chain against the ledger once (throws {@link HistoryCheckError} when it cannot), then periodically. */
  async start(): Promise<void> {
    await this.check();
    this.#schedule();
  }

  stop(): void {
    this.#stopped = true;
    this.#stopping.abort();
    clearTimeout(this.#timer);
  }

  /**
   * The index found the chain's history changed: from after `common` (the newest block both share, by the index's own
   * trail), or deeper than it can walk (undefined). Resolves once the ledger is bound to the chain now.
   */
  diverged(common: BlockRef | undefined): Promise<void> {
    return this.#serial(() => this.#check(common));
  }

  /** Compares the chain with what the ledger knows and sets aside what belongs to another history (one check at a time). */
  check(): Promise<void> {
    // A check waiting already sees whatever changed before it runs: callers meanwhile share it.
    return this.#queued ?? this.#serial(() => this.#check(undefined));
  }

  #serial(work: () => Promise<void>): Promise<void> {
    const next = this.#running.then(() => {
      if (this.#queued === next) this.#queued = undefined;
      return work();
    });
    this.#queued = next;
    this.#running = next.catch(() => {});
    return next;
  }

  #schedule(): void {
    if (this.#stopped || this.#p.checkIntervalMs <= 0) return;
    this.#timer = setTimeout(() => {
      void this.check()
        .catch((error: unknown) => this.#p.logger.debug({ network: this.#p.network, err: String(error) }, "chain history: check failed; the next one tries again"))
        .finally(() => this.#schedule());
    }, this.#p.checkIntervalMs);
    this.#timer.unref();
  }

  /** Waits the confirmation time; false when stopped meanwhile. */
  async #later(): Promise<boolean> {
    if (this.#stopped) return false;
    if (this.#p.wait) await this.#p.wait(this.#confirmMs);
    else await delay(this.#confirmMs, undefined, { signal: this.#stopping.signal, ref: false }).catch(() => {});
    return !this.#stopped;
  }

  async #look(): Promise<[BlockRef, ChainHistoryRecord | undefined]> {
    try {
      return await Promise.all([this.#reads.head(), this.#p.store.chainHistory(this.#p.chainId)]);
    } catch (error) {
      if (error instanceof HistoryCheckError) throw error;
      throw new HistoryCheckError(`cannot compare the chain with the ledger: ${message(error)}`, { cause: error });
    }
  }

  async #check(hint: BlockRef | undefined): Promise<void> {
    const { chainId, store } = this.#p;
    // Another instance may change the chain's rows between our decision and our change: decide again then.
    for (let attempt = 0; attempt < 3; attempt++) {
      let [head, stored] = await this.#look();
      let decision = await this.#decide(head, stored, hint);
      if (decision.kind === "same") {
        // A head below the trail's newest block is a node behind: a checkpoint of it would date the blocks before it late.
        const newest = stored?.checkpoints[0];
        if (decision.record && (!newest || head.number >= newest.number)) await store.recordCheckpoint(chainId, head);
        if (stored) await this.#undo(head, stored);
        return;
      }
      if (decision.kind === "first") {
        const adopted = await store.adoptChainHistory({ chainId, genesisHash: await this.#genesis(), common: head, epoch: undefined, reason: "first sight of the chain" });
        if (!adopted.adopted) continue;
        this.#p.logger.info({ network: this.#p.network, chainId, block: Number(head.number) }, "chain history: the ledger's rows of this chain are bound to its genesis from now on");
        return;
      }
      // Believed only when the chain still shows it a while later (a node that stumbled once, a forged answer).
      const first = decision;
      if (!(await this.#later())) return;
      [head, stored] = await this.#look();
      decision = await this.#decide(head, stored, hint);
      if (decision.kind !== "change" || !decision.evidence.some((e) => first.evidence.includes(e))) {
        this.#p.logger.info(
          { network: this.#p.network, chainId, reason: first.reason },
          "chain history: the chain showed another history once and not again; nothing changes",
        );
        return;
      }
      if (await this.#adopt(decision, head, stored)) return;
    }
    throw new HistoryCheckError("the chain's rows kept changing under the check (other instances); the next check tries again");
  }

  /** Sets aside the rows of the history the ledger knew; false when another instance changed them first. */
  async #adopt(decision: Change, head: BlockRef, stored: ChainHistoryRecord | undefined): Promise<boolean> {
    const { chainId, store } = this.#p;
    const keep = await this.#proven(decision, head);
    // Catalog entries carry their payment's block time: those at or after the shared block's go with it.
    const commonTime = decision.common && decision.since !== undefined ? await this.#reads.timeOf(decision.common.number) : undefined;
    const adopted = await store.adoptChainHistory({
      chainId,
      genesisHash: await this.#genesis(),
      ...(decision.common ? { common: decision.common } : {}),
      ...(decision.since !== undefined ? { since: decision.since } : {}),
      ...(commonTime !== undefined ? { commonTime } : {}),
      keep,
      disproven: decision.disproven,
      epoch: stored?.epoch,
      reason: decision.reason,
    });
    if (!adopted.adopted) return false;
    await store.recordCheckpoint(chainId, head);
    const { adopted: _, epoch, ...counts } = adopted;
    this.#p.onSetAside?.(counts);
    const at = { network: this.#p.network, chainId, reason: decision.reason, common: decision.common ? Number(decision.common.number) : null };
    if (Object.values(counts).some((count) => count > 0)) {
      this.#p.logger.warn({ ...at, epoch, ...counts }, "chain history: the ledger held rows of another history of this chain; they are set aside (kept with the change, never served)");
    } else this.#p.logger.info(at, "chain history: the chain's history changed; nothing the ledger holds belonged to the other one");
    return true;
  }

  async #genesis() {
    const genesis = await this.#reads.hashAt(0n);
    if (!genesis) throw new HistoryCheckError("the node holds no block 0");
    return genesis;
  }

  async #decide(head: BlockRef, stored: ChainHistoryRecord | undefined, hint: BlockRef | undefined): Promise<Decision> {
    if (!stored) {
      // First sight (a new ledger, or one from before chain identity): its rows are taken as this chain's. Anything the
      // ledger learned beyond the chain's head waits for a node that shows it (this one may be behind).
      const { chainId, token, store } = this.#p;
      const [progress, [beyond]] = await Promise.all([store.nonceIndexProgress({ chainId, token }), store.settledAfter(chainId, { afterBlock: head.number, limit: 1 })]);
      if ((progress && progress.throughBlock > head.number) || beyond) return this.#behind(head, "the ledger knows blocks beyond the chain's head; it binds the chain once a node shows them");
      return { kind: "first" };
    }
    const checkable = stored.checkpoints.filter((c) => c.number <= head.number);
    // The cheap case first (one read): the newest checkpoint is at or below the chain's head and still there. A
    // block's hash covers every block before it, the genesis too.
    const newest = checkable[0];
    if (!hint && newest && newest === stored.checkpoints[0] && sameHash(await this.#reads.hashAt(newest.number), newest.hash)) return this.#sameAfter(newest, head);
    const genesis = await this.#reads.hashAt(0n);
    if (genesis && !sameHash(genesis, stored.genesisHash)) return { kind: "change", reason: "the chain's genesis block is another", evidence: [`0:${genesis}`], disproven: [] };
    if (stored.checkpoints.length > 0 && !newest) return this.#behind(head, `the chain's head ${head.number} is below every block of the ledger's trail`);
    const hashes = await Promise.all(checkable.map((c) => this.#reads.hashAt(c.number)));
    // A block of the trail the node holds with another hash (one it does not hold proves nothing).
    const replaced = checkable.filter((c, i) => hashes[i] !== undefined && !sameHash(hashes[i], c.hash));
    const sinceOf = (common: bigint) => stored.checkpoints.find((c) => c.number <= common)?.recordedAt ?? 0;
    if (replaced.length > 0) {
      const lowest = replaced.at(-1)!.number;
      let common: BlockRef | undefined = checkable.find((c, i) => sameHash(hashes[i], c.hash) && c.number < lowest);
      // The index's trail is denser than the ledger's: its common block, when the chain still has it, is nearer.
      if (hint && hint.number < lowest && hint.number > (common?.number ?? -1n) && sameHash(await this.#reads.hashAt(hint.number), hint.hash)) common = hint;
      return {
        kind: "change",
        // With the same genesis, block 0 is always common: whatever came after it is proven (or not) by receipts.
        common: common ?? { number: 0n, hash: stored.genesisHash },
        since: common ? sinceOf(common.number) : 0,
        reason: `the chain replaced block ${lowest} of the ledger's trail`,
        evidence: replaced.map((c) => `${c.number}:${hashes[checkable.indexOf(c)]}`),
        disproven: [],
      };
    }
    const shown = checkable.find((_, i) => hashes[i] !== undefined);
    if (!hint) return shown ? this.#sameAfter(shown, head) : { kind: "same", record: true };
    // The index saw blocks after `hint` replaced, and every block of the trail the chain shows is there: the settled
    // payments after both are read again, each disproven one the evidence.
    const from: BlockRef = shown && shown.number > hint.number ? shown : hint;
    const rows = await this.#p.store.settledAfter(this.#p.chainId, { afterBlock: from.number, limit: PROOF_LIMIT });
    const verdicts = await this.#verdicts(rows, head);
    const disproven = rows.filter((_, i) => verdicts[i] === "disproven").map((row) => row.id);
    if (disproven.length === 0) return { kind: "same", record: true };
    return {
      kind: "change",
      common: from,
      since: sinceOf(from.number),
      reason: `the chain replaced its blocks after ${from.number}: ${disproven.length} settled payment(s) after it are not on the chain`,
      evidence: disproven.map((id) => `row:${id}`),
      disproven,
    };
  }

  #behind(head: BlockRef, why: string): Decision {
    this.#p.logger.debug({ network: this.#p.network, chainId: this.#p.chainId, block: Number(head.number) }, `chain history: a node behind proves nothing (${why})`);
    return { kind: "same", record: false };
  }

  /**
   * The same history through `newest`, and still the same unless the latest payment settled after it is disproven on
   * the chain (a block after the checkpoint replaced): one receipt per check. A payment the chain shows in its block
   * vouches for the blocks before it.
   */
  async #sameAfter(newest: Checkpoint, head: BlockRef): Promise<Decision> {
    const [latest] = await this.#p.store.settledAfter(this.#p.chainId, { afterBlock: newest.number, limit: 1 });
    if (!latest || (await this.#reads.verdict(latest, head.number)) !== "disproven") return { kind: "same", record: true };
    return {
      kind: "change",
      common: newest,
      since: newest.recordedAt,
      reason: `a payment settled after block ${newest.number} is not on the chain (head ${head.number})`,
      evidence: [`row:${latest.id}`],
      disproven: [latest.id],
    };
  }

  /** The settled rows after the common block that stay: those the payment decision proves on the chain now. */
  async #proven(decision: Change, head: BlockRef): Promise<number[]> {
    const rows = await this.#p.store.settledAfter(this.#p.chainId, { ...(decision.common ? { afterBlock: decision.common.number } : {}), limit: PROOF_LIMIT });
    const verdicts = await this.#verdicts(rows, head);
    return rows.filter((_, i) => verdicts[i] === "proven").map((row) => row.id);
  }

  async #verdicts(rows: readonly SettlementRecord[], head: BlockRef): Promise<Array<"proven" | "disproven" | "unknown">> {
    const verdicts: Array<"proven" | "disproven" | "unknown"> = [];
    for (let at = 0; at < rows.length; at += PROOF_BATCH) verdicts.push(...(await Promise.all(rows.slice(at, at + PROOF_BATCH).map((row) => this.#reads.verdict(row, head.number)))));
    return verdicts;
  }

  /**
   * Undoes the changes whose set-aside history the chain shows after all (asked again `confirmAfterMs` later): the
   * newest block of the trail they set aside is there (with their genesis), or, where they set no block aside, every
   * payment they disproved is proven.
   */
  async #undo(head: BlockRef, stored: ChainHistoryRecord): Promise<void> {
    const { chainId, store } = this.#p;
    const pending = await store.pendingHistoryChanges(chainId, { limit: PENDING_CHANGES });
    let shown: PendingHistoryChange | undefined;
    for (const change of pending) if (!shown && (await this.#holds(change, head))) shown = change;
    if (!shown || !(await this.#later())) return;
    const [again, now] = await this.#look();
    if (!now || now.epoch !== stored.epoch || !(await this.#holds(shown, again))) return;
    const restored = await store.restoreChainHistory(chainId, shown.id, { epoch: now.epoch });
    if (!restored.restored) return;
    const { restored: _, epoch, leftAside, ...counts } = restored;
    this.#p.onRestored?.(counts);
    this.#p.logger.warn(
      { network: this.#p.network, chainId, change: shown.id, reason: shown.reason, epoch, leftAside, ...counts },
      "chain history: the chain holds the history a change set aside after all; its rows are back",
    );
  }

  /** Whether the chain now holds the history `change` set aside. */
  async #holds(change: PendingHistoryChange, head: BlockRef): Promise<boolean> {
    const top = change.trail[0];
    if (top && (top.number > head.number || !sameHash(await this.#reads.hashAt(top.number), top.hash))) return false;
    if (change.everything && change.genesisHash && !sameHash(await this.#reads.hashAt(0n), change.genesisHash)) return false;
    if (top || (change.everything && change.genesisHash)) return true;
    if (change.disproven.length === 0) return false;
    // One at a time: a change that stands (the usual case) costs one payment decision per check.
    for (const row of change.disproven) if ((await this.#reads.verdict(row, head.number)) !== "proven") return false;
    return true;
  }
}
