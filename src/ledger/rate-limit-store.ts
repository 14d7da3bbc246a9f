import type { IncrementResponse, Options, Store } from "express-rate-limit";
import type { CounterStore } from "./types.js";

/**
 * An express-rate-limit store over the ledger's counters, so every instance sharing the database
 * counts one quota: an UPSERT per hit in a fixed window that starts at the client's first hit.
 * Give each limiter its own `prefix` (verify and settle count apart).
 */
export class LedgerRateLimitStore implements Store {
  readonly localKeys = false;
  readonly prefix: string;
  readonly #counters: CounterStore;
  #windowMs = 60_000;

  constructor(counters: CounterStore, prefix: string) {
    this.#counters = counters;
    this.prefix = prefix;
  }

  init(options: Options): void {
    this.#windowMs = options.windowMs;
  }

  async increment(key: string): Promise<IncrementResponse> {
    const { hits, resetAt } = await this.#counters.hit(this.prefix + key, this.#windowMs);
    return { totalHits: hits, resetTime: new Date(resetAt) };
  }

  async decrement(key: string): Promise<void> {
    await this.#counters.unhit(this.prefix + key);
  }

  async resetKey(key: string): Promise<void> {
    await this.#counters.resetHits(this.prefix + key);
  }
}
