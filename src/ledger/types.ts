import type { Address, Hex } from "viem";
import { RequestError } from "../protocol/reasons.js";

/** The `error` of a row given up before anything was broadcast (it may be claimed again). */
export const NOT_SENT_ERROR = `${RequestError.unavailable}: given up before any transaction was sent`;

/**
 * Where a settlement stands. `claimed`: an instance owns it (or it waits for a key holder), nothing
 * broadcast; `sent`: at least one transaction was signed and recorded before its broadcast;
 * `settled`: mined successfully; `failed`: it will not be mined (the error says why).
 */
export type SettlementStatus = "claimed" | "sent" | "settled" | "failed";

/** The row's identity: one authorization of one token on one chain. */
export interface SettlementKey {
  chainId: number;
  token: Address;
  authorizer: Address;
  nonce: Hex;
}

/** The simulated token call that settles the authorization. */
export interface SettlementCall {
  to: Address;
  data: Hex;
  gas: bigint;
}

/**
 * A transaction's known state. `signed`: recorded before its broadcast, acceptance unknown;
 * `accepted`: the node took it; `refused`: the node refused it outright (it never existed out there);
 * `mined` / `reverted`: its receipt; `dropped`: known to be gone (its nonce was used by another);
 * `replaced`: another version of it at the same relayer and nonce (re-priced) was mined instead.
 */
export type TransactionState = "signed" | "accepted" | "refused" | "mined" | "reverted" | "dropped" | "replaced";

/** One transaction broadcast (or about to be) for a settlement. Every one is kept. */
export interface BroadcastRecord {
  hash: Hex;
  relayer: Address;
  relayerNonce: number;
  /** The signed raw transaction: it can be broadcast again if the node forgets it. */
  raw: Hex;
  state: TransactionState;
  /** maxFeePerGas (EIP-1559) or gasPrice (legacy), in wei. */
  feeCap?: bigint;
  /** maxPriorityFeePerGas (EIP-1559), in wei. */
  priorityFee?: bigint;
  createdAt: number;
  updatedAt: number;
}

/** One settlement as the ledger holds it. Times are milliseconds since the epoch (the ledger's clock). */
export interface SettlementRecord {
  id: number;
  key: SettlementKey;
  /** Canonical network name (`cronos-testnet`, `cronos-mainnet`). */
  network: string;
  payee: Address;
  value: bigint;
  validBefore: bigint;
  status: SettlementStatus;
  /** The instance that sends (or follows) it; undefined = waiting for a relayer key holder. */
  owner?: string;
  /** Until then the owner may send it; afterwards another instance may take it over. */
  ownerExpiresAt?: number;
  /** If nothing was sent by then, the settlement is given up. */
  deadlineAt?: number;
  call?: SettlementCall;
  /** The latest transaction (or the mined one once settled). */
  txHash?: Hex;
  relayer?: Address;
  relayerNonce?: number;
  blockNumber?: bigint;
  /** Unix seconds of the block that mined it. */
  blockTimestamp?: bigint;
  error?: string;
  /** How many times it was claimed (a failed row may be claimed again). */
  attempts: number;
  createdAt: number;
  updatedAt: number;
  /** Every transaction ever recorded for it, oldest first. */
  transactions: BroadcastRecord[];
}

/** Whether any transaction of `record` may have reached the network. */
export function anythingSent(record: SettlementRecord): boolean {
  return record.transactions.some((tx) => tx.state !== "refused");
}

/** Parameters of {@link Ledger.claim}. */
export interface ClaimInput {
  key: SettlementKey;
  network: string;
  payee: Address;
  value: bigint;
  validBefore: bigint;
  /** The simulated call; may come later (with {@link Ledger.requeue}) when the owner simulates after claiming. */
  call?: SettlementCall;
  /** The instance that sends it now (it holds a relayer key); null hands it to any key holder. */
  owner: string | null;
  /** How long the owner may take to record its first transaction before another may take over. */
  ownerTtlMs: number;
  /** Give the settlement up if nothing was sent within this time (the settle time-out). */
  deadlineMs: number;
  /**
   * The payer's token balance read at the fresh head: refuse the claim when the values of the
   * payer's settlements in flight (claimed or sent, same chain and token) plus this one exceed it.
   */
  balance?: bigint;
  /**
   * The block `balance` was read at: settlements of the payer mined after it count as in flight too
   * (the balance read does not show them yet).
   */
  balanceBlock?: bigint;
}

