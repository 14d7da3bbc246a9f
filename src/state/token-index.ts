import { hexToBytes, type Address, type Hex, type PublicClient } from "viem";
import { tokenAbi } from "../chain/token-abi.js";
import { BlockReader, InconsistentChainError, type IndexedBlock } from "./block-reader.js";
import { backfillNonces, BackfillStartError, pause } from "./nonce-backfill.js";
import type { NonceScope, NonceStore, StoredNonce } from "./nonce-store.js";
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
  logger: IndexLogger;
  /** Told of each block applied, each failure to follow the chain, and each answer the index could not give. */
  observe?: IndexObserver;
}

/** Measurement hooks of the index (metrics). */
export interface IndexObserver {
  /** The chain could not be followed (an RPC fault, or answers that do not fit together). */
  followError?(kind: "rpc" | "inconsistent"): void;
}

/** What verify needs of a payer, all true at `head`. */
export interface IndexedPayer {
  head: { number: bigint; timestamp: bigint };
  balance: bigint;
  /** true: used or canceled; false: unused; undefined: the backfill has not reached it, ask the chain. */
  used: boolean | undefined;
}

/** The index as `/healthcheck` and `/metrics` show it. */
export interface IndexStatus {
  /** `following`: answers verify; `behind`: the chain has blocks it could not read yet (verify reads the chain); `starting`. */
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
  /** Used and canceled nonces the index holds. */
  nonces: number;
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
  /** The highest head the chain was seen at (a poll, a notification). */
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
  readonly #nonces = new Set<string>();
  #backfillState: IndexStatus["backfill"] = { state: "waiting" };
  #complete = false;
  /** Nonces the live follower found, not yet stored; and the block they are stored through. */
  #unstored: StoredNonce[] = [];
  #storedThrough = -1n;
  #storing: Promise<void> | undefined;
  #lastStoredAt = 0;
  readonly #payers = new Map<string, bigint>();
  readonly #balanceReads = new Map<string, { block: bigint; value: Promise<bigint> }>();
  readonly #recent: Array<{ number: bigint; transfers: Array<Extract<TokenEvent, { kind: "transfer" }>> }> = [];
  #timer: NodeJS.Timeout | undefined;
  #unwatch: (() => void) | undefined;
  #started = false;
  /** The chain replaced a block the index had read (a reorg, or a local chain reverted to a snapshot): it answers no more. */
  #reorged = false;

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
    clearTimeout(this.#timer);
    this.#unwatch?.();
    await Promise.allSettled([this.#sync?.promise, this.#storing]);
  }

  async #begin(): Promise<void> {
    const signal = this.#stop.signal;
    // The first head: the block the live follower starts at, and the backfill's target.
    let first: IndexedBlock | undefined;
    for (let attempt = 0; !first && !signal.aborted; attempt++) {
      const sentAt = performance.now();
      try {
        first = await this.#reader.header();
        this.#paused = await this.#p.client.readContract({ address: this.#p.token, abi: tokenAbi, functionName: "paused", blockNumber: first.number }).catch(() => undefined);
        this.#confirmedAt = sentAt;
      } catch (error) {
        first = undefined;
        this.#followFailed("rpc", error);
        await pause(Math.min(5_000, 250 * 2 ** attempt), signal);
      }
    }
    if (!first || signal.aborted) return;
    this.#head = first;
    this.#tip = first.number;
    this.#storedThrough = first.number;
    if (this.#p.subscribe) this.#watch();
    this.#schedule();
    void this.#backfill(first.number);
  }

  async #backfill(target: bigint): Promise<void> {
    this.#backfillState = { state: "running", targetBlock: Number(target) };
    try {
      await backfillNonces({
        client: this.#p.client,
        scope: this.#scope,
        store: this.#p.store,
        ...(this.#p.startBlock !== undefined ? { startBlock: this.#p.startBlock } : {}),
        rangeBlocks: this.#p.logRangeBlocks,
        target,
        signal: this.#stop.signal,
        onNonces: (nonces) => nonces.forEach((n) => this.#nonces.add(nonceKey(n.authorizer, n.nonce))),
        onProgress: ({ fromBlock, throughBlock, targetBlock }) => {
          this.#backfillState = { state: "running", fromBlock: Number(fromBlock), throughBlock: Number(throughBlock), targetBlock: Number(targetBlock) };
        },
        onError: (stage, error) => this.#p.logger.debug({ network: this.#p.network, stage, err: String(error) }, "state index: backfill step failed; retrying"),
      });
    } catch (error) {
      if (this.#stop.signal.aborted) return;
      const message =
        error instanceof BackfillStartError
          ? `${error.message}; set ${this.#p.startBlockVariable} to the token's deployment block (or the block to trust nonces from)`
          : String(error);
      this.#backfillState = { ...this.#backfillState, state: "failed", error: message };
      this.#p.logger.warn({ network: this.#p.network, problem: message }, "state index: no backfill of spent authorizations; verify asks the chain whether each one is spent");
      return;
    }
    if (this.#stop.signal.aborted) return;
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
    if (this.#reorged) return undefined;
    if (!(await this.#current(maxAgeMs))) return undefined;
    const head = this.#head!;
    const balance = await this.#balance(from, head.number);
    // Asked after the balance: the index may have moved on meanwhile, and a spent nonce stays spent.
    const used = this.#nonces.has(nonceKey(from, nonce)) ? true : this.#complete ? false : undefined;
    return { head: { number: head.number, timestamp: head.timestamp }, balance, used };
  }

  /**
   * {@link payer}'s answer when it needs no I/O: the head confirmed within `maxAgeMs`, the payer's balance
   * held and the nonce's state known (the backfill done, or the nonce seen spent). Otherwise undefined, and
   * {@link payer} may still answer (it reads what is missing). Verify asks this first: no promise, no wait.
   */
  payerInMemory(from: Address, nonce: Hex, maxAgeMs: number): (IndexedPayer & { used: boolean }) | undefined {
    this.#asked(maxAgeMs);
    const head = this.#head;
    if (this.#reorged || !head || this.#stop.signal.aborted) return undefined;
    const asked = performance.now();
    if (!(head.number >= this.#tip && (asked - this.#confirmedAt <= maxAgeMs || this.#announcing(asked, maxAgeMs)))) return undefined;
    const balance = this.#payers.get(from.toLowerCase());
    if (balance === undefined) return undefined;
    const used = this.#nonces.has(nonceKey(from, nonce)) ? true : this.#complete ? false : undefined;
    if (used === undefined) return undefined;
    return { head: { number: head.number, timestamp: head.timestamp }, balance, used };
  }

  /** A verify asked with `maxAgeMs`: the loop asks for the head often while verifies come in. */
  #asked(maxAgeMs: number): void {
    const now = performance.now();
    const idle = now - this.#lastAskedAt >= IDLE_AFTER_MS;
    this.#lastAskedAt = now;
    this.#askedMaxAgeMs = maxAgeMs;
    if (this.#reorged) return;
    // The loop was asking for the head rarely: from now on, often.
    if (idle && maxAgeMs > 0 && this.#timer && !this.#p.subscribe) {
      clearTimeout(this.#timer);
      this.#schedule();
    }
  }

  /** Records a nonce found spent on chain by a direct read (the backfill had not reached it). */
  rememberUsed(authorizer: Address, nonce: Hex): void {
    this.#nonces.add(nonceKey(authorizer, nonce));
  }

  status(): IndexStatus {
    const state = this.#stop.signal.aborted || this.#reorged ? "stopped" : !this.#head ? "starting" : this.#head.number < this.#tip || this.#failedUntil > performance.now() ? "behind" : "following";
    return {
      state,
      ...(this.#head ? { block: Number(this.#head.number), chainBlock: Number(this.#tip), confirmedMsAgo: Math.round(performance.now() - this.#confirmedAt) } : {}),
      mode: this.#p.subscribe ? "subscribe" : "poll",
      ...(this.#paused !== undefined ? { paused: this.#paused } : {}),
      payers: this.#payers.size,
      nonces: this.#nonces.size,
      backfill: this.#backfillState,
    };
  }

  /** Whether the index is at the chain's head as of `maxAgeMs` ago, confirming it (and catching up) if need be. */
  async #current(maxAgeMs: number): Promise<boolean> {
    if (!this.#head || this.#stop.signal.aborted) return false;
    const asked = performance.now();
    if (this.#head.number >= this.#tip && (asked - this.#confirmedAt <= maxAgeMs || this.#announcing(asked, maxAgeMs))) return true;
    if (this.#failedUntil > asked) return false;
    try {
      await this.#refresh(asked - maxAgeMs, Math.max(1_000, 4 * this.#rttMs));
    } catch {
      return false;
    }
    return this.#head.number >= this.#tip && this.#confirmedAt >= asked - maxAgeMs;
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

  /** Asks for the chain's head and applies the blocks up to it. Only {@link refresh} calls it. */
  #startSync(): Promise<void> {
    this.#nextSync = undefined;
    const sentAt = performance.now();
    const promise = (async () => {
      const seen = await this.#reader.tip();
      this.#rttMs = this.#rttMs * 0.8 + (performance.now() - sentAt) * 0.2;
      if (seen > this.#tip) this.#tip = seen;
      while (this.#head!.number < seen && !this.#stop.signal.aborted) {
        const to = this.#head!.number + WINDOW < seen ? this.#head!.number + WINDOW : seen;
        for (const block of await this.#reader.blocksAfter(this.#head!, to)) this.#apply(block);
      }
      // A node behind the index (seen < head) confirms nothing.
      if (seen >= this.#head!.number && sentAt > this.#confirmedAt) this.#confirmedAt = sentAt;
      this.#failures = 0;
      this.#failedUntil = 0;
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
        if (error instanceof InconsistentChainError && error.parentMismatch) void this.#checkReorg();
      },
    );
    return promise;
  }

  /**
   * After new blocks did not follow the index's head: if the chain now has another block at the head's
   * number, the index's state may hold what the chain no longer has (Cronos has no reorgs; a local chain
   * reverted to a snapshot does this). The index then stops answering: verify reads the chain from then on.
   */
  async #checkReorg(): Promise<void> {
    const head = this.#head;
    if (!head || this.#reorged) return;
    const now = await this.#reader.header(head.number).catch(() => undefined);
    if (!now || now.hash.toLowerCase() === head.hash.toLowerCase()) return;
    this.#reorged = true;
    this.#p.logger.warn(
      { network: this.#p.network, block: Number(head.number), was: head.hash, now: now.hash },
      "state index: the chain replaced a block the index had read; verify reads the chain from now on (restart to index afresh, or STATE_INDEX=false)",
    );
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
    for (const event of block.events) {
      if (event.kind === "transfer") {
        transfers.push(event);
        this.#transfer(event);
      } else if (event.kind === "nonce") {
        this.#nonces.add(nonceKey(event.authorizer, event.nonce));
        this.#unstored.push({ authorizer: event.authorizer, nonce: event.nonce, blockNumber: block.number });
      } else this.#paused = event.paused;
    }
    this.#recent.push({ number: block.number, transfers });
    if (this.#recent.length > RECENT_BLOCKS) this.#recent.shift();
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
      this.#balanceReads.set(key, entry);
      value.then(
        (balance) => {
          if (this.#balanceReads.get(key) === entry) this.#balanceReads.delete(key);
          this.#keep(key, balance, block);
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
    if (this.#stop.signal.aborted || this.#reorged) return;
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

  /** Stores the live follower's nonces and progress, once the backfill has covered everything before it. */
  async #persist(): Promise<void> {
    if (!this.#complete || this.#storing || !this.#head) return;
    const through = this.#head.number;
    if (through <= this.#storedThrough && this.#unstored.length === 0) return;
    if (this.#unstored.length === 0 && performance.now() - this.#lastStoredAt < PERSIST_EVERY_MS) return;
    const nonces = this.#unstored;
    this.#unstored = [];
    this.#storing = this.#p.store
      .recordIndexedNonces(this.#scope, nonces, { fromBlock: this.#storedThrough + 1n, throughBlock: through })
      .then(
        () => {
          this.#storedThrough = through;
          this.#lastStoredAt = performance.now();
        },
        (error: unknown) => {
          this.#unstored = nonces.concat(this.#unstored);
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
