// The facilitator and its settlement ledger, for operators embedding it:
// `cronos-x402-facilitator-kit/facilitator`. Importing it starts nothing and loads no database driver
// (`pg` and kysely, or `node:sqlite`, load when a ledger is opened).

// Facilitator.
export { loadConfig, ConfigError, type FacilitatorConfig, type NetworkConfig } from "./config/index.js";
export { createFacilitator, type Facilitator, type StartFacilitatorOptions } from "./server.js";
export { startFacilitator, type RunningFacilitator } from "./start.js";
export { StartupError } from "./startup-error.js";
// Lifecycle hooks around verify and settle (docs/facilitator.md "Lifecycle hooks").
export type {
  FacilitatorHooks,
  HookAbort,
  HookFailure,
  HookName,
  HookRequest,
  ProvenHookRequest,
  VerifiedHookRequest,
  SettledHookRequest,
  FailedHookRequest,
} from "./hooks.js";

// Settlement ledger: one interface (the intersection of its stores), embedded SQLite and PostgreSQL (several instances).
export { openLedger, type OpenLedgerOptions } from "../ledger/open.js";
export {
  LedgerError,
  type LedgerErrorCode,
  IllegalTransitionError,
  type Ledger,
  type SettlementStore,
  type BroadcastStore,
  type LeaseStore,
  type PenaltyStore,
  type IdentifierStore,
  type NonceIndexStore,
  type ChainHistoryStore,
  type CatalogStore,
  type CounterStore,
  type LedgerLifecycle,
  type SettlementRecord,
  type SettlementStatus as LedgerSettlementStatus,
  type BroadcastRecord,
  type ClaimInput,
  type ClaimResult,
  type Lease,
  type Penalty,
  type PenaltySubject,
  type TokenScope,
} from "../ledger/types.js";
export { LedgerRateLimitStore } from "../ledger/rate-limit-store.js";

export { runFacilitatorProcess, type RunProcessOptions } from "./main.js";