/** What {@link Ledger.claim} decided. */
export type ClaimResult =
  /** This caller owns the row now (a new row, or a failed one claimed again). */
  | { outcome: "claimed"; record: SettlementRecord }
  /** Another settle owns (or finished) this authorization: wait for it or answer from it. */
  | { outcome: "exists"; record: SettlementRecord }
  /** The payer's settlements in flight already commit its balance. */
  | { outcome: "overBalance"; inFlight: bigint };

/** Parameters of {@link Ledger.recordBroadcast}. */
export interface RecordBroadcastInput {
  id: number;
  /** The row's owner; the record is refused if the row changed hands. */
  owner: string;
  hash: Hex;
  relayer: Address;
  relayerNonce: number;
  raw: Hex;
  feeCap?: bigint;
  priorityFee?: bigint;
  /** When the reconciler may look at the row if its owner has not finished it (the owner follows it until then). */
  checkAfterMs: number;
  /**
   * The generation of the relayer key's lease it was signed under ({@link Lease.epoch}): when given, the
   * record is refused once the key changed hands since, even if it came back to the same instance.
   */
  leaseEpoch?: number;
}

/**
 * Parameters of {@link Ledger.recordReplacement}: `relayer` and `relayerNonce` are those of the row's latest
 * transaction (a replacement takes the same nonce).
 */
export interface RecordReplacementInput extends Omit<RecordBroadcastInput, "owner" | "checkAfterMs"> {
  /** The instance that signs it: it must hold the lease of `relayer` (the key's single writer). */
  holder: string;
}

/**
 * Parameters of {@link Ledger.recordFiller}: a gap filler, a zero-value self-transfer that takes a relayer
 * nonce which no settlement's transaction can use (nobody holds it, or its call can no longer succeed).
 */
export interface RecordFillerInput {
  chainId: number;
  /** The instance that signs it: it must hold the lease of `relayer`, of generation `leaseEpoch`. */
  holder: string;
  leaseEpoch: number;
  hash: Hex;
  raw: Hex;
  relayer: Address;
  relayerNonce: number;
  feeCap?: bigint;
  priorityFee?: bigint;
  /** The transaction it replaces at the nonce: a settlement's it supersedes, or an earlier version of the filler. */
  replaces?: Hex;
}

/** A gap filler as the ledger keeps it (written ahead of its broadcast, under the key's lease). */
export interface FillerRecord extends Omit<RecordFillerInput, "replaces"> {
  replaces?: Hex;
  /** `refused`: the node refused it, so it never existed out there. */
  state: "signed" | "refused";
  createdAt: number;
}

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

/** Who a revert penalty falls on: a payer (`code`: a wallet code hash, written by earlier versions only). */
export interface PenaltySubject {
  kind: "payer" | "code";
  /** Lower-case address, or code hash. */
  subject: string;
}

/**
 * The penalty subject of a payer: its address, and nothing else. A penalty keyed by a wallet's code hash
 * would let anyone who deploys a wallet of the same code, and makes it revert once, lock out every other
 * wallet with that code; the relayer's exposure is bounded per payer instead (docs/operations.md). Rows of
 * kind `code` written by earlier versions are kept but no longer asked for.
 */
export function penaltySubject(payer: Address): PenaltySubject {
  return { kind: "payer", subject: payer.toLowerCase() };
}

/** One token on one chain. */
export interface TokenScope {
  chainId: number;
  token: Address;
}

/**
 * A revert penalty: settles from `subject` are refused until `until`, in the chain's time (Unix
 * seconds of its blocks), so instances need not agree on a wall clock.
 */
export interface Penalty extends PenaltySubject, TokenScope {
  until: bigint;
  txHash?: Hex;
}

/** An authorization nonce the token state index found used or canceled on chain. */
export interface IndexedNonce {
  authorizer: Address;
  nonce: Hex;
  /** The block of its AuthorizationUsed or AuthorizationCanceled log. */
  blockNumber: bigint;
}

/** A range of blocks whose used and canceled nonces are all given (see {@link Ledger.recordIndexedNonces}). */
export interface NonceRange {
  fromBlock: bigint;
  throughBlock: bigint;
  /** The hash of `throughBlock`: recorded as a checkpoint of the chain's history with the progress. */
  throughHash?: Hex;
}

