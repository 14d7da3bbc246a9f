import { MemoryStore, type Options, type Store } from "express-rate-limit";

/** Options of {@link PayerQuota}. */
export interface PayerQuotaOptions {
  /** Settles a minute per payer; 0 = no limit. */
  perMinute: number;
  /** Where the counts live: shared between instances (the ledger's counters) or, by default, in memory. */
  store?: Store;
  windowMs?: number;
}

/**
 * The per-payer settle quota, spent only by the payer itself: the settle handler asks it after the
 * authorization's signature is proven to be the payer's (ECDSA recovery, or the wallet's ERC-1271
 * answer), so a request that merely names a payer as `from` never touches it (such a request counts
 * against its sender's own quota, per IP or API key, at the edge). Each authorization is counted once:
 * a copy of a settle still in flight, or a retry after a refusal that counted nothing, is not charged
 * twice.
 */
export class PayerQuota {
  readonly perMinute: number;
  readonly #store: Store;

  constructor(options: PayerQuotaOptions) {
    this.perMinute = options.perMinute;
    this.#store = options.store ?? new MemoryStore();
    // The library's limiters call init; this quota uses the store on its own.
    void this.#store.init?.({ windowMs: options.windowMs ?? 60_000 } as Options);
  }

  /**
   * Counts one settle of `authorization` (a unique id: chain, token, payer, nonce) against `payer`.
   * Gives the seconds to wait when the payer is over its quota (nothing counted), else `undefined`.
   */
  async admit(payer: string, authorization: string): Promise<number | undefined> {
    if (this.perMinute === 0) return undefined;
    const seen = await this.#store.increment(`auth:${authorization}`);
    if (seen.totalHits > 1) return undefined;
    const hit = await this.#store.increment(`payer:${payer.toLowerCase()}`);
    if (hit.totalHits <= this.perMinute) return undefined;
    // Refused: nothing of this authorization was counted, so its retry is counted afresh.
    await Promise.all([this.#store.decrement(`payer:${payer.toLowerCase()}`), this.#store.resetKey(`auth:${authorization}`)]);
    const resetMs = hit.resetTime ? hit.resetTime.getTime() - Date.now() : 60_000;
    return Math.max(1, Math.ceil(resetMs / 1000));
  }
}
