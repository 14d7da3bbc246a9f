import { hexToBytes, type Address, type Hex, type PublicClient } from "viem";
import { tokenAbi } from "../chain/token-abi.js";
import { BlockReader, InconsistentChainError, type IndexedBlock } from "./block-reader.js";
import { backfillNonces, BackfillStartError, pause } from "./nonce-backfill.js";
import type { BlockRef, NonceScope, NonceStore, StoredNonce } from "./nonce-store.js";
import { SpentFilter } from "./spent-filter.js";
import type { TokenEvent } from "./token-events.js";

/** The logging the index does (pino-compatible). */
export interface IndexLogger {
  info(fields: object, message?: string): void;
  warn(fields: object, message?: string): void;
  debug(fields: object, message?: string): void;
}

/** Parameters of {@link TokenIndex}. */
export interface TokenIndexParameters {
  /** Names the network in logs. */
  network: string;
  client: PublicClient;
  chainId: number;
  token: Address;
  /** Where the used and canceled nonces and the backfill's progress are kept (the ledger). */
  store: NonceStore;
  /** The first block the nonce backfill covers; default: the store's, else the token's deployment block. */
  startBlock?: bigint;
  /** What the operator sets to give the start block (named when it cannot be found). */
  startBlockVariable: string;
  /** Blocks per `eth_getLogs` of the backfill, at most. */
  logRangeBlocks: number;
  /** How often the chain's head is asked for while verifies come in (fewer while none do). */
  pollingIntervalMs: number;
  /** `eth_subscribe("newHeads")` tells of new blocks (a WebSocket RPC) rather than polling alone. */
  subscribe?: boolean;
  /**
   * Spent nonces held in memory at most (default: no bound). Beyond it the oldest stored ones are forgotten, and a
   * nonce not held is asked of the store when a filter of the forgotten ones says it may be among them.
   */
  maxNonces?: number;
  logger: IndexLogger;
  /** Told of each block applied, each failure to follow the chain, and each answer the index could not give. */
  observe?: IndexObserver;
  /**
   * Told when the chain's history changed under the index (proven: a block it had read replaced), from after the
   * newest block both share, or (undefined) deeper than it can walk back; the ledger is bound to the chain again
   * (see {@link ChainHistory}) before the index stores anything more.
   */
  history?: { diverged(common: BlockRef | undefined): Promise<void> };
}

/** Measurement hooks of the index (metrics). */
export interface IndexObserver {
  /** The chain could not be followed (an RPC fault, or answers that do not fit together). */
  followError?(kind: "rpc" | "inconsistent"): void;
  /** The index went back to an earlier block of the chain (`rewind`: blocks removed or replaced) or started over (`rebuild`). */
  historyChange?(kind: "rewind" | "rebuild"): void;
}

/** What verify needs of a payer, all true at `head`. */
export interface IndexedPayer {
  head: { number: bigint; timestamp: bigint; hash: Hex };
  balance: bigint;
  /** true: used or canceled; false: unused; undefined: the backfill has not reached it, ask the chain. */
  used: boolean | undefined;
}

/** Whether an authorization is spent, and where: the block of the token's log that spent it (see {@link TokenIndex.spentAt}). */
export type SpentAt = { spent: false } | { spent: true; blockNumber: bigint };

/** The index as `/healthcheck` and `/metrics` show it. */
export interface IndexStatus {
  /**
   * `following`: answers verify; `behind`: the chain has blocks it could not read yet, or the ledger is being bound
   * to a changed history (verify reads the chain); `starting`; `stopped`.
   */
  state: "starting" | "following" | "behind" | "stopped";
  /** The block the index is true at. */
  block?: number;
  /** The chain's head as last seen. */
  chainBlock?: number;
  /** Milliseconds since the index last confirmed it is at the chain's head. */
  confirmedMsAgo?: number;
  /** How the index learns of new blocks. */
  mode: "poll" | "subscribe";
  /** Whether the token is paused, per its Pause / Unpause logs. */
  paused?: boolean;
  /** Payers whose balance the index holds. */
  payers: number;
  /** Used and canceled nonces the index holds in memory. */
  nonces: number;
  /** Spent nonces forgotten from memory over `STATE_INDEX_MAX_NONCES` (asked of the ledger when the filter says they may be spent). */
  evictedNonces: number;
  backfill: {
    state: "waiting" | "running" | "done" | "failed";
    fromBlock?: number;
    throughBlock?: number;
    targetBlock?: number;
    /** Why it stopped, naming what to set (only when failed). */
    error?: string;
  };
}

/** Blocks applied per round of catch-up (headers in one batch). */
const WINDOW = 64n;
/** Transfers of this many recent blocks are kept, to bring a balance read at an older block up to the head. */
const RECENT_BLOCKS = 256;
/** Hashes (and spent nonces) of this many recent blocks are kept: how far back a replaced history is walked. */
export const TRAIL_BLOCKS = 1_024;
/** Payers whose balance is held at most; the oldest is forgotten first (read again when it comes back). */
const PAYER_LIMIT = 100_000;
/** Without verifies for this long, the head is asked for this often only. */
const IDLE_AFTER_MS = 30_000;
const IDLE_POLL_MS = 5_000;
const MIN_POLL_MS = 20;
/** Time kept in hand for the head's next confirmation beyond the round trips and the timer's lateness. */
const LATENESS_MARGIN_MS = 20;
/** A subscription silent for this many block times is not trusted to announce the next block. */
const SUBSCRIPTION_SILENCE_BLOCKS = 3;
/** The live record of nonces is stored at most this often (the backfill's progress after a restart). */
const PERSIST_EVERY_MS = 2_000;

