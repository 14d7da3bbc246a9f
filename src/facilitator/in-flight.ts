/**
 * Guards an authorization while its settle is in flight, so a second settle of the same
 * authorization answers "already used" instead of racing the first. The in-memory guard serves
 * one instance; several instances behind a balancer share one through this interface (e.g. a
 * Redis `SET key NX PX`).
 */
export interface InFlightGuard {
  /** Takes `key`; false when another settle holds it. */
  acquire(key: string, ttlMs: number): boolean | Promise<boolean>;
  release(key: string): void | Promise<void>;
}

/** The guard of a single facilitator process. */
export class MemoryInFlightGuard implements InFlightGuard {
  readonly #held = new Map<string, number>();

  acquire(key: string, ttlMs: number): boolean {
    const now = Date.now();
    const until = this.#held.get(key);
    if (until !== undefined && until > now) return false;
    this.#held.set(key, now + ttlMs);
    return true;
  }

  release(key: string): void {
    this.#held.delete(key);
  }
}
