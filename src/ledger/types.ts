import type { BroadcastStore } from "./stores/broadcasts.js";
import type { CatalogStore } from "./stores/catalog.js";
import type { ChainHistoryStore } from "./stores/chain-history.js";
import type { CounterStore } from "./stores/counters.js";
import type { IdentifierStore } from "./stores/identifiers.js";
import type { LeaseStore } from "./stores/leases.js";
import type { LedgerLifecycle } from "./stores/lifecycle.js";
import type { NonceIndexStore } from "./stores/nonce-index.js";
import type { PenaltyStore } from "./stores/penalties.js";
import type { SettlementStore } from "./stores/settlements.js";

// The ledger's stores, each with its rows and inputs (src/ledger/stores/), and the ledger that is all of them.
export * from "./stores/broadcasts.js";
export * from "./stores/catalog.js";
export * from "./stores/chain-history.js";
export * from "./stores/counters.js";
export * from "./stores/errors.js";
export * from "./stores/identifiers.js";
export * from "./stores/leases.js";
export * from "./stores/lifecycle.js";
export * from "./stores/nonce-index.js";
export * from "./stores/penalties.js";
export * from "./stores/scope.js";
export * from "./stores/settlements.js";

/**
 * The settlement ledger: the single record of money movement, shared by every facilitator instance
 * that uses the same database. Implementations: embedded SQLite (one instance) and PostgreSQL
 * (several). Every method is atomic on its own. Code that needs one concern takes its store.
 */
export type Ledger = SettlementStore &
  BroadcastStore &
  LeaseStore &
  PenaltyStore &
  IdentifierStore &
  NonceIndexStore &
  ChainHistoryStore &
  CatalogStore &
  CounterStore &
  LedgerLifecycle;