interface Sync {
  sentAt: number;
  promise: Promise<void>;
}

/** A block the index applied: where it stands, the nonces it spent (their keys), whether it paused or unpaused the token. */
interface TrailBlock {
  number: bigint;
  hash: Hex;
  nonces: string[];
  pauses: boolean;
}

/**
 * The token's state, indexed from its logs, for verify: balances of the payers seen, the used and
 * canceled authorization nonces, whether the token is paused, and the block all of it is true at.
 *
 * It follows the chain one block at a time (block headers linked by parent hash; the token's logs of each
 * block by its hash, see {@link BlockReader}), asking for the head every `pollingIntervalMs` while verifies
 * come in, or told by `eth_subscribe`. A payer seen for the first time is read once at the index's block
 * and kept current from its Transfer logs. Nonces used before the index started are backfilled from the
 * start block into the store, shared by instances ({@link backfillNonces}); until the backfill is done,
 * a nonce the index does not hold is asked of the chain.
 *
 * It follows a changed history too (a local chain reverted to a snapshot, or restarted): when the chain's head
 * is below the index's, or new blocks do not follow the index's head, it walks back by block hash over the last
 * {@link TRAIL_BLOCKS} blocks to the newest one the chain still has, forgets what came after (the nonces those
 * blocks spent, every balance), and follows the chain from there; deeper than that, it starts over. A replaced
 * block is reported to `history` (the ledger's rows are bound to the chain again) before anything more is stored.
 *
 * It answers only for a state it can vouch for: {@link payer} gives undefined (verify then reads the
 * chain) while the chain has blocks the index has not read, or when its last confirmation of the head
 * is older than asked and a fresh one fails. It is advisory: settle checks the chain before it signs.
 */
export class TokenIndex {
  readonly #p: TokenIndexParameters;
  readonly #reader: BlockReader;
  readonly #scope: NonceScope;
  readonly #stop = new AbortController();
  #head: IndexedBlock | undefined;
  /** The chain's head as last seen (a poll, a notification); lowered when the chain went back. */
  #tip = -1n;
  /** When the request that last found the index at the chain's head was sent (performance.now()). */
  #confirmedAt = -Infinity;
  #sync: Sync | undefined;
  #nextSync: Promise<void> | undefined;
  /** No waiting on the chain until then: a follow failed lately (verify reads the chain instead). */
  #failedUntil = 0;
  #failures = 0;
  #rttMs = 50;
  /** How late the polling timer fires, on average (a busy event loop). */
  #lateMs = 0;
  #lastAskedAt = -Infinity;
  /** The freshness the last verify asked for. */
  #askedMaxAgeMs = 0;
  /** When the subscription last announced a block (0: not live), and the mean time between blocks it announces. */
  #notifiedAt = 0;
  #blockGapMs = 1_000;
  #paused: boolean | undefined;
  /** Used and canceled nonces, each with the block of its log (-1: found spent by a direct read, block unknown), oldest first. */
  readonly #nonces = new Map<string, number>();
  /** The stored nonces forgotten from memory (over `maxNonces`): a nonce it may hold is asked of the store. */
  #evicted: SpentFilter | undefined;
  #backfillState: IndexStatus["backfill"] = { state: "waiting" };
  #backfillStop = new AbortController();
  #complete = false;
  /** Nonces the live follower found, not yet stored; and the block they are stored through. */
  #unstored: StoredNonce[] = [];
  #storedThrough = -1n;
  #storing: Promise<void> | undefined;
  #lastStoredAt = 0;
  readonly #payers = new Map<string, bigint>();
  readonly #balanceReads = new Map<string, { block: bigint; value: Promise<bigint> }>();
  #recent: Array<{ number: bigint; transfers: Array<Extract<TokenEvent, { kind: "transfer" }>> }> = [];
  /** The last {@link TRAIL_BLOCKS} blocks applied, oldest first, consecutive, ending at the head. */
  #trail: TrailBlock[] = [];
  /**
   * Hashes of stored blocks the index went back over without proof they were replaced (the chain's head was below
   * them: a node behind, or a revert): another block at one of these heights proves the stored history replaced.
   */
  readonly #wentBackOver = new Map<bigint, Hex>();
  /** A replaced history not yet reported to `history` (null: deeper than the trail): nothing is stored until it is. */
  #divergence: BlockRef | null | undefined;
  /** Grows at each rewind or rebuild: reads begun before (balances, stored nonces, the backfill) are dropped. */
  #generation = 0;
  /** Starting over (a history changed deeper than the trail): answers nothing until it follows the chain again. */
  #rebuilding = false;
  #timer: NodeJS.Timeout | undefined;
  #unwatch: (() => void) | undefined;
  #started = false;

  constructor(parameters: TokenIndexParameters) {
    this.#p = parameters;
    this.#reader = new BlockReader(parameters.client, parameters.token);
    this.#scope = { chainId: parameters.chainId, token: parameters.token };
  }