/** How far the shared record of used and canceled authorization nonces reaches, for one token. */
export interface NonceIndexProgress {
  /** The first block covered: the token's deployment block, or the configured start. */
  fromBlock: bigint;
  /** Every AuthorizationUsed / AuthorizationCanceled log of blocks fromBlock..throughBlock is stored; fromBlock - 1 while none is. */
  throughBlock: bigint;
}

/** A block of a chain's history: its number and hash. */
export interface BlockRef {
  number: bigint;
  hash: Hex;
}

/** A block the ledger saw in a chain's history, and when (the ledger's clock, ms): the trail a changed history is walked back on. */
export interface Checkpoint extends BlockRef {
  recordedAt: number;
}

/** What the ledger knows of the history its rows of one chain were learned on. */
export interface ChainHistoryRecord {
  chainId: number;
  /** Block 0's hash. */
  genesisHash: Hex;
  /** Grows by one each time the chain's rows are all set aside (a history with nothing in common). */
  epoch: number;
  /** Blocks of that history (the index's stored progress, start-ups, a periodic look), newest first, at most {@link CHECKPOINT_LIMIT}. */
  checkpoints: Checkpoint[];
}

/** Checkpoints kept per chain (the newest). */
export const CHECKPOINT_LIMIT = 128;

/**
 * A change of a chain's history, for {@link Ledger.adoptChainHistory}: which of the chain's rows belong to the
 * history the ledger knew and not to the chain's now.
 */
export interface HistoryChange {
  chainId: number;
  /** The chain's block 0 now. */
  genesisHash: Hex;
  /**
   * The newest block both histories share (a revert, a replaced branch). Absent: nothing in common (another chain
   * under the same id: a local chain restarted), and every row of the chain is set aside.
   */
  common?: BlockRef;
  /**
   * With `common`: penalties and payment identifiers written after this time (the ledger's clock, ms) are set aside
   * too; default: none of them.
   */
  since?: number;
  /** With `common`: its block's time (ms): catalog entries paid at or after it are set aside too; default: none. */
  commonTime?: number;
  /** Settled rows proven on the chain now by their receipt: never set aside. */
  keep?: readonly number[];
  /** The epoch the caller decided on: the change is refused (`adopted: false`) when another instance changed it meanwhile. */
  epoch: number | undefined;
  /** Why (kept with the rows set aside). */
  reason: string;
}

/** What {@link Ledger.adoptChainHistory} did: how many rows it set aside (or deleted: the index's nonces) of each kind. */
export type HistoryAdoption =
  | { adopted: false }
  | { adopted: true; epoch: number; settlements: number; penalties: number; paymentIdentifiers: number; catalogEntries: number; indexedNonces: number };

/** A row set aside because it belongs to another history of its chain: kept, never served. */
export interface SetAsideRow {
  chainId: number;
  /** The genesis of the history it belonged to (as the ledger knew it). */
  genesisHash?: Hex;
  kind: "settlement" | "settlement_transaction" | "penalty" | "payment_identifier" | "catalog_entry";
  /** The row as it was stored (column → value). */
  row: Record<string, unknown>;
  reason: string;
  setAsideAt: number;
}

/**
 * The payment a payment identifier is bound to: the authorization's nonce and its EIP-712 digest, which
 * covers everything signed (payer, payee, value, validAfter, validBefore, nonce, and the token and chain
 * through the domain). `digest` is absent for a binding recorded before migration 0004, which kept the
 * nonce only.
 */
export interface BoundPayment {
  nonce: Hex;
  digest?: Hex;
}

/** A rate-limit counter after a hit. */
export interface CounterHit {
  hits: number;
  resetAt: number;
}

/** The database as `/healthcheck` reports it. */
export interface LedgerHealth {
  backend: "sqlite" | "postgres";
  /** Where: a file path, `:memory:`, or the PostgreSQL URL without credentials. */
  location: string;
  reachable: boolean;
  migrations: { applied: number; expected: number };
  error?: string;
}

