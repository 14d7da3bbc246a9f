/** A rate-limit counter after a hit. */
export interface CounterHit {
  hits: number;
  resetAt: number;
}

/** Rate-limit counters shared by every instance (one quota however many instances answer). */
export interface CounterStore {
  /** Counts one hit of `key` in a fixed window of `windowMs` starting at its first hit. */
  hit(key: string, windowMs: number): Promise<CounterHit>;
  unhit(key: string): Promise<void>;
  resetHits(key: string): Promise<void>;
}