  /** Starts following the chain and the backfill, in the background; returns at once. */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    void this.#begin();
  }

  /** Stops following; answers nothing afterwards. */
  async stop(): Promise<void> {
    this.#stop.abort();
    this.#backfillStop.abort();
    clearTimeout(this.#timer);
    this.#unwatch?.();
    await Promise.allSettled([this.#sync?.promise, this.#storing]);
  }

  async #begin(): Promise<void> {
    const first = await this.#firstHead();
    if (!first) return;
    this.#startAt(first);
    if (this.#p.subscribe) this.#watch();
    this.#schedule();
  }

  /** The chain's head (and whether the token is paused there), asked until it answers; undefined once stopped. */
  async #firstHead(): Promise<IndexedBlock | undefined> {
    const signal = this.#stop.signal;
    for (let attempt = 0; !signal.aborted; attempt++) {
      const sentAt = performance.now();
      try {
        const first = await this.#reader.header();
        this.#paused = await this.#pausedAt(first.number);
        this.#confirmedAt = sentAt;
        return first;
      } catch (error) {
        this.#followFailed("rpc", error);
        await pause(Math.min(5_000, 250 * 2 ** attempt), signal);
      }
    }
    return undefined;
  }

  #pausedAt(blockNumber: bigint): Promise<boolean | undefined> {
    return this.#p.client.readContract({ address: this.#p.token, abi: tokenAbi, functionName: "paused", blockNumber }).catch(() => undefined);
  }

  /** The live follower starts at `first`, and the backfill covers everything before it. */
  #startAt(first: IndexedBlock): void {
    this.#head = first;
    this.#tip = first.number;
    this.#storedThrough = first.number;
    this.#trail = [{ number: first.number, hash: first.hash, nonces: [], pauses: false }];
    this.#backfillStop = new AbortController();
    void this.#backfill(first.number, this.#generation, AbortSignal.any([this.#stop.signal, this.#backfillStop.signal]));
  }

  async #backfill(target: bigint, generation: number, signal: AbortSignal): Promise<void> {
    const mine = () => generation === this.#generation && !signal.aborted;
    this.#backfillState = { state: "running", targetBlock: Number(target) };
    try {
      await backfillNonces({
        client: this.#p.client,
        scope: this.#scope,
        store: this.#p.store,
        ...(this.#p.startBlock !== undefined ? { startBlock: this.#p.startBlock } : {}),
        rangeBlocks: this.#p.logRangeBlocks,
        target,
        signal,
        onNonces: (nonces) => {
          if (mine()) nonces.forEach((n) => this.#remember(nonceKey(n.authorizer, n.nonce), Number(n.blockNumber)));
        },
        onProgress: ({ fromBlock, throughBlock, targetBlock }) => {
          if (mine()) this.#backfillState = { state: "running", fromBlock: Number(fromBlock), throughBlock: Number(throughBlock), targetBlock: Number(targetBlock) };
        },
        onError: (stage, error) => this.#p.logger.debug({ network: this.#p.network, stage, err: String(error) }, "state index: backfill step failed; retrying"),
      });
    } catch (error) {
      if (!mine()) return;
      const message =
        error instanceof BackfillStartError
          ? `${error.message}; set ${this.#p.startBlockVariable} to the token's deployment block (or the block to trust nonces from)`
          : String(error);
      this.#backfillState = { ...this.#backfillState, state: "failed", error: message };
      this.#p.logger.warn({ network: this.#p.network, problem: message }, "state index: no backfill of spent authorizations; verify asks the chain whether each one is spent");
      return;
    }
    if (!mine()) return;
    this.#complete = true;
    this.#backfillState = { ...this.#backfillState, state: "done" };
    this.#p.logger.info(
      { network: this.#p.network, fromBlock: this.#backfillState.fromBlock, throughBlock: this.#backfillState.throughBlock, spentAuthorizations: this.#nonces.size },
      "state index: backfill of spent authorizations done",
    );
  }

  /**
   * The payer's balance and whether its `nonce` is spent, true at the index's block, when the index can vouch
   * for a head confirmed within `maxAgeMs` (0: confirmed after this call began); undefined when it cannot.
   */
  async payer(from: Address, nonce: Hex, maxAgeMs: number): Promise<IndexedPayer | undefined> {
    this.#asked(maxAgeMs);
    if (!(await this.#current(maxAgeMs))) return undefined;
    const head = this.#head!;
    const generation = this.#generation;
    const balance = await this.#balance(from, head.number);
    // The index went back meanwhile: what it read belongs to a history the chain no longer has.
    if (generation !== this.#generation) return undefined;
    // Asked after the balance: the index may have moved on meanwhile, and a spent nonce stays spent.
    const key = nonceKey(from, nonce);
    let used: boolean | undefined = this.#nonces.has(key) ? true : this.#complete ? false : undefined;
    // Not held, but perhaps forgotten over the memory bound: the store says.
    if (used === false && this.#evicted?.mayHold(key)) {
      const found = await this.#spent(from, nonce, head.number);
      if (found === undefined || generation !== this.#generation) return undefined;
      used = found !== "unspent";
    }
    return { head: { number: head.number, timestamp: head.timestamp, hash: head.hash }, balance, used };
  }

  /**
   * {@link payer}'s answer when it needs no I/O: the head confirmed within `maxAgeMs`, the payer's balance
   * held and the nonce's state known (the backfill done, or the nonce seen spent). Otherwise undefined, and
   * {@link payer} may still answer (it reads what is missing). Verify asks this first: no promise, no wait.
   */
  payerInMemory(from: Address, nonce: Hex, maxAgeMs: number): (IndexedPayer & { used: boolean }) | undefined {
    this.#asked(maxAgeMs);
    const head = this.#head;
    if (this.#rebuilding || !head || this.#stop.signal.aborted) return undefined;
    const asked = performance.now();
    if (!(head.number >= this.#tip && (asked - this.#confirmedAt <= maxAgeMs || this.#announcing(asked, maxAgeMs)))) return undefined;
    const balance = this.#payers.get(from.toLowerCase());
    if (balance === undefined) return undefined;
    const used = this.#nonces.has(nonceKey(from, nonce)) ? true : this.#complete ? false : undefined;
    // Unknown, or perhaps forgotten over the memory bound: {@link payer} asks the store.
    if (used === undefined || (!used && this.#evicted?.mayHold(nonceKey(from, nonce)))) return undefined;
    return { head: { number: head.number, timestamp: head.timestamp, hash: head.hash }, balance, used };
  }

  /** A verify asked with `maxAgeMs`: the loop asks for the head often while verifies come in. */
  #asked(maxAgeMs: number): void {
    const now = performance.now();
    const idle = now - this.#lastAskedAt >= IDLE_AFTER_MS;
    this.#lastAskedAt = now;
    this.#askedMaxAgeMs = maxAgeMs;
    // The loop was asking for the head rarely: from now on, often.
    if (idle && maxAgeMs > 0 && this.#timer && !this.#p.subscribe) {
      clearTimeout(this.#timer);
      this.#schedule();
    }
  }

  /** Records a nonce found spent on chain by a direct read (the backfill had not reached it). */
  rememberUsed(authorizer: Address, nonce: Hex): void {
    const key = nonceKey(authorizer, nonce);
    if (!this.#nonces.has(key)) this.#remember(key, -1);
  }

  /**
   * Where a spent nonce was spent, at `head`: held in memory, or (forgotten over `maxNonces`) in the store; "unspent"
   * when neither has it (and the index's memory is complete); undefined when the store cannot be asked.
   */
  async #spent(authorizer: Address, nonce: Hex, head: bigint): Promise<{ block: number } | "unspent" | undefined> {
    const key = nonceKey(authorizer, nonce);
    const held = this.#nonces.get(key);
    if (held !== undefined) return { block: held };
    if (!this.#evicted?.mayHold(key)) return "unspent";
    let stored: StoredNonce | undefined;
    try {
      stored = await this.#p.store.indexedNonce(this.#scope, authorizer, nonce);
    } catch {
      return undefined;
    }
    // A nonce stored beyond the index's head (another instance ahead, or a history the index went back over) is not spent here yet.
    return stored && stored.blockNumber <= head ? { block: Number(stored.blockNumber) } : "unspent";
  }

  /** Holds a spent nonce; over `maxNonces`, forgets the oldest ones the store already holds (see {@link SpentFilter}). */
  #remember(key: string, block: number): void {
    this.#nonces.set(key, block);
    const max = this.#p.maxNonces ?? Infinity;
    if (this.#nonces.size <= max) return;
    // The filter's size: 64 bits per nonce held (a tenth of what each costs held), 4 bits set per nonce: about 1 in
    // 100,000 says "maybe" falsely with as many forgotten as held, 1 in 20 with ten times as many.
    this.#evicted ??= new SpentFilter(64 * max, 4);
    // Down to a sixteenth below the bound at once: one pass over the oldest entries per many nonces, not one each.
    const target = max - Math.max(1, Math.floor(max / 16));
    const stored = Number(this.#storedThrough);
    for (const [oldest, at] of this.#nonces) {
      if (this.#nonces.size <= target) break;
      // A nonce the live follower found and has not stored yet stays until it is stored.
      if (at > stored) break;
      this.#nonces.delete(oldest);
      this.#evicted.add(oldest);
    }
  }

  /**
   * Whether the authorization `(authorizer, nonce)` is spent, and the block of the token's `AuthorizationUsed` or
   * `AuthorizationCanceled` log that spent it, true at a head confirmed within `maxAgeMs` (0: after this call began).
   * Undefined whenever the index cannot vouch for it: its backfill is unfinished, it is behind the chain, or it
   * knows the nonce spent without knowing where.
   */
  async spentAt(authorizer: Address, nonce: Hex, maxAgeMs = 0): Promise<SpentAt | undefined> {
    if (!this.#complete || !(await this.#current(maxAgeMs)) || !this.#complete) return undefined;
    const head = this.#head!.number;
    const generation = this.#generation;
    const found = await this.#spent(authorizer, nonce, head);
    if (found === undefined || generation !== this.#generation) return undefined;
    if (found === "unspent") return { spent: false };
    if (found.block >= 0) return { spent: true, blockNumber: BigInt(found.block) };
    // Known spent by a direct read, its block unknown: the store's record of its log, if any.
    const stored = await this.#p.store.indexedNonce(this.#scope, authorizer, nonce).catch(() => undefined);
    if (generation !== this.#generation) return undefined;
    return stored && stored.blockNumber <= head ? { spent: true, blockNumber: stored.blockNumber } : undefined;
  }

  status(): IndexStatus {
    const state = this.#stop.signal.aborted
      ? "stopped"
      : !this.#head
        ? "starting"
        : this.#head.number < this.#tip || this.#failedUntil > performance.now()
          ? "behind"
          : "following";
    return {
      state,
      ...(this.#head ? { block: Number(this.#head.number), chainBlock: Number(this.#tip), confirmedMsAgo: Math.round(performance.now() - this.#confirmedAt) } : {}),
      mode: this.#p.subscribe ? "subscribe" : "poll",
      ...(this.#paused !== undefined ? { paused: this.#paused } : {}),
      payers: this.#payers.size,
      nonces: this.#nonces.size,
      evictedNonces: this.#evicted?.count ?? 0,
      backfill: this.#backfillState,
    };
  }

  /** Whether the index is at the chain's head as of `maxAgeMs` ago, confirming it (and catching up) if need be. */
  async #current(maxAgeMs: number): Promise<boolean> {
    if (!this.#head || this.#stop.signal.aborted || this.#rebuilding) return false;
    const asked = performance.now();
    if (this.#head.number >= this.#tip && (asked - this.#confirmedAt <= maxAgeMs || this.#announcing(asked, maxAgeMs))) return true;
    if (this.#failedUntil > asked) return false;
    try {
      await this.#refresh(asked - maxAgeMs, Math.max(1_000, 4 * this.#rttMs));
    } catch {
      return false;
    }
    return !this.#rebuilding && this.#head.number >= this.#tip && this.#confirmedAt >= asked - maxAgeMs;
  }

  /**
   * With a live subscription the node announces each new block: no announcement within a few block times
   * means no new block, so the head counts as confirmed (for a caller that accepts any age at all).
   */
  #announcing(now: number, maxAgeMs: number): boolean {
    const silence = Math.min(IDLE_POLL_MS, Math.max(maxAgeMs, SUBSCRIPTION_SILENCE_BLOCKS * this.#blockGapMs));
    return maxAgeMs > 0 && this.#notifiedAt > 0 && now - this.#notifiedAt <= silence;
  }

  /**
   * A sync sent at `since` or later: the one in flight if it was, else the one queued after it (one for
   * every caller). Syncs run one at a time, so blocks are applied in order, once.
   */
  #refresh(since: number, waitMs?: number): Promise<void> {
    let sync: Promise<void>;
    if (this.#sync && this.#sync.sentAt >= since) sync = this.#sync.promise;
    else if (this.#nextSync) sync = this.#nextSync;
    else if (this.#sync) {
      const next = this.#sync.promise.catch(() => {}).then(() => this.#startSync());
      this.#nextSync = next;
      sync = next;
    } else sync = this.#startSync();
    if (waitMs === undefined) return sync;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the state index did not catch up within ${waitMs} ms`)), waitMs);
      timer.unref();
      sync.then(resolve, reject).finally(() => clearTimeout(timer));
    });
  }

  /** Asks for the chain's head and applies the blocks up to it, going back first if the chain did. Only {@link refresh} calls it. */
  #startSync(): Promise<void> {
    this.#nextSync = undefined;
    const sentAt = performance.now();
    const promise = (async () => {
      if (this.#rebuilding) await this.#restart();
      // The head's header, not only its number: a block replaced at the index's height shows only in its hash.
      const latest = await this.#reader.header();
      const seen = latest.number;
      this.#rttMs = this.#rttMs * 0.8 + (performance.now() - sentAt) * 0.2;
      this.#tip = seen;
      // Below the index: a node behind, or blocks removed (a revert). Either way the index can vouch only for `seen`.
      if (seen < this.#head!.number) await this.#goBackTo(seen);
      else if (seen === this.#head!.number && latest.hash.toLowerCase() !== this.#head!.hash.toLowerCase()) await this.#goBackTo(seen - 1n, latest);
      while (this.#head!.number < seen && !this.#stop.signal.aborted) {
        const to = this.#head!.number + WINDOW < seen ? this.#head!.number + WINDOW : seen;
        let blocks: IndexedBlock[];
        try {
          blocks = await this.#reader.blocksAfter(this.#head!, to);
        } catch (error) {
          // New blocks do not follow the head: the chain replaced it (asked again, in case the RPC stumbled).
          if (!(error instanceof InconsistentChainError && error.parentMismatch)) throw error;
          const now = await this.#reader.header(this.#head!.number);
          if (now.hash.toLowerCase() === this.#head!.hash.toLowerCase()) throw error;
          await this.#goBackTo(this.#head!.number - 1n, now);
          continue;
        }
        const replaced = blocks.find((block) => {
          const went = this.#wentBackOver.get(block.number);
          return went !== undefined && went.toLowerCase() !== block.hash.toLowerCase();
        });
        // A stored block the index went back over comes again as another: the stored history was replaced from it on.
        if (replaced) this.#diverged({ number: replaced.number - 1n, hash: this.#hashAt(replaced.number - 1n, blocks)! });
        for (const block of blocks) this.#apply(block);
      }
      // A node behind the index (seen < head) confirms nothing.
      if (seen >= this.#head!.number && sentAt > this.#confirmedAt) this.#confirmedAt = sentAt;
      this.#failures = 0;
      this.#failedUntil = 0;
      // A replaced history is reported at once: until then the ledger still serves its rows.
      if (this.#divergence !== undefined) void this.#persist();
    })();
    const sync = { sentAt, promise };
    this.#sync = sync;
    promise.then(
      () => {
        if (this.#sync === sync) this.#sync = undefined;
        // A block announced meanwhile (a subscription): go on to it.
        if (this.#head!.number < this.#tip && !this.#stop.signal.aborted) void this.#refresh(performance.now()).catch(() => {});
      },
      (error: unknown) => {
        if (this.#sync === sync) this.#sync = undefined;
        this.#followFailed(error instanceof InconsistentChainError ? "inconsistent" : "rpc", error);
      },
    );
    return promise;
  }

  /** The hash of block `number` as the index has it: in its trail, or among `blocks` about to be applied. */
  #hashAt(number: bigint, blocks: readonly IndexedBlock[] = []): Hex | undefined {
    const first = this.#trail[0];
    const fromTrail = first && number >= first.number ? this.#trail[Number(number - first.number)]?.hash : undefined;
    return fromTrail ?? blocks.find((block) => block.number === number)?.hash;
  }

  /**
   * Goes back to the newest block at or below `from` that the chain still has as the index read it (walking back by
   * hash over the trail), or starts over when there is none in the trail. `replacement`: the chain's block at
   * `from + 1`, another than the index's (a proof the history was replaced, not only cut short).
   */
  async #goBackTo(from: bigint, replacement?: IndexedBlock): Promise<void> {
    let proven = replacement !== undefined;
    const bottom = this.#trail[0]?.number ?? from + 1n;
    for (let top = from; top >= bottom; top -= WINDOW) {
      const low = top - WINDOW + 1n > bottom ? top - WINDOW + 1n : bottom;
      const numbers: bigint[] = [];
      for (let n = top; n >= low; n--) numbers.push(n);
      const headers = await Promise.all(numbers.map((n) => this.#reader.header(n)));
      for (const header of headers) {
        if (header.hash.toLowerCase() === this.#hashAt(header.number)?.toLowerCase()) return this.#rewind(header, proven);
        proven = true;
      }
    }
    await this.#rebuild();
  }

  /** Forgets every block after `common` (a block of the trail the chain still has) and follows the chain from it. */
  async #rewind(common: IndexedBlock, proven: boolean): Promise<void> {
    const at = Number(common.number - this.#trail[0]!.number);
    const removed = this.#trail.splice(at + 1);
    if (removed.length === 0) return;
    for (const block of removed) {
      for (const key of block.nonces) if (this.#nonces.get(key) === Number(block.number)) this.#nonces.delete(key);
      if (!proven && block.number <= this.#storedThrough) this.#wentBackOver.set(block.number, block.hash);
    }
    this.#generation++;
    // Held balances go back by the transfers of the blocks forgotten (all of them known: else they are read again).
    const undone = this.#recent.filter((block) => block.number > common.number);
    if (undone.length === removed.length) {
      for (const block of undone.reverse()) for (const transfer of [...block.transfers].reverse()) this.#untransfer(transfer);
    } else this.#payers.clear();
    this.#recent = this.#recent.filter((block) => block.number <= common.number);
    this.#balanceReads.clear();
    this.#unstored = this.#unstored.filter((nonce) => nonce.blockNumber <= common.number);
    this.#head = { ...common, events: [] };
    if (removed.some((block) => block.pauses)) this.#paused = await this.#pausedAt(common.number);
    if (proven) this.#diverged({ number: common.number, hash: common.hash });
    this.#p.observe?.historyChange?.("rewind");
    // A node behind a load balancer does this often: only a replaced history is worth a line at warn.
    const log = proven ? this.#p.logger.warn.bind(this.#p.logger) : this.#p.logger.debug.bind(this.#p.logger);
    log(
      { network: this.#p.network, block: Number(common.number), forgotten: removed.length, replaced: proven },
      proven
        ? "state index: the chain replaced blocks the index had read (a snapshot reverted?); it follows the chain from the newest block both have"
        : "state index: the chain's head is below the index's (a node behind, or a snapshot reverted); it follows the chain from there",
    );
  }

  /** Undoes a transfer applied to the held balances (a block forgotten). */
  #untransfer({ from, to, value }: { from: Address; to: Address; value: bigint }): void {
    const sender = from.toLowerCase();
    const receiver = to.toLowerCase();
    const toBalance = this.#payers.get(receiver);
    if (toBalance !== undefined) {
      if (toBalance < value) this.#payers.delete(receiver);
      else this.#payers.set(receiver, toBalance - value);
    }
    const fromBalance = this.#payers.get(sender);
    if (fromBalance !== undefined) this.#payers.set(sender, fromBalance + value);
  }

  /** Starts over from the chain's head (a history changed deeper than the trail, e.g. a restarted chain). */
  async #rebuild(): Promise<void> {
    this.#rebuilding = true;
    this.#generation++;
    this.#backfillStop.abort();
    this.#complete = false;
    this.#backfillState = { state: "waiting" };
    this.#nonces.clear();
    this.#evicted = undefined;
    this.#payers.clear();
    this.#balanceReads.clear();
    this.#recent = [];
    this.#unstored = [];
    this.#wentBackOver.clear();
    this.#divergence = null;
    this.#p.observe?.historyChange?.("rebuild");
    this.#p.logger.warn({ network: this.#p.network }, "state index: the chain's history changed deeper than the index can walk back (a restarted chain?); it starts over");
    await this.#restart();
  }

  /** The rest of a {@link rebuild}, until it succeeds (each sync tries again). */
  async #restart(): Promise<void> {
    // The ledger's nonces and progress of the other history go first: the backfill loads what it holds.
    await this.#report();
    const first = await this.#reader.header();
    this.#paused = await this.#pausedAt(first.number);
    this.#startAt(first);
    this.#rebuilding = false;
  }

  /** A replaced history to report before anything more is stored (the deepest common block wins). */
  #diverged(common: BlockRef): void {
    if (this.#divergence === null) return;
    if (this.#divergence === undefined || common.number < this.#divergence.number) this.#divergence = common;
    if (common.number < this.#storedThrough) this.#storedThrough = common.number;
    for (const number of this.#wentBackOver.keys()) if (number > common.number) this.#wentBackOver.delete(number);
  }

  /** Reports a replaced history to `history` (the ledger is bound to the chain again); throws when it could not. */
  async #report(): Promise<void> {
    const divergence = this.#divergence;
    if (divergence === undefined) return;
    await this.#p.history?.diverged(divergence ?? undefined);
    if (this.#divergence === divergence) this.#divergence = undefined;
  }

  #followFailed(kind: "rpc" | "inconsistent", error: unknown): void {
    if (this.#stop.signal.aborted) return;
    this.#failures++;
    this.#failedUntil = performance.now() + Math.min(5_000, 250 * 2 ** Math.min(this.#failures - 1, 5));
    this.#p.observe?.followError?.(kind);
    // One line when it starts failing; the rest at debug level.
    const log = this.#failures === 1 ? this.#p.logger.warn.bind(this.#p.logger) : this.#p.logger.debug.bind(this.#p.logger);
    log({ network: this.#p.network, kind, err: String(error) }, "state index: cannot follow the chain; verify reads the chain until it catches up");
  }

  #apply(block: IndexedBlock): void {
    const transfers: Array<Extract<TokenEvent, { kind: "transfer" }>> = [];
    const spent: string[] = [];
    let pauses = false;
    for (const event of block.events) {
      if (event.kind === "transfer") {
        transfers.push(event);
        this.#transfer(event);
      } else if (event.kind === "nonce") {
        const key = nonceKey(event.authorizer, event.nonce);
        this.#remember(key, Number(block.number));
        spent.push(key);
        this.#unstored.push({ authorizer: event.authorizer, nonce: event.nonce, blockNumber: block.number });
      } else {
        this.#paused = event.paused;
        pauses = true;
      }
    }
    this.#recent.push({ number: block.number, transfers });
    if (this.#recent.length > RECENT_BLOCKS) this.#recent.shift();
    this.#trail.push({ number: block.number, hash: block.hash, nonces: spent, pauses });
    if (this.#trail.length > TRAIL_BLOCKS) this.#trail.shift();
    this.#wentBackOver.delete(block.number);
    this.#head = { ...block, events: [] };
  }

  #transfer({ from, to, value }: { from: Address; to: Address; value: bigint }, payers = this.#payers): void {
    const sender = from.toLowerCase();
    const receiver = to.toLowerCase();
    const fromBalance = payers.get(sender);
    if (fromBalance !== undefined) {
      // Less than it sent: not a balance this index can vouch for; read again when asked.
      if (fromBalance < value) payers.delete(sender);
      else payers.set(sender, fromBalance - value);
    }
    const toBalance = payers.get(receiver);
    if (toBalance !== undefined) payers.set(receiver, toBalance + value);
  }

  /** The payer's balance at `block` (the index's head when asked): held, or read once and then kept current. */
  async #balance(payer: Address, block: bigint): Promise<bigint> {
    const key = payer.toLowerCase();
    const held = this.#payers.get(key);
    if (held !== undefined && this.#head!.number === block) return held;
    let read = this.#balanceReads.get(key);
    if (!read || read.block !== block) {
      const value = this.#p.client.readContract({ address: this.#p.token, abi: tokenAbi, functionName: "balanceOf", args: [payer], blockNumber: block });
      read = { block, value };
      const entry = read;
      const generation = this.#generation;
      this.#balanceReads.set(key, entry);
      value.then(
        (balance) => {
          if (this.#balanceReads.get(key) === entry) this.#balanceReads.delete(key);
          if (generation === this.#generation) this.#keep(key, balance, block);
        },
        () => {
          if (this.#balanceReads.get(key) === entry) this.#balanceReads.delete(key);
        },
      );
    }
    return read.value;
  }

  /** Keeps a balance read at `block`, brought up to the head with the recent blocks' transfers (if they reach back that far). */
  #keep(key: string, balance: bigint, block: bigint): void {
    if (this.#payers.has(key)) return;
    const head = this.#head!.number;
    if (block < head) {
      const first = this.#recent[0]?.number;
      if (first === undefined || first > block + 1n) return;
      const single = new Map([[key, balance]]);
      for (const recent of this.#recent) {
        if (recent.number <= block) continue;
        for (const transfer of recent.transfers) this.#transfer(transfer, single);
      }
      const current = single.get(key);
      if (current === undefined) return;
      balance = current;
    } else if (block > head) return;
    if (this.#payers.size >= PAYER_LIMIT) this.#payers.delete(this.#payers.keys().next().value!);
    this.#payers.set(key, balance);
  }

  #watch(): void {
    // A WebSocket client subscribes to newHeads (`poll: false` is only typed for a WebSocket transport).
    this.#unwatch = this.#p.client.watchBlockNumber({
      ...({ poll: false } as object),
      emitMissed: false,
      onBlockNumber: (number) => {
        const now = performance.now();
        if (this.#notifiedAt > 0) this.#blockGapMs = this.#blockGapMs * 0.8 + (now - this.#notifiedAt) * 0.2;
        this.#notifiedAt = now;
        if (number > this.#tip) this.#tip = number;
        void this.#refresh(now).catch(() => {});
      },
      onError: (error) => {
        this.#notifiedAt = 0;
        this.#followFailed("rpc", error);
      },
    });
  }

  /**
   * The background loop: while verifies come in, asks for the head often enough that a verify finds it
   * confirmed within what it asks (less often with a subscription, which announces each block); rarely
   * otherwise. Then stores the live nonces.
   */
  #schedule(): void {
    if (this.#stop.signal.aborted) return;
    // Verifies that ask for a head confirmed after they came (maxAge 0) confirm it themselves: no need to ask ahead.
    const busy = performance.now() - this.#lastAskedAt < IDLE_AFTER_MS && this.#askedMaxAgeMs > 0;
    // The next confirmation must arrive before this one is older than asked: one round trip to send after this
    // one came back, one to come back, and half of one to spare; and the timer's own lateness (a busy event
    // loop, a GC pause) with a margin, or verifies in the gap wait for a round trip of their own (the tail).
    const ahead = this.#askedMaxAgeMs - 2.5 * this.#rttMs - LATENESS_MARGIN_MS - 2 * this.#lateMs;
    const every = busy && !this.#p.subscribe ? Math.max(MIN_POLL_MS, Math.min(this.#p.pollingIntervalMs, ahead)) : IDLE_POLL_MS;
    const due = performance.now() + every;
    this.#timer = setTimeout(() => {
      this.#lateMs = this.#lateMs * 0.8 + Math.max(0, performance.now() - due) * 0.2;
      void this.#refresh(performance.now())
        .catch(() => {})
        .then(() => this.#persist())
        .finally(() => this.#schedule());
    }, every);
    this.#timer.unref();
  }

  /**
   * Stores the live follower's nonces and progress (with the head's hash, a checkpoint of the chain's history), once
   * the backfill has covered everything before it, and once a replaced history is reported.
   */
  async #persist(): Promise<void> {
    if (this.#storing || !this.#head) return;
    if (this.#divergence !== undefined) {
      this.#storing = this.#report()
        .catch((error: unknown) => this.#p.logger.debug({ network: this.#p.network, err: String(error) }, "state index: reporting a replaced history failed; retrying"))
        .finally(() => {
          this.#storing = undefined;
        });
      await this.#storing;
      if (this.#divergence !== undefined) return;
    }
    if (!this.#complete) return;
    const head = this.#head;
    const through = head.number;
    if (through <= this.#storedThrough && this.#unstored.length === 0) return;
    if (this.#unstored.length === 0 && performance.now() - this.#lastStoredAt < PERSIST_EVERY_MS) return;
    const nonces = this.#unstored;
    const generation = this.#generation;
    this.#unstored = [];
    this.#storing = this.#p.store
      .recordIndexedNonces(this.#scope, nonces, { fromBlock: this.#storedThrough + 1n, throughBlock: through, throughHash: head.hash })
      .then(
        () => {
          if (generation === this.#generation) this.#storedThrough = through;
          this.#lastStoredAt = performance.now();
        },
        (error: unknown) => {
          if (generation === this.#generation) this.#unstored = nonces.concat(this.#unstored);
          this.#p.logger.debug({ network: this.#p.network, err: String(error) }, "state index: storing nonces failed; retrying");
        },
      )
      .finally(() => {
        this.#storing = undefined;
      });
    await this.#storing;
  }
}

/** A nonce's key in the index: the authorizer's 20 bytes and the nonce's 32, as one binary string (52 characters). */
function nonceKey(authorizer: Address, nonce: Hex): string {
  // latin1 maps each byte to the character of its code, as String.fromCharCode of the bytes does (the
  // general form, kept for anything but a 20-byte address and a 32-byte nonce).
  const bytes = Buffer.from(`${authorizer.slice(2)}${nonce.slice(2)}`, "hex");
  if (bytes.length !== 52 || authorizer.length !== 42 || nonce.length !== 66) return String.fromCharCode(...hexToBytes(authorizer), ...hexToBytes(nonce));
  return bytes.toString("latin1");
}