/** One resource of the discovery catalog (x402 `bazaar`), as `GET …/discovery/resources` lists it. */
export interface DiscoveryEntry {
  /** The resource's canonical URL (origin and path). */
  resource: string;
  /** `http` or `mcp`. */
  type: string;
  x402Version: number;
  /** The payment requirements it was paid under, as the payer accepted them. */
  accepts: Array<Record<string, unknown>>;
  /** ISO 8601 time of the last payment that updated it. */
  lastUpdated: string;
  description?: string;
  mimeType?: string;
  /** The declaration as the payment carried it (`{bazaar: {info, schema}}`). */
  extensions?: Record<string, unknown>;
}

/**
 * A settled payment's catalog entry ({@link Ledger.recordDiscoveryPayment}): the listing the payment declared,
 * with the facts of the payment itself (its way of paying, payTo and time) taken from the settlement.
 */
export interface DiscoveryPayment {
  /** `accepts` holds the one way this payment paid; `lastUpdated` is the block's time. */
  entry: DiscoveryEntry;
  /** Who was paid (the receipt's `Transfer` to): the entry's owner. */
  payTo: string;
  /** Who paid (the receipt's `Transfer` from): counted once among the entry's distinct payers. */
  payer: string;
  /** The words search finds the entry by, distinct, lower case, best first (at most {@link DISCOVERY_MAX_WORDS}). */
  words: readonly string[];
}

/** Bounds of the catalog ({@link Ledger.recordDiscoveryPayment}): entries beyond them are evicted. */
export interface DiscoveryBounds {
  /** Entries in all (`CATALOG_MAX_ENTRIES`). */
  maxEntries: number;
  /** Entries of one payTo (`CATALOG_MAX_ENTRIES_PER_SELLER`). */
  maxEntriesPerSeller: number;
}

/** What {@link Ledger.recordDiscoveryPayment} did. */
export interface DiscoveryRecorded {
  /** Whether the entry was new (else an existing entry of the same payTo was updated). */
  created: boolean;
  /** Entries evicted to keep the bounds (possibly the new one itself). */
  evicted: number;
}

/** Distinct payers counted per entry: standing saturates here (and the payer rows kept per entry stop). */
export const DISCOVERY_MAX_PAYERS = 16;
/** Words of one entry that search indexes. */
export const DISCOVERY_MAX_WORDS = 64;
/** Longest word indexed (and searched), in characters. */
export const DISCOVERY_MAX_WORD_LENGTH = 64;
/** Distinct words of one search query. */
export const DISCOVERY_MAX_QUERY_WORDS = 8;
/** Entries one search reads per query word, the best first: what bounds a search's work at any catalog size. */
export const DISCOVERY_CANDIDATES_PER_WORD = 250;

/** Filters of {@link Ledger.listDiscoveryResources} and {@link Ledger.searchDiscoveryResources}. */
export interface DiscoveryFilter {
  type?: string;
  payTo?: string;
  scheme?: string;
  network?: string;
}

/** A page: at most `limit` entries and, past the first, no more than `maxBytes` of JSON. */
export interface DiscoveryPageRequest {
  filter?: DiscoveryFilter;
  limit: number;
  offset: number;
  maxBytes: number;
}

/** A page of the catalog: each item is an entry ({@link DiscoveryEntry}) as JSON text, served as stored. */
export interface DiscoveryPage {
  items: string[];
  /** Entries matching the filter in all. */
  total: number;
}

/** A page of search results, the best first. */
export interface DiscoverySearchPage {
  items: string[];
  /** Whether more results follow this page. */
  more: boolean;
  /** Whether some query word matched more entries than one search reads ({@link DISCOVERY_CANDIDATES_PER_WORD}). */
  partial: boolean;
}

/** Counts for metrics. */
export interface PendingSummary {
  /** Rows claimed or sent. */
  count: number;
  /** Creation time of the oldest of them. */
  oldestCreatedAt?: number;
}

/**
 * The settlement ledger: the single record of money movement, shared by every facilitator instance
 * that uses the same database. Implementations: embedded SQLite (one instance) and PostgreSQL
 * (several). Every method is atomic on its own.
 */
export interface Ledger {
  readonly backend: "sqlite" | "postgres";

