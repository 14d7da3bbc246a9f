import type { Address, Hex } from "viem";
import type { SettlementFailureCode } from "../../protocol/reasons.js";
import type {
  BlockRef,
  BoundPayment,
  ChainHistoryRecord,
  ClaimInput,
  ClaimResult,
  CounterHit,
  DiscoveryBounds,
  DiscoveryPage,
  DiscoveryPageRequest,
  DiscoveryPayment,
  DiscoveryRecorded,
  DiscoverySearchPage,
  FillerRecord,
  HistoryAdoption,
  HistoryChange,
  HistoryRestoration,
  PendingHistoryChange,
  IndexedNonce,
  InstanceRecord,
  Lease,
  Ledger,
  LedgerHealth,
  NonceIndexProgress,
  NonceRange,
  Penalty,
  PenaltySubject,
  PendingSummary,
  RecordBroadcastInput,
  RecordFillerInput,
  RecordReplacementInput,
  SetAsideRow,
  SettlementCall,
  SettlementKey,
  SettlementRecord,
  TokenScope,
  TransactionState,
} from "../types.js";
import { SqlBroadcastStore } from "./broadcasts.js";
import { SqlCatalogStore } from "./catalog.js";
import { SqlChainHistoryStore } from "./chain-history.js";
import { SqlCounterStore } from "./counters.js";
import type { SqlDriver } from "./driver.js";
import { SqlIdentifierStore } from "./identifiers.js";
import { SqlLeaseStore } from "./leases.js";
import { SqlNonceIndexStore } from "./nonce-index.js";
import { SqlPenaltyStore } from "./penalties.js";
import { SqlSettlementStore } from "./settlements.js";

/** Options of {@link SqlLedger}. */
export interface SqlLedgerOptions {
  /** Milliseconds since the epoch; default `Date.now`. Tests move it. */
  clock?: () => number;
  /** Outcome waits re-read the row this often, in case a notification was missed; default 1000 ms. */
  pollMs?: number;
}

/**
 * The ledger over SQL: one object over the stores (src/ledger/sql/), which share one driver and one clock.
 * Every rule lives in its store once; the backends ({@link SqlDriver}) differ only in how statements run,
 * how transactions serialize and how instances are notified.
 */
export class SqlLedger implements Ledger {
  readonly #db: SqlDriver;
  readonly #now: () => number;
  readonly #settlements: SqlSettlementStore;
  readonly #broadcasts: SqlBroadcastStore;
  readonly #leases: SqlLeaseStore;
  readonly #penalties: SqlPenaltyStore;
  readonly #identifiers: SqlIdentifierStore;
  readonly #nonces: SqlNonceIndexStore;
  readonly #histories: SqlChainHistoryStore;
  readonly #catalog: SqlCatalogStore;
  readonly #counters: SqlCounterStore;

  constructor(driver: SqlDriver, options: SqlLedgerOptions = {}) {
    const now = options.clock ?? Date.now;
    this.#db = driver;
    this.#now = now;
    this.#settlements = new SqlSettlementStore(driver, now, options.pollMs ?? 1_000);
    this.#broadcasts = new SqlBroadcastStore(driver, now);
    this.#leases = new SqlLeaseStore(driver, now);
    this.#penalties = new SqlPenaltyStore(driver, now);
    this.#identifiers = new SqlIdentifierStore(driver, now);
    this.#nonces = new SqlNonceIndexStore(driver, now);
    this.#catalog = new SqlCatalogStore(driver);
    this.#histories = new SqlChainHistoryStore(driver, now, this.#catalog);
    this.#counters = new SqlCounterStore(driver, now);
  }

  get backend(): "sqlite" | "postgres" {
    return this.#db.backend;
  }

