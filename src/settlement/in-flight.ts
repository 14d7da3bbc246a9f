/**
 * The settlement work this instance has in hand: the claims its settles and its key worker are working on
 * (kept when an outage's abandoned claims are released), and the sends and receipt waits in flight (waited
 * for when it stops).
 */
export class InFlight {
  readonly #claims = new Set<number>();
  readonly #work = new Set<Promise<unknown>>();

  /** Runs `work` on claim `id`, which counts as in hand until it settles; waited for at {@link settled}. */
  claim<T>(id: number, work: () => Promise<T>): Promise<T> {
    this.#claims.add(id);
    const running = work().finally(() => this.#claims.delete(id));
    this.#work.add(running);
    void running.finally(() => this.#work.delete(running)).catch(() => undefined);
    return running;
  }

  /** The ids of the claims in hand now. */
  claims(): number[] {
    return [...this.#claims];
  }

  /** Resolves once every work in flight (and `also`) has settled, or after `graceMs`. */
  async settled(graceMs: number, also?: Promise<unknown>): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.#work, also]), new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
  }
}