  /**
   * Claims an authorization, atomically across instances. A new key, or a `failed` row (whose
   * authorization the caller found unused on chain), becomes `claimed` by the caller; any other row
   * is returned as it is. With `balance`, refuses when the payer's settlements in flight would exceed it.
   */
  claim(input: ClaimInput): Promise<ClaimResult>;
  /** Takes up to `limit` rows waiting for a key holder, with their call (skipping rows another instance is taking). */
  takeQueued(input: { owner: string; chainIds: readonly number[]; limit: number; ownerTtlMs: number }): Promise<SettlementRecord[]>;
  /**
   * Write-ahead: records a signed transaction BEFORE it is broadcast, moving the row to `sent`.
   * False (record nothing, broadcast nothing) when `owner` no longer owns the row, the row is final,
   * or `owner` does not hold the lease of `relayer` (of generation `leaseEpoch`, when given).
   */
  recordBroadcast(input: RecordBroadcastInput): Promise<boolean>;
  /**
   * Write-ahead for a new version of the row's latest transaction (re-priced, or re-signed) at the same
   * relayer and nonce, BEFORE it is broadcast; the row's `txHash` becomes it. False (record nothing,
   * broadcast nothing) when the row is final, its latest transaction is at another relayer or nonce, or
   * `holder` does not hold the relayer key's lease (of generation `leaseEpoch`, when given). Row ownership does not matter: whoever holds the
   * key keeps its transactions moving (after a restart, or a key taken over from another instance).
   */
  recordReplacement(input: RecordReplacementInput): Promise<boolean>;
  /**
   * Write-ahead for a gap filler (no settlement's transaction), BEFORE it is broadcast. False (record
   * nothing, broadcast nothing) unless `holder` holds the lease of `relayer` of generation `leaseEpoch`.
   */
  recordFiller(input: RecordFillerInput): Promise<boolean>;
  /** The node refused a recorded gap filler: it never existed out there. */
  markFillerRefused(hash: Hex): Promise<void>;
  /**
   * A key's recorded gap fillers at `fromNonce` (its mined transaction count) and above, not refused, by
   * nonce then age (at most `limit`): what its next holder follows.
   */
  pendingFillers(input: { chainId: number; relayer: Address; fromNonce: number; limit: number }): Promise<FillerRecord[]>;
  /** Updates what is known about one recorded transaction. */
  markTransaction(hash: Hex, state: TransactionState): Promise<void>;
  /**
   * `claimed`/`sent` → `settled`, its transaction `mined` and the row's other versions at that relayer and
   * nonce `replaced`. Idempotent for the same hash; throws on a final row otherwise.
   */
  markSettled(id: number, input: { txHash: Hex; blockNumber: bigint; blockTimestamp: bigint }): Promise<SettlementRecord>;
  /**
   * `claimed`/`sent` → `failed`. With `owner`, only while that instance owns the row (null: only while
   * it waits for a key holder); else undefined and nothing changes. With `txHash` (the version that was
   * mined and reverted), the row's hash becomes it.
   */
  markFailed(id: number, input: { error: string; owner?: string | null; txHash?: Hex }): Promise<SettlementRecord | undefined>;
  /**
   * Gives up a claim on which nothing was recorded: `claimed` → `failed`, only while `owner` (null:
   * nobody, the row waits for a key holder) owns it. Undefined when it changed meanwhile (then a
   * transaction may be on its way: follow the row instead).
   */
  withdraw(id: number, input: { error: string; owner: string | null }): Promise<SettlementRecord | undefined>;
  /**
   * Gives up every claim `owner` holds on which nothing was recorded (`claimed` → `failed` with `error`),
   * but those in `keep` (claims its settles are still working on): after an outage, the claims whose
   * settles were answered 503 meanwhile, so that a retry claims the authorization afresh. Gives their ids.
   */
  withdrawOwned(input: { owner: string; error: string; keep: readonly number[] }): Promise<number[]>;
  /**
   * Hands a claimed row from `owner` to any relayer key holder (its owner holds no key, or did not send
   * in time), with `call` when the owner simulated it after claiming. False when `owner` no longer owns it.
   */
  requeue(id: number, owner: string, call?: SettlementCall): Promise<boolean>;

