import type { Address } from "viem";
import type { Lease, LeaseStore } from "./types.js";

/** Options of {@link LeaseKeeper}. */
export interface LeaseKeeperOptions {
  ledger: LeaseStore;
  /** This instance's id (unique per process start). */
  instanceId: string;
  /** Shown to other instances (host, pid, …); never secrets. */
  info?: Record<string, unknown>;
  /** Every relayer key's address (the keys are shared configuration). */
  keys: readonly Address[];
  /** Lease and heartbeat time-to-live; renewed every third of it. Default 15 s. */
  ttlMs?: number;
  /** Whether a key may be handed to another instance now (nothing of it is being signed or sent). Default yes. */
  isIdle?: (address: Address) => boolean;
  /** A key became ours: its nonce must be read again from the chain (blockTag pending). */
  onAcquired?: (lease: Lease) => void;
  /** A key is no longer ours (released, or lost to another instance). */
  onLost?: (address: Address) => void;
  /** Milliseconds since the epoch; default `Date.now`. */
  clock?: () => number;
}

/**
 * Keeps this instance's share of the relayer keys: a key sends from one instance at a time (a lease
 * with a heartbeat), a dead instance's keys are taken over once their leases lapse, and live instances
 * share the keys fairly: each aims at ceil(keys / live instances) and releases idle extras.
 */
export class LeaseKeeper {
  readonly #options: LeaseKeeperOptions;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #held = new Map<string, Lease>();
  /**
   * Until when (this instance's clock) each held lease surely lives: its time-to-live from before the request that took
   * or renewed it. The lease's own times are the ledger's lease clock (the database's, on PostgreSQL), which this
   * instance's clock need not agree with: a duration measured here does not depend on it.
   */
  readonly #safeUntil = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  #ticking: Promise<void> | undefined;
  #stopped = false;

  constructor(options: LeaseKeeperOptions) {
    this.#options = options;
    this.#ttlMs = options.ttlMs ?? 15_000;
    this.#now = options.clock ?? Date.now;
  }

  /** The keys this instance may send from now: leased, and not within a third of the lease's end. */
  held(): Address[] {
    return [...this.#held.values()].filter((lease) => this.#safe(lease)).map((lease) => lease.address);
  }

  /**
   * Whether this instance may send from `address` now: its lease held and not in its last third (a
   * paused process finds it lapsed by the clock at once, before any round of its own has run), and of
   * generation `epoch` when given.
   */
  holds(address: Address, epoch?: number): boolean {
    const lease = this.#held.get(address.toLowerCase());
    return lease !== undefined && this.#safe(lease) && (epoch === undefined || lease.epoch === epoch);
  }

  #safe(lease: Lease): boolean {
    return (this.#safeUntil.get(lease.address.toLowerCase()) ?? 0) > this.#now() + this.#ttlMs / 3;
  }

  /** The leases this instance holds, for health reports. */
  leases(): Lease[] {
    return [...this.#held.values()];
  }

  /** One round: heartbeat, renew, then take or release keys towards this instance's fair share. */
  tick(): Promise<void> {
    this.#ticking ??= this.#round().finally(() => (this.#ticking = undefined));
    return this.#ticking;
  }

  async #round(): Promise<void> {
    if (this.#stopped) return;
    const { ledger, instanceId } = this.#options;
    await ledger.heartbeat(instanceId, this.#ttlMs, this.#options.info ?? {});
    const asked = this.#now();
    const renewed = await ledger.renewLeases(instanceId, this.#ttlMs);
    const ours = new Set(this.#options.keys.map((k) => k.toLowerCase()));
    const still = new Map(renewed.filter((l) => ours.has(l.address.toLowerCase())).map((l) => [l.address.toLowerCase(), l]));
    for (const [key, lease] of this.#held) {
      if (!still.has(key)) {
        this.#held.delete(key);
        this.#safeUntil.delete(key);
        this.#options.onLost?.(lease.address);
      }
    }
    for (const [key, lease] of still) {
      this.#held.set(key, lease);
      this.#safeUntil.set(key, asked + this.#ttlMs);
    }

    const live = Math.max(1, (await ledger.instances()).length);
    const target = Math.ceil(this.#options.keys.length / live);
    if (this.#held.size < target) {
      // Start at an offset of our own, so instances starting together try different keys first.
      const keys = this.#options.keys;
      const offset = [...instanceId].reduce((sum, c) => sum + c.charCodeAt(0), 0) % keys.length;
      for (let i = 0; i < keys.length && this.#held.size < target && !this.#stopped; i++) {
        const address = keys[(offset + i) % keys.length]!;
        if (this.#held.has(address.toLowerCase())) continue;
        const at = this.#now();
        const lease = await ledger.acquireLease(address, instanceId, this.#ttlMs);
        if (!lease) continue;
        this.#held.set(address.toLowerCase(), lease);
        this.#safeUntil.set(address.toLowerCase(), at + this.#ttlMs);
        this.#options.onAcquired?.(lease);
      }
    } else if (this.#held.size > target) {
      for (const [key, lease] of [...this.#held]) {
        if (this.#held.size <= target) break;
        if (!(this.#options.isIdle?.(lease.address) ?? true)) continue;
        this.#held.delete(key);
        this.#safeUntil.delete(key);
        this.#options.onLost?.(lease.address);
        await ledger.releaseLease(lease.address, instanceId);
      }
    }
  }

  /** Runs {@link tick} now and every third of the time-to-live; errors go to `onError` (the leases then lapse). */
  start(onError: (error: unknown) => void = () => {}): Promise<void> {
    const first = this.tick();
    this.#timer = setInterval(() => void this.tick().catch(onError), Math.max(10, Math.floor(this.#ttlMs / 3)));
    this.#timer.unref();
    return first;
  }

  /** Stops renewing, releases every key and leaves the list of instances (graceful shutdown). */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#ticking?.catch(() => undefined);
    const { ledger, instanceId } = this.#options;
    const held = [...this.#held.values()];
    this.#held.clear();
    this.#safeUntil.clear();
    for (const lease of held) this.#options.onLost?.(lease.address);
    await Promise.all(held.map((lease) => ledger.releaseLease(lease.address, instanceId)));
    await ledger.removeInstance(instanceId);
  }
}
