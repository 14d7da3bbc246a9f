// One payment, one route: which route (its resource) each settled payment was served on in this process,
// for the retry window (retry-window.ts). A payment presented again is served only on that route.

/** Payments remembered at most: past it, those whose window ended go first, then the oldest. */
export const MAX_PAID_ROUTES = 100_000;
/** Expired entries dropped per binding, at most: the sweep's work per request stays small. */
const SWEEP_PER_BIND = 8;

/**
 * The route each payment (network, payer, nonce) was first served on, kept until its retry window ends
 * (`until`, milliseconds since the epoch) and at most {@link MAX_PAID_ROUTES} of them: about 300 bytes each.
 */
export class PaidRoutes {
  readonly #routes = new Map<string, { route: string; until: number }>();

  constructor(readonly max = MAX_PAID_ROUTES) {}

  /**
   * The route the payment `key` is bound to: `route` if it was bound to none (it is now, until `until`), else the
   * route it was bound to first (a later window of the same route is kept). `now` sweeps ended windows.
   */
  bind(key: string, route: string, until: number, now: number): string {
    this.#sweep(now);
    const held = this.#routes.get(key);
    if (held) {
      if (held.route === route) held.until = Math.max(held.until, until);
      return held.route;
    }
    if (this.#routes.size >= this.max) this.#routes.delete(this.#routes.keys().next().value!);
    this.#routes.set(key, { route, until });
    return route;
  }

  /** Payments remembered. */
  get size(): number {
    return this.#routes.size;
  }

  /** Drops a few of the oldest entries whose window ended (entries come in the order they were served). */
  #sweep(now: number): void {
    let dropped = 0;
    for (const [key, { until }] of this.#routes) {
      if (until >= now || dropped === SWEEP_PER_BIND) return;
      this.#routes.delete(key);
      dropped++;
    }
  }
}