  // SettlementStore
  claim(input: ClaimInput): Promise<ClaimResult> {
    return this.#settlements.claim(input);
  }
  takeQueued(input: { owner: string; chainIds: readonly number[]; limit: number; ownerTtlMs: number }): Promise<SettlementRecord[]> {
    return this.#settlements.takeQueued(input);
  }
  markSettled(id: number, input: { txHash: Hex; blockNumber: bigint; blockTimestamp: bigint }): Promise<SettlementRecord> {
    return this.#settlements.markSettled(id, input);
  }
  markFailed(id: number, input: { code: SettlementFailureCode; owner?: string | null; txHash?: Hex }): Promise<SettlementRecord | undefined> {
    return this.#settlements.markFailed(id, input);
  }
  withdraw(id: number, input: { code: SettlementFailureCode; owner: string | null }): Promise<SettlementRecord | undefined> {
    return this.#settlements.withdraw(id, input);
  }
  withdrawOwned(input: { owner: string; code: SettlementFailureCode; keep: readonly number[] }): Promise<number[]> {
    return this.#settlements.withdrawOwned(input);
  }
  requeue(id: number, owner: string, call?: SettlementCall): Promise<boolean> {
    return this.#settlements.requeue(id, owner, call);
  }
  get(key: SettlementKey): Promise<SettlementRecord | undefined> {
    return this.#settlements.get(key);
  }
  getById(id: number): Promise<SettlementRecord | undefined> {
    return this.#settlements.getById(id);
  }
  findByTxHash(hash: Hex): Promise<SettlementRecord | undefined> {
    return this.#settlements.findByTxHash(hash);
  }
  findByAuthorization(chainId: number, authorizer: Address, nonce: Hex): Promise<SettlementRecord[]> {
    return this.#settlements.findByAuthorization(chainId, authorizer, nonce);
  }
  listPending(options?: { chainIds?: readonly number[]; limit?: number }): Promise<SettlementRecord[]> {
    return this.#settlements.listPending(options);
  }
  pendingSummary(): Promise<PendingSummary> {
    return this.#settlements.pendingSummary();
  }
  takeDue(input: { chainIds: readonly number[]; limit: number; recheckMs: number }): Promise<SettlementRecord[]> {
    return this.#settlements.takeDue(input);
  }
  deferCheck(id: number, untilMs: number): Promise<void> {
    return this.#settlements.deferCheck(id, untilMs);
  }
  waitForOutcome(id: number, timeoutMs: number, signal?: AbortSignal): Promise<SettlementRecord | undefined> {
    return this.#settlements.waitForOutcome(id, timeoutMs, signal);
  }
  onQueued(listener: () => void): () => void {
    return this.#settlements.onQueued(listener);
  }
  deleteFinishedSettlements(before: number, limit: number): Promise<number> {
    return this.#settlements.deleteFinishedSettlements(before, limit);
  }

  // BroadcastStore
  recordBroadcast(input: RecordBroadcastInput): Promise<boolean> {
    return this.#broadcasts.recordBroadcast(input);
  }
  recordReplacement(input: RecordReplacementInput): Promise<boolean> {
    return this.#broadcasts.recordReplacement(input);
  }
  recordFiller(input: RecordFillerInput): Promise<boolean> {
    return this.#broadcasts.recordFiller(input);
  }
  markFillerRefused(hash: Hex): Promise<void> {
    return this.#broadcasts.markFillerRefused(hash);
  }
  pendingFillers(input: { chainId: number; relayer: Address; fromNonce: number; limit: number }): Promise<FillerRecord[]> {
    return this.#broadcasts.pendingFillers(input);
  }
  markTransaction(hash: Hex, state: TransactionState): Promise<void> {
    return this.#broadcasts.markTransaction(hash, state);
  }

  // LeaseStore
  acquireLease(address: Address, holder: string, ttlMs: number): Promise<Lease | undefined> {
    return this.#leases.acquireLease(address, holder, ttlMs);
  }
  renewLeases(holder: string, ttlMs: number): Promise<Lease[]> {
    return this.#leases.renewLeases(holder, ttlMs);
  }
  releaseLease(address: Address, holder: string): Promise<void> {
    return this.#leases.releaseLease(address, holder);
  }
  leases(): Promise<Lease[]> {
    return this.#leases.leases();
  }
  heartbeat(id: string, ttlMs: number, info?: Record<string, unknown>): Promise<void> {
    return this.#leases.heartbeat(id, ttlMs, info);
  }
  instances(): Promise<InstanceRecord[]> {
    return this.#leases.instances();
  }
  removeInstance(id: string): Promise<void> {
    return this.#leases.removeInstance(id);
  }

  // PenaltyStore
  penalize(penalty: Penalty): Promise<void> {
    return this.#penalties.penalize(penalty);
  }
  activePenalty(scope: TokenScope, subjects: readonly PenaltySubject[], now: bigint): Promise<Penalty | undefined> {
    return this.#penalties.activePenalty(scope, subjects, now);
  }

