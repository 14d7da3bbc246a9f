// The one dependencies object of settlement: what verify, settle, the settler, the key worker and the reconciler are given.
import type { Address } from "viem";
import type { SignerRecovery } from "../chain/recovery-pool.js";
import type { Ledger } from "../ledger/types.js";
import type { NetworkName } from "../protocol/networks.js";
import type { InFlight } from "./in-flight.js";
import type { SettlementLogger } from "./logger.js";
import type { LedgerOutbox } from "./outbox.js";
import type { NetworkRuntime, RelayerSafety } from "./runtime.js";

/** Settlement's settings, as the configuration gives them. */
export interface SettlementSettings {
  /** Verify refuses an authorization whose `validBefore` is within this many seconds of the chain's time. */
  settleMarginSeconds: number;
  /** Verify may reuse a chain head read this recently (settle always reads a fresh one). */
  headCacheMs: number;
  confirmations: number;
  /** How long a settle waits for its outcome before it answers. */
  settleTimeoutMs: number;
  pollingIntervalMs: number;
  /** What the relayer may pay for: gas caps and revert penalties (balance reservations are ledger claims). */
  relayerSafety: RelayerSafety;
  /** How long an owner may take to record its first transaction before its claim may be handed on. */
  ownerTtlMs: number;
  /** After this, the reconciler also looks at a sent row its owner is following (cheap, idempotent). */
  reconcileAfterMs: number;
  /** Key holders look for settlements handed to them this often, besides being notified. */
  queuePollMs: number;
}

/**
 * What settlement tells as it works, for metrics (and traces): every method is called where it happens, and
 * does nothing where nobody listens ({@link QUIET_OBSERVER}).
 */
export interface SettlementObserver {
  /** A ledger call failed (the database may be down): the outage watch probes it. */
  ledgerFault(error: unknown): void;
  /** A chain read or send of `network` failed. */
  rpcError(network: string): void;
  /** A settlement's transaction was mined (or reverted) `seconds` after it was sent. */
  confirmationWait(network: string, seconds: number): void;
  /** Gas the relayer paid for a settlement that reverted on chain. */
  revertedGas(network: string, gas: bigint): void;
  /** Where a verify's chain state came from: the token state index, or reads of the chain. */
  verifyStateSource(network: string, source: "index" | "chain"): void;
}

/** The observer of nobody. */
export const QUIET_OBSERVER: SettlementObserver = {
  ledgerFault() {},
  rpcError() {},
  confirmationWait() {},
  revertedGas() {},
  verifyStateSource() {},
};

/** Verify's own stages, in its order: the checks that need no hash, the digest, the signer's recovery, the payer's state from memory. */
export type CheckStage = "checks" | "typedDataHash" | "recovery" | "indexRead";

/**
 * Times the stages of a request on the monotonic clock (the verify budget, `METRICS_VERIFY_STAGES`): `start` a
 * reading, `stop` a stage since one, `lap` the same and a new reading; `waited` counts a request whose state read
 * waited on I/O. {@link QUIET_CLOCK} is the one that times nothing (the default: nothing on the path asks the time).
 */
export interface StageClock<S extends string = CheckStage> {
  start(): number;
  stop(stage: S, since: number): void;
  lap(stage: S, since: number): number;
  waited(): void;
}

/** The clock that times nothing. */
export const QUIET_CLOCK: StageClock<string> = {
  start: () => 0,
  stop() {},
  lap: () => 0,
  waited() {},
};

/** Which relayer keys this instance may send from now (the lease keeper). */
export interface KeyHolder {
  held(): Address[];
  /** Whether this instance may send from `address` now (under its lease of generation `epoch`, when given). */
  holds(address: Address, epoch?: number): boolean;
}

/**
 * The one dependencies object of settlement, built once per facilitator: the networks it serves, the
 * ledger, the settings, the observer, this instance's identity, key leases, outbox and work in flight.
 * Verify and settle, the settler, the key worker and the reconciler each take it (or the part of it they
 * read); `L` is the logger (the facilitator passes its own, with `child`).
 */
export interface SettlementDeps<L extends SettlementLogger = SettlementLogger> {
  networks: ReadonlyMap<NetworkName, NetworkRuntime>;
  /** The settlement ledger: claims, reservations, penalties, status (never written by verify). */
  ledger: Ledger;
  logger: L;
  settings: SettlementSettings;
  observer: SettlementObserver;
  /** This instance, as the ledger's claims and leases name it. */
  instanceId: string;
  keys: KeyHolder;
  /** Outcomes answered while the ledger was unreachable, written when it is back. */
  outbox: LedgerOutbox;
  inFlight: InFlight;
  /** Milliseconds since the epoch. */
  now(): number;
  /** Recovers payers' signatures on every core (chain/recovery-pool.ts); absent: on the calling thread. */
  recovery?: SignerRecovery;
}

/** The network whose chain id is `chainId` among `networks`. */
export function networkOfChain<N extends { config: { chainId: number } }>(networks: ReadonlyMap<NetworkName, N>, chainId: number): N | undefined {
  for (const network of networks.values()) if (network.config.chainId === chainId) return network;
  return undefined;
}
