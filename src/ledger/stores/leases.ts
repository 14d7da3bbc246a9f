import type { Address } from "viem";

/** A relayer key lease: the key sends from `holder` only, until `expiresAt`. */
export interface Lease {
  address: Address;
  holder: string;
  /** Grows by one each time the key changes hands. */
  epoch: number;
  acquiredAt: number;
  expiresAt: number;
}

/** A live facilitator instance (it sent a heartbeat within its time-to-live). */
export interface InstanceRecord {
  id: string;
  info: Record<string, unknown>;
  startedAt: number;
  heartbeatAt: number;
  expiresAt: number;
}

/** The relayer keys' leases (one sending instance per key) and the live instances that share them. */
export interface LeaseStore {
  /** Takes `address`'s lease when it is free, lapsed, or already `holder`'s; undefined otherwise. */
  acquireLease(address: Address, holder: string, ttlMs: number): Promise<Lease | undefined>;
  /** Extends every lease `holder` still holds; returns them (a lapsed one taken by another is gone). */
  renewLeases(holder: string, ttlMs: number): Promise<Lease[]>;
  releaseLease(address: Address, holder: string): Promise<void>;
  /** Every lease, live or lapsed. */
  leases(): Promise<Lease[]>;

  heartbeat(id: string, ttlMs: number, info?: Record<string, unknown>): Promise<void>;
  /** Instances whose heartbeat has not lapsed. */
  instances(): Promise<InstanceRecord[]>;
  removeInstance(id: string): Promise<void>;
}