  get(key: SettlementKey): Promise<SettlementRecord | undefined>;
  getById(id: number): Promise<SettlementRecord | undefined>;
  /** The settlement any of whose transactions (or whose settling transaction) has this hash. */
  findByTxHash(hash: Hex): Promise<SettlementRecord | undefined>;
  /** Settlements of one authorization on one chain (any token). */
  findByAuthorization(chainId: number, authorizer: Address, nonce: Hex): Promise<SettlementRecord[]>;
  /** Rows claimed or sent, oldest first. */
  listPending(options?: { chainIds?: readonly number[]; limit?: number }): Promise<SettlementRecord[]>;
  pendingSummary(): Promise<PendingSummary>;
  /**
   * For the reconciler: takes up to `limit` claimed/sent rows due for a check and postpones their
   * next check by `recheckMs`, so instances share the work without doing it twice.
   */
  takeDue(input: { chainIds: readonly number[]; limit: number; recheckMs: number }): Promise<SettlementRecord[]>;
  /** Postpones the reconciler's next look at a row (its owner is following it). */
  deferCheck(id: number, untilMs: number): Promise<void>;

  /**
   * Resolves with the row once it is settled or failed, or with its latest state when `timeoutMs`
   * passes (or `signal` aborts). Undefined when the row does not exist.
   */
  waitForOutcome(id: number, timeoutMs: number, signal?: AbortSignal): Promise<SettlementRecord | undefined>;
  /** Calls `listener` when a row is queued for a key holder (any instance). Returns an unsubscribe. */
  onQueued(listener: () => void): () => void;

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

  /** Records a penalty (a later `until` wins over an earlier one). */
  penalize(penalty: Penalty): Promise<void>;
  /** The penalty among `subjects` that lasts longest past `now` (chain time), if any. */
  activePenalty(scope: TokenScope, subjects: readonly PenaltySubject[], now: bigint): Promise<Penalty | undefined>;

  /**
   * Binds a payer's payment identifier (the x402 `payment-identifier` extension) to the authorization
   * it first came with, unless it is bound already. Returns the payment it is bound to: this one, or the
   * earlier one. One binding for all instances; it is never released.
   */
  bindPaymentIdentifier(scope: TokenScope, payer: Address, id: string, payment: BoundPayment): Promise<BoundPayment>;
  /** The payment a payer's payment identifier is bound to, if any. */
  paymentIdentifierBinding(scope: TokenScope, payer: Address, id: string): Promise<BoundPayment | undefined>;

  /** The nonce index's progress for `scope`, if it was ever opened. */
  nonceIndexProgress(scope: TokenScope): Promise<NonceIndexProgress | undefined>;
  /**
   * Opens the nonce index of `scope` at `fromBlock`: creates its progress (fromBlock, fromBlock - 1) when there is none;
   * when the stored one starts later than `fromBlock` (an earlier start configured), starts it over at `fromBlock`
   * (throughBlock = fromBlock - 1), keeping the nonces stored (they are still true). Otherwise leaves it as it is.
   * Returns the progress. Safe when several instances open it at once.
   */
  openNonceIndex(scope: TokenScope, fromBlock: bigint): Promise<NonceIndexProgress>;
  /**
   * Stores `nonces` (one already stored is left as it is) and, in the same transaction, raises throughBlock to
   * `range.throughBlock` when the stored progress already reaches `range.fromBlock - 1` (never lowers it; a range
   * that would leave blocks between unread raises nothing, its nonces are stored all the same). The caller vouches
   * that every such log of `range` is among `nonces` or stored. Throws LedgerError "not_found" when the index was
   * never opened. With `range.throughHash`, a progress raised to `range.throughBlock` records that block as a
   * checkpoint of the chain's history in the same transaction. Returns the progress after.
   */
  recordIndexedNonces(scope: TokenScope, nonces: readonly IndexedNonce[], range: NonceRange): Promise<NonceIndexProgress>;
  /** Stored nonces of `scope` in (authorizer, nonce) order, after `after` (exclusive), at most `limit`: the pages that load the index. */
  indexedNonces(scope: TokenScope, options: { after?: { authorizer: Address; nonce: Hex }; limit: number }): Promise<IndexedNonce[]>;
  /** One stored nonce of `scope` (any case), if stored: what the index asks when it does not hold the nonce in memory. */
  indexedNonce(scope: TokenScope, authorizer: Address, nonce: Hex): Promise<IndexedNonce | undefined>;