  // IdentifierStore
  bindPaymentIdentifier(scope: TokenScope, payer: Address, id: string, payment: BoundPayment): Promise<BoundPayment> {
    return this.#identifiers.bindPaymentIdentifier(scope, payer, id, payment);
  }
  paymentIdentifierBinding(scope: TokenScope, payer: Address, id: string): Promise<BoundPayment | undefined> {
    return this.#identifiers.paymentIdentifierBinding(scope, payer, id);
  }

  // NonceIndexStore
  nonceIndexProgress(scope: TokenScope): Promise<NonceIndexProgress | undefined> {
    return this.#nonces.nonceIndexProgress(scope);
  }
  openNonceIndex(scope: TokenScope, fromBlock: bigint): Promise<NonceIndexProgress> {
    return this.#nonces.openNonceIndex(scope, fromBlock);
  }
  recordIndexedNonces(scope: TokenScope, nonces: readonly IndexedNonce[], range: NonceRange): Promise<NonceIndexProgress> {
    return this.#nonces.recordIndexedNonces(scope, nonces, range);
  }
  indexedNonces(scope: TokenScope, options: { after?: { authorizer: Address; nonce: Hex }; limit: number }): Promise<IndexedNonce[]> {
    return this.#nonces.indexedNonces(scope, options);
  }
  indexedNonce(scope: TokenScope, authorizer: Address, nonce: Hex): Promise<IndexedNonce | undefined> {
    return this.#nonces.indexedNonce(scope, authorizer, nonce);
  }

  // ChainHistoryStore
  chainHistory(chainId: number): Promise<ChainHistoryRecord | undefined> {
    return this.#histories.chainHistory(chainId);
  }
  recordCheckpoint(chainId: number, block: BlockRef): Promise<void> {
    return this.#histories.recordCheckpoint(chainId, block);
  }
  settledAfter(chainId: number, options: { afterBlock?: bigint; limit: number }): Promise<SettlementRecord[]> {
    return this.#histories.settledAfter(chainId, options);
  }
  adoptChainHistory(change: HistoryChange): Promise<HistoryAdoption> {
    return this.#histories.adoptChainHistory(change);
  }
  pendingHistoryChanges(chainId: number, options: { limit: number }): Promise<PendingHistoryChange[]> {
    return this.#histories.pendingHistoryChanges(chainId, options);
  }
  restoreChainHistory(chainId: number, changeId: number, options: { epoch: number }): Promise<HistoryRestoration> {
    return this.#histories.restoreChainHistory(chainId, changeId, options);
  }
  setAsideRows(options?: { chainId?: number; limit?: number }): Promise<SetAsideRow[]> {
    return this.#histories.setAsideRows(options);
  }

  // CatalogStore
  recordDiscoveryPayment(payment: DiscoveryPayment, bounds: DiscoveryBounds): Promise<DiscoveryRecorded> {
    return this.#catalog.recordDiscoveryPayment(payment, bounds);
  }
  listDiscoveryResources(request: DiscoveryPageRequest): Promise<DiscoveryPage> {
    return this.#catalog.listDiscoveryResources(request);
  }
  searchDiscoveryResources(request: DiscoveryPageRequest & { words: readonly string[] }): Promise<DiscoverySearchPage> {
    return this.#catalog.searchDiscoveryResources(request);
  }
  removeDiscoveryResource(resource: string, method?: string, payTo?: string): Promise<number> {
    return this.#catalog.removeDiscoveryResource(resource, method, payTo);
  }

  // CounterStore
  hit(key: string, windowMs: number): Promise<CounterHit> {
    return this.#counters.hit(key, windowMs);
  }
  unhit(key: string): Promise<void> {
    return this.#counters.unhit(key);
  }
  resetHits(key: string): Promise<void> {
    return this.#counters.resetHits(key);
  }

  // LedgerLifecycle
  async prune(): Promise<void> {
    const now = this.#now();
    await this.#counters.prune(now);
    await this.#leases.prune(now);
    await this.#penalties.prune(now);
    await this.#broadcasts.prune(now);
  }
  health(): Promise<LedgerHealth> {
    return this.#db.health();
  }
  close(): Promise<void> {
    return this.#db.close();
  }
}
