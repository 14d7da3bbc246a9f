import type { Response } from "express";
import type { FeedRow, OutcomeFeed } from "./feed.js";

/** Bounds of one dashboard event stream (`GET /dashboard/events`). */
export interface FeedStreamLimits {
  /**
   * A stream whose client has not taken what was written for this long (the socket's buffer full,
   * no `drain`) is closed: the browser reconnects with `Last-Event-ID` and reads what it missed from
   * the history.
   */
  stallMs: number;
  /** A stream is ended after this long (the browser reconnects where it left off): no stream lives forever. */
  maxLifetimeMs: number;
  /** A comment is written after this long without an event, so proxies do not close a quiet stream. */
  keepAliveMs: number;
}

/** Why a stream ended: its client left, it did not read (`stalled`), it reached its lifetime, or the facilitator stopped. */
export type FeedStreamEnd = "client" | "stalled" | "lifetime" | "shutdown";

/**
 * One event stream of the feed, writing to `res` only what its socket takes: a write that fills the
 * socket's buffer (`res.write` answers false) stops the writing, and the rows written meanwhile are not
 * held for it; on `drain` the stream reads them from the feed's (bounded) history and goes on. So a
 * client that does not read costs one socket buffer, never the rows of the flood it is not reading.
 */
export class FeedStream {
  /** The last feed event this stream has dealt with (sent, or not for this viewer). */
  #last: number;
  #state: "catching" | "live" | "congested" | "ended" = "catching";
  #congestedSince = 0;
  #lastWriteAt = performance.now();
  readonly #openedAt = performance.now();
  readonly #unsubscribe: () => void;

  constructor(
    private readonly res: Response,
    private readonly feed: OutcomeFeed,
    after: number | undefined,
    private readonly view: (row: FeedRow) => boolean,
    private readonly event: (row: FeedRow) => string,
  ) {
    this.#last = after ?? 0;
    // Subscribed before the history is read: a row written meanwhile is found by the catch-up's next pass.
    this.#unsubscribe = feed.subscribe((row) => this.#live(row));
    res.on("drain", () => {
      if (this.#state === "congested") void this.#catchUp();
    });
    void this.#catchUp();
  }

  /** Whether the stream stopped writing because its client does not take what was written. */
  get congested(): boolean {
    return this.#state === "congested";
  }

  /**
   * Applies the limits at `now` (`performance.now()`): ends a stream that stalled or lived its time,
   * writes a keep-alive comment on a quiet one. Returns why it ended, if it did.
   */
  tick(limits: FeedStreamLimits, now = performance.now()): FeedStreamEnd | undefined {
    if (this.#state === "ended") return undefined;
    if (this.#state === "congested" && now - this.#congestedSince >= limits.stallMs) {
      // It reads nothing, so nothing more can reach it: the socket is closed, its buffers freed.
      this.end("stalled");
      return "stalled";
    }
    if (now - this.#openedAt >= limits.maxLifetimeMs) {
      this.end("lifetime");
      return "lifetime";
    }
    if (this.#state === "live" && now - this.#lastWriteAt >= limits.keepAliveMs) this.#write(": keep-alive\n\n");
    return undefined;
  }

  /** Stops the stream: gracefully when its client keeps up, else at once (nothing more could reach it). */
  end(reason: FeedStreamEnd): void {
    if (this.#state === "ended") return;
    const congested = this.#state === "congested";
    this.#state = "ended";
    this.#unsubscribe();
    if (reason === "client") return;
    if (congested || reason === "stalled") this.res.destroy();
    else this.res.end();
  }

  #live(row: FeedRow): void {
    // While catching up or congested, the history holds the row: the catch-up reads it from there.
    if (this.#state !== "live" || row.rev <= this.#last) return;
    this.#send(row);
  }

  /** Sends one row (when this viewer may see it); false once the socket's buffer is full. */
  #send(row: FeedRow): boolean {
    this.#last = row.rev;
    if (!this.view(row)) return true;
    if (this.#write(this.event(row))) return true;
    this.#state = "congested";
    this.#congestedSince = performance.now();
    return false;
  }

  #write(text: string): boolean {
    this.#lastWriteAt = performance.now();
    return this.res.write(text);
  }

  /** Sends what the history holds after the last row dealt with, until it is all sent (then live) or the socket is full. */
  async #catchUp(): Promise<void> {
    this.#state = "catching";
    // A row written while the history was read is found by the next pass; two passes finding nothing
    // new (a history that failed, or dropped the rows meanwhile) end the catch-up all the same.
    for (let empty = 0; empty < 2; ) {
      const rows = await this.feed.since(this.#last).catch(() => [] as FeedRow[]);
      if (this.#state !== "catching") return;
      let advanced = false;
      for (const row of rows) {
        if (row.rev <= this.#last) continue;
        advanced = true;
        if (!this.#send(row)) return;
      }
      if (this.feed.lastRev <= this.#last) break;
      empty = advanced ? 0 : empty + 1;
    }
    this.#state = "live";
  }
}