  /** What the ledger knows of the history of chain `chainId` (undefined: nothing yet). */
  chainHistory(chainId: number): Promise<ChainHistoryRecord | undefined>;
  /** Records a block of the chain's history as a checkpoint (the oldest beyond {@link CHECKPOINT_LIMIT} go). */
  recordCheckpoint(chainId: number, block: BlockRef): Promise<void>;
  /** Settled rows of `chainId` mined after `afterBlock` (every one without it), the latest mined first, at most `limit`. */
  settledAfter(chainId: number, options: { afterBlock?: bigint; limit: number }): Promise<SettlementRecord[]>;
  /**
   * Binds the chain's rows to its history now, atomically (serialized across instances): records the genesis, and
   * sets aside what belongs to the history the ledger knew instead. With `common`: settled rows mined after it
   * (but `keep`), and rows without a block written after `since`; the index's nonces of blocks after it are deleted
   * and its progress lowered to it. Without: every row of the chain (but `keep`), and the index's nonces and progress.
   * Rows set aside go to `set_aside_rows`, never served. Refused (`adopted: false`, nothing done) when the chain's
   * epoch is no longer `change.epoch`.
   */
  adoptChainHistory(change: HistoryChange): Promise<HistoryAdoption>;
  /** Rows set aside (of `chainId`, or every chain), the latest first, at most `limit` (default 100). */
  setAsideRows(options?: { chainId?: number; limit?: number }): Promise<SetAsideRow[]>;

  /**
   * Records a settled payment in the discovery catalog. The entry is keyed by resource URL, method
   * (`mcp:<toolName>` for a tool) AND payTo: only payments to an entry's own payTo create or change it; the
   * same URL paid to another payTo is another entry. An update keeps every way of paying (one per scheme and
   * network, the latest first), takes the payment's description and declaration, counts the payer among the
   * distinct payers (up to {@link DISCOVERY_MAX_PAYERS}) and keeps the latest payment's time. Then evicts
   * beyond `bounds`, the entries with the fewest distinct payers first and among them the least recently paid:
   * within the payTo over its own bound, then in all. Serialized across instances.
   */
  recordDiscoveryPayment(payment: DiscoveryPayment, bounds: DiscoveryBounds): Promise<DiscoveryRecorded>;
  /**
   * The catalog's entries that match `filter` (each field exact, but `payTo` case-insensitive and `network`
   * in either form, `eip155:338` or `cronos-testnet`), most recently paid first, a page of them and the total.
   */
  listDiscoveryResources(request: DiscoveryPageRequest): Promise<DiscoveryPage>;
  /**
   * The entries whose words include any of `words` (lower case, distinct, at most {@link DISCOVERY_MAX_QUERY_WORDS}),
   * filtered as {@link listDiscoveryResources} does: more of the words first, then more distinct payers, then the
   * most recently paid. Reads the best {@link DISCOVERY_CANDIDATES_PER_WORD} entries of each word (of the payTo's
   * entries with a `payTo` filter); `partial` says a word had more.
   */
  searchDiscoveryResources(request: DiscoveryPageRequest & { words: readonly string[] }): Promise<DiscoverySearchPage>;
  /**
   * Removes a resource from the catalog (an operator's decision): every entry of its URL, or `method`'s (an
   * HTTP method, or `mcp:<toolName>`), of every payTo or `payTo`'s; returns how many entries went.
   */
  removeDiscoveryResource(resource: string, method?: string, payTo?: string): Promise<number>;
  /**
   * Retention: deletes up to `limit` finished settlements (settled or failed, never claimed or sent) last
   * changed before `before` (ms, this ledger's clock), with their transactions; returns how many went.
   */
  deleteFinishedSettlements(before: number, limit: number): Promise<number>;

  /** Counts one hit of `key` in a fixed window of `windowMs` starting at its first hit. */
  hit(key: string, windowMs: number): Promise<CounterHit>;
  unhit(key: string): Promise<void>;
  resetHits(key: string): Promise<void>;
  /** Deletes lapsed counters and instances, and penalties that ended a day ago or more (by this clock). */
  prune(): Promise<void>;

  health(): Promise<LedgerHealth>;
  close(): Promise<void>;
}

/** Every ledger error: `code` is stable. */
export class LedgerError extends Error {
  override name = "LedgerError";
  constructor(
    readonly code: "illegal_transition" | "not_found" | "config" | "unavailable",
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A state change the ledger refuses (e.g. a settled row marked failed). */
export class IllegalTransitionError extends LedgerError {
  override name = "IllegalTransitionError";
  constructor(
    readonly from: SettlementStatus,
    readonly to: SettlementStatus,
    id: number,
  ) {
    super("illegal_transition", `settlement ${id}: ${from} → ${to} is not allowed`);
  }
}
