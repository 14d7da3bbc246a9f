import { TransactionReceiptNotFoundError, type Address, type Hex, type PublicClient, type TransactionReceipt } from "viem";
import type { ChainHistoryRecord, SettlementRecord } from "../ledger/types.js";
import type { BlockRef, HistoryStore } from "./nonce-store.js";
import { tokenEvent, type RawLog } from "./token-events.js";
import type { IndexLogger } from "./token-index-types.js";
import { KitError } from "../protocol/errors.js";

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
  /** How often the chain is checked against the ledger's trail of its blocks, and a checkpoint recorded; 0: only when asked. */
  checkIntervalMs: number;
  /** Told how many rows of each kind a change set aside (metrics). */
  onSetAside?(counts: { settlements: number; penalties: number; paymentIdentifiers: number; catalogEntries: number; indexedNonces: number }): void;
}

/** Settled rows after the common block whose receipts are read to keep them (the newest); older ones are set aside unread. */
export const PROOF_LIMIT = 1_000;
/** Receipts read at once. */
const PROOF_BATCH = 32;

/** A decision on what the ledger knows of the chain: the same history, or another from `common` on (nothing in common: absent). */
type Decision =
  | { same: true }
  | { same: false; common?: BlockRef; since?: number; reason: string };

/** Why a check of the chain's history could not finish (an RPC or the ledger failed); nothing was changed. */
export class HistoryCheckError extends KitError<"history_check_failed"> {
  override name = "HistoryCheckError";
  constructor(message: string, options?: ErrorOptions) {
    super("history_check_failed", message, options);
  }
}

/**
 * Binds what the ledger knows of a chain to the chain's history: its genesis hash and a trail of its blocks
 * (checkpoints: the index's stored progress, each start-up, a periodic look). At start-up, periodically, and when
 * the index finds the chain's history changed under it ({@link diverged}), it compares the trail with the chain:
 *
 * - another genesis, or none of the trail's blocks on the chain (a local chain restarted): nothing in common;
 * - a block of the trail replaced (a snapshot reverted, a branch replaced): the newest block both share is common;
 * - otherwise the same history; the settled rows after the newest checkpoint must still show on chain.
 *
 * The rows of the other history are set aside by the ledger (`adoptChainHistory`): settled rows after the common
 * block but those whose receipt still proves the payment here (the token's `AuthorizationUsed` of the row's
 * authorization, then its `Transfer` to the row's payee of the row's value); with nothing in common, every row of
 * the chain. It acts only on proof (a hash that differs): a node behind the trail proves nothing, and its rows stay.
 */
