// The token state index's watch on the chain's head: polling (or a subscription), one sync at a time, how fresh the index is.
import { InconsistentChainError, type BlockReader, type IndexedBlock } from "./block-reader.js";
import { pause } from "./nonce-backfill.js";
import type { IndexFollower } from "./token-index-follower.js";
import type { IndexStatus, TokenIndexParameters } from "./token-index-types.js";

/** Without verifies for this long, the head is asked for this often only. */
const IDLE_AFTER_MS = 30_000;
const IDLE_POLL_MS = 5_000;
const MIN_POLL_MS = 20;
/** Time kept in hand for the head's next confirmation beyond the round trips and the timer's lateness. */
const LATENESS_MARGIN_MS = 20;
/** A subscription silent for this many block times is not trusted to announce the next block. */
const SUBSCRIPTION_SILENCE_BLOCKS = 3;

interface Sync {
  sentAt: number;
  promise: Promise<void>;
}

/**
 * Keeps the index at the chain's head: asks for the head every `pollingIntervalMs` while verifies come in (rarely
 * otherwise), or is told by `eth_subscribe`; runs one sync at a time (the {@link IndexFollower} applies the blocks), and
 * knows when the index last confirmed it was at the head, so an answer is given only for a head as fresh as asked.
 */
export class HeadWatch {
  readonly #p: TokenIndexParameters;
  readonly #reader: BlockReader;
  readonly #stop: AbortSignal;
  readonly #follower: IndexFollower;
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
  #timer: NodeJS.Timeout | undefined;
  #unwatch: (() => void) | undefined;

  constructor(parameters: TokenIndexParameters, reader: BlockReader, stop: AbortSignal, follower: IndexFollower) {
    this.#p = parameters;
    this.#reader = reader;
    this.#stop = stop;
    this.#follower = follower;
  }

  /** The sync in flight, if any. */
  get syncing(): Promise<void> | undefined {
    return this.#sync?.promise;
  }

  /** Reads the chain's head until it answers, starts the follower there, then keeps it at the head. */
  async begin(): Promise<void> {
    const first = await this.#firstHead();
    if (!first) return;
    this.#follower.startAt(first);
    if (this.#p.subscribe) this.#watch();
    this.#schedule();
  }

  /** Stops the loop and the subscription. */
  stop(): void {
    clearTimeout(this.#timer);
    this.#unwatch?.();
  }

  /** The chain's head (and whether the token is paused there), asked until it answers; undefined once stopped. */
  async #firstHead(): Promise<IndexedBlock | undefined> {
    const signal = this.#stop;
    for (let attempt = 0; !signal.aborted; attempt++) {
      const sentAt = performance.now();
      try {
        const first = await this.#reader.header();
        await this.#follower.readPaused(first.number);
        this.#confirmedAt = sentAt;
        return first;
      } catch (error) {
        this.#followFailed("rpc", error);
        await pause(Math.min(5_000, 250 * 2 ** attempt), signal);
      }
    }
    return undefined;
  }

  /** A verify asked with `maxAgeMs`: the loop asks for the head often while verifies come in. */
  asked(maxAgeMs: number): void {
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

  /** The index's head when it is known at the chain's head as of `maxAgeMs` ago without asking the chain; else undefined. */
  confirmedHead(maxAgeMs: number): IndexedBlock | undefined {
    const head = this.#follower.head;
    if (this.#follower.rebuilding || !head || this.#stop.aborted) return undefined;
    const asked = performance.now();
    if (!(head.number >= this.#follower.tip && (asked - this.#confirmedAt <= maxAgeMs || this.#announcing(asked, maxAgeMs)))) return undefined;
    return head;
  }

  /** Whether the index is at the chain's head as of `maxAgeMs` ago, confirming it (and catching up) if need be. */
  async current(maxAgeMs: number): Promise<boolean> {
    const follower = this.#follower;
    if (!follower.head || this.#stop.aborted || follower.rebuilding) return false;
    const asked = performance.now();
    if (follower.head.number >= follower.tip && (asked - this.#confirmedAt <= maxAgeMs || this.#announcing(asked, maxAgeMs))) return true;
    if (this.#failedUntil > asked) return false;
    try {
      await this.#refresh(asked - maxAgeMs, Math.max(1_000, 4 * this.#rttMs));
    } catch {
      return false;
    }
    return !follower.rebuilding && follower.head.number >= follower.tip && this.#confirmedAt >= asked - maxAgeMs;
  }

  /** The index's place and freshness as `/healthcheck` shows them. */
  status(): Pick<IndexStatus, "state" | "block" | "chainBlock" | "confirmedMsAgo" | "mode"> {
    const head = this.#follower.head;
    const tip = this.#follower.tip;
    const state = this.#stop.aborted ? "stopped" : !head ? "starting" : head.number < tip || this.#failedUntil > performance.now() ? "behind" : "following";
    return {
      state,
      ...(head ? { block: Number(head.number), chainBlock: Number(tip), confirmedMsAgo: Math.round(performance.now() - this.#confirmedAt) } : {}),
      mode: this.#p.subscribe ? "subscribe" : "poll",
    };
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

  /** Asks for the chain's head and has the follower apply the blocks up to it. Only {@link refresh} calls it. */
  #startSync(): Promise<void> {
    this.#nextSync = undefined;
    const sentAt = performance.now();
    const follower = this.#follower;
    const promise = (async () => {
      if (follower.rebuilding) await follower.restart();
      // The head's header, not only its number: a block replaced at the index's height shows only in its hash.
      const latest = await this.#reader.header();
      const seen = latest.number;
      this.#rttMs = this.#rttMs * 0.8 + (performance.now() - sentAt) * 0.2;
      follower.tip = seen;
      await follower.catchUp(latest);
      // A node behind the index (seen < head) confirms nothing.
      if (seen >= follower.head!.number && sentAt > this.#confirmedAt) this.#confirmedAt = sentAt;
      this.#failures = 0;
      this.#failedUntil = 0;
      // A replaced history is reported at once: until then the ledger still serves its rows.
      if (follower.divergencePending) void follower.persist();
    })();
    const sync = { sentAt, promise };
    this.#sync = sync;
    promise.then(
      () => {
        if (this.#sync === sync) this.#sync = undefined;
        // A block announced meanwhile (a subscription): go on to it.
        if (follower.head!.number < follower.tip && !this.#stop.aborted) void this.#refresh(performance.now()).catch(() => {});
      },
      (error: unknown) => {
        if (this.#sync === sync) this.#sync = undefined;
        this.#followFailed(error instanceof InconsistentChainError ? "inconsistent" : "rpc", error);
      },
    );
    return promise;
  }

  #followFailed(kind: "rpc" | "inconsistent", error: unknown): void {
    if (this.#stop.aborted) return;
    this.#failures++;
    this.#failedUntil = performance.now() + Math.min(5_000, 250 * 2 ** Math.min(this.#failures - 1, 5));
    this.#p.observe?.followError?.(kind);
    // One line when it starts failing; the rest at debug level.
    const log = this.#failures === 1 ? this.#p.logger.warn.bind(this.#p.logger) : this.#p.logger.debug.bind(this.#p.logger);
    log({ network: this.#p.network, kind, err: String(error) }, "state index: cannot follow the chain; verify reads the chain until it catches up");
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
        if (number > this.#follower.tip) this.#follower.tip = number;
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
    if (this.#stop.aborted) return;
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
        .then(() => this.#follower.persist())
        .finally(() => this.#schedule());
    }, every);
    this.#timer.unref();
  }
}