export class ChainHistory {
  readonly #p: ChainHistoryParameters;
  /** The last check asked for, settled either way: the next one runs after it. */
  #running: Promise<void> = Promise.resolve();
  #queued: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(parameters: ChainHistoryParameters) {
    this.#p = parameters;
  }

  /** Checks the chain against the ledger once (throws {@link HistoryCheckError} when it cannot), then periodically. */
  async start(): Promise<void> {
    await this.check();
    this.#schedule();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  /**
   * The index found the chain's history changed: from after `common` (the newest block both share, proven by the
   * index's own trail), or deeper than it can walk (undefined). Resolves once the ledger is bound to the chain now.
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

  async #check(hint: BlockRef | undefined): Promise<void> {
    const { client, chainId, store } = this.#p;
    // Another instance may change the chain's rows between our decision and our change: decide again then.
    for (let attempt = 0; attempt < 3; attempt++) {
      let head: BlockRef;
      let stored: ChainHistoryRecord | undefined;
      try {
        [head, stored] = await Promise.all([
          client.getBlock({ blockTag: "latest" }).then((block) => ({ number: block.number, hash: block.hash })),
          store.chainHistory(chainId),
        ]);
      } catch (error) {
        throw new HistoryCheckError(`cannot compare the chain with the ledger: ${message(error)}`, { cause: error });
      }
      const decision = await this.#decide(head, stored, hint);
      if (decision.same) {
        await store.recordCheckpoint(chainId, head);
        return;
      }
      const genesisHash = await this.#hashAt(0n);
      const keep = await this.#proven(decision, head);
      // Catalog entries carry their payment's block time: those at or after the shared block's go with it.
      const commonTime = decision.common && decision.since !== undefined ? await this.#timeOf(decision.common.number) : undefined;
      const adopted = await store.adoptChainHistory({
        chainId,
        genesisHash,
        ...(decision.common ? { common: decision.common } : {}),
        ...(decision.since !== undefined ? { since: decision.since } : {}),
        ...(commonTime !== undefined ? { commonTime } : {}),
        keep,
        epoch: stored?.epoch,
        reason: decision.reason,
      });
      if (!adopted.adopted) continue;
      await store.recordCheckpoint(chainId, head);
      const { adopted: _, epoch, ...counts } = adopted;
      this.#p.onSetAside?.(counts);
      const moved = Object.values(counts).some((count) => count > 0);
      const at = { network: this.#p.network, chainId, reason: decision.reason, common: decision.common ? Number(decision.common.number) : null };
      if (moved) this.#p.logger.warn({ ...at, epoch, ...counts }, "chain history: the ledger held rows of another history of this chain; they are set aside (kept in set_aside_rows, never served)");
      else if (stored === undefined) this.#p.logger.info({ network: this.#p.network, chainId, block: Number(head.number) }, "chain history: the ledger's rows of this chain are bound to its genesis from now on");
      else this.#p.logger.info(at, "chain history: the chain's history changed; nothing the ledger holds belonged to the other one");
      return;
    }
    throw new HistoryCheckError("the chain's rows kept changing under the check (other instances); the next check tries again");
  }

  async #decide(head: BlockRef, stored: ChainHistoryRecord | undefined, hint: BlockRef | undefined): Promise<Decision> {
    if (!stored) {
      // First sight (a new ledger, or one from before chain identity): its rows are taken as this chain's, unless the
      // index's progress reaches past the chain's head (then they were learned on a longer, other history).
      const progress = await this.#p.store.nonceIndexProgress({ chainId: this.#p.chainId, token: this.#p.token });
      if (progress && progress.throughBlock > head.number) return { same: false, reason: `the ledger's index reached block ${progress.throughBlock}, beyond the chain's head ${head.number}` };
      return { same: false, common: head, reason: "first sight of the chain" };
    }
    const sinceOf = (common: bigint) => stored.checkpoints.find((c) => c.number <= common)?.recordedAt ?? 0;
    if (hint) {
      if (await this.#otherGenesis(stored)) return { same: false, reason: "the chain's genesis block is another" };
      return { same: false, common: hint, since: sinceOf(hint.number), reason: `the chain replaced its blocks after ${hint.number}` };
    }
    const checkable = stored.checkpoints.filter((c) => c.number <= head.number);
    const newest = checkable[0];
    // The cheap case first (one read): the newest checkpoint is at or below the chain's head and still there. A
    // block's hash covers every block before it, the genesis too.
    if (newest && newest === stored.checkpoints[0] && (await this.#hashAt(newest.number)) === newest.hash.toLowerCase()) return this.#sameAfter(newest, head);
    if (await this.#otherGenesis(stored)) return { same: false, reason: "the chain's genesis block is another" };
    if (stored.checkpoints.length === 0) return { same: true };
    const hashes = await Promise.all(checkable.map((c) => this.#hashAt(c.number)));
    // A replaced block is asked once more before it is believed (an RPC behind a load balancer may stumble once).
    const again = await Promise.all(checkable.map((c, i) => (hashes[i] === c.hash.toLowerCase() ? hashes[i] : this.#hashAt(c.number))));
    const replaced = checkable.filter((c, i) => hashes[i] !== c.hash.toLowerCase() && again[i] !== c.hash.toLowerCase());
    // Every checkpoint the chain can show is there; the newer ones are beyond a node that is behind: nothing proven.
    if (replaced.length === 0 && newest) return this.#sameAfter(newest, head);
    const lowest = replaced.at(-1)?.number ?? head.number + 1n;
    const common = checkable.find((c, i) => hashes[i] === c.hash.toLowerCase() && c.number < lowest);
    const reason =
      replaced.length > 0 ? `the chain replaced block ${lowest} of the ledger's trail` : `the chain's head ${head.number} is below every block of the ledger's trail`;
    // With the same genesis, block 0 is always common: whatever came after it is proven (or not) by receipts. A head
    // below every checkpoint is taken as another history too (a restarted chain; a node minutes behind looks the same).
    return { same: false, common: common ?? { number: 0n, hash: stored.genesisHash }, since: common ? common.recordedAt : 0, reason };
  }

  /**
   * The same history through `newest`, and still the same unless the latest payment settled after it does not show on
   * the chain (a block after the checkpoint replaced): one receipt per check. A payment whose receipt shows in its
   * block on the chain now vouches for the blocks before it.
   */
  async #sameAfter(newest: BlockRef & { recordedAt: number }, head: BlockRef): Promise<Decision> {
    const [latest] = await this.#p.store.settledAfter(this.#p.chainId, { afterBlock: newest.number, limit: 1 });
    if (!latest || (await this.#verdict(latest, head)) !== "disproven") return { same: true };
    return { same: false, common: newest, since: newest.recordedAt, reason: `a payment settled after block ${newest.number} is not on the chain` };
  }

  /** The settled rows after the common block that stay: those whose receipt proves them on the chain now. */
  async #proven(decision: Extract<Decision, { same: false }>, head: BlockRef): Promise<number[]> {
    const rows = await this.#p.store.settledAfter(this.#p.chainId, { ...(decision.common ? { afterBlock: decision.common.number } : {}), limit: PROOF_LIMIT });
    const verdicts = await this.#verdicts(rows, head);
    return rows.filter((_, i) => verdicts[i] === "proven").map((row) => row.id);
  }

  async #verdicts(rows: readonly SettlementRecord[], head: BlockRef): Promise<Array<"proven" | "disproven" | "unknown">> {
    const verdicts: Array<"proven" | "disproven" | "unknown"> = [];
    for (let at = 0; at < rows.length; at += PROOF_BATCH) {
      verdicts.push(...(await Promise.all(rows.slice(at, at + PROOF_BATCH).map((row) => this.#verdict(row, head)))));
    }
    return verdicts;
  }

  /** Whether the chain still shows the settled row's payment: its receipt, successful, in the row's block, paying the row's payee its value. */
  async #verdict(row: SettlementRecord, head: BlockRef): Promise<"proven" | "disproven" | "unknown"> {
    if (!row.txHash || row.blockNumber === undefined) return "disproven";
    let receipt: TransactionReceipt;
    try {
      receipt = await this.#p.client.getTransactionReceipt({ hash: row.txHash });
    } catch (error) {
      if (!(error instanceof TransactionReceiptNotFoundError)) throw new HistoryCheckError(`cannot read the receipt of ${row.txHash}: ${message(error)}`, { cause: error });
      return row.blockNumber > head.number ? "unknown" : "disproven";
    }
    return receipt.status === "success" && receipt.blockNumber === row.blockNumber && paysRow(receipt, this.#p.token, row) ? "proven" : "disproven";
  }

  /** Whether the chain's block 0 is another than the stored genesis (asked twice before it is believed). */
  async #otherGenesis(stored: ChainHistoryRecord): Promise<boolean> {
    const genesis = stored.genesisHash.toLowerCase();
    return (await this.#hashAt(0n)) !== genesis && (await this.#hashAt(0n)) !== genesis;
  }

  /** Block `number`'s time, in ms. */
  async #timeOf(number: bigint): Promise<number> {
    try {
      return Number((await this.#p.client.getBlock({ blockNumber: number })).timestamp) * 1000;
    } catch (error) {
      throw new HistoryCheckError(`cannot read block ${number}: ${message(error)}`, { cause: error });
    }
  }

  async #hashAt(number: bigint): Promise<Hex> {
    try {
      return (await this.#p.client.getBlock({ blockNumber: number })).hash.toLowerCase() as Hex;
    } catch (error) {
      throw new HistoryCheckError(`cannot read block ${number}: ${message(error)}`, { cause: error });
    }
  }
}

/** Whether `receipt` holds the token's `AuthorizationUsed` of the row's authorization followed by its `Transfer` of the row's value to its payee. */
function paysRow(receipt: TransactionReceipt, token: Address, row: SettlementRecord): boolean {
  const events = receipt.logs.filter((log) => log.address.toLowerCase() === token.toLowerCase()).map((log) => {
    try {
      return tokenEvent(log as unknown as RawLog);
    } catch {
      return undefined; // a log of the token's that does not decode is none of these
    }
  });
  const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
  const used = events.findIndex((e) => e?.kind === "nonce" && same(e.authorizer, row.key.authorizer) && same(e.nonce, row.key.nonce));
  if (used < 0) return false;
  const transfer = events.slice(used + 1).find((e) => e?.kind === "transfer");
  return transfer?.kind === "transfer" && same(transfer.from, row.key.authorizer) && same(transfer.to, row.payee) && transfer.value === row.value;
}

function message(error: unknown): string {
  return error instanceof Error ? error.message.split("\n")[0]! : String(error);
}
