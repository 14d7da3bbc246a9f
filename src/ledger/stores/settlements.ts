import type { Address, Hex } from "viem";
import type { SettlementFailureCode } from "../../protocol/reasons.js";
import type { BroadcastRecord } from "./broadcasts.js";

/**
 * Where a settlement stands. `claimed`: an instance owns it (or it waits for a key holder), nothing
 * broadcast; `sent`: at least one transaction was signed and recorded before its broadcast;
 * `settled`: mined successfully; `failed`: it will not be mined (its `errorCode` says why).
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
  /** Why a `failed` row failed (`notSent`: given up before anything was broadcast; it may be claimed again). */
  errorCode?: SettlementFailureCode;
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

/** Parameters of {@link SettlementStore.claim}. */
export interface ClaimInput {
  key: SettlementKey;
  network: string;
  payee: Address;
  value: bigint;
  validBefore: bigint;
  /** The simulated call; may come later (with {@link SettlementStore.requeue}) when the owner simulates after claiming. */
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

/** What {@link SettlementStore.claim} decided. */
export type ClaimResult =
  /** This caller owns the row now (a new row, or a failed one claimed again). */
  | { outcome: "claimed"; record: SettlementRecord }
  /** Another settle owns (or finished) this authorization: wait for it or answer from it. */
  | { outcome: "exists"; record: SettlementRecord }
  /** The payer's settlements in flight already commit its balance. */
  | { outcome: "overBalance"; inFlight: bigint };

/** Counts for metrics. */
export interface PendingSummary {
  /** Rows claimed or sent. */
  count: number;
  /** Creation time of the oldest of them. */
  oldestCreatedAt?: number;
}

/**
 * The settlements: one row per authorization, claimed across instances, followed to its outcome, and
 * read back (by key, id, transaction hash) to answer a settle, a status request or the reconciler.
 */
export interface SettlementStore {
  /**
   * Claims an authorization, atomically across instances. A new key, or a `failed` row (whose
   * authorization the caller found unused on chain), becomes `claimed` by the caller; any other row
   * is returned as it is. With `balance`, refuses when the payer's settlements in flight would exceed it.
   */
  claim(input: ClaimInput): Promise<ClaimResult>;
  /** Takes up to `limit` rows waiting for a key holder, with their call (skipping rows another instance is taking). */
  takeQueued(input: { owner: string; chainIds: readonly number[]; limit: number; ownerTtlMs: number }): Promise<SettlementRecord[]>;
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
  markFailed(id: number, input: { code: SettlementFailureCode; owner?: string | null; txHash?: Hex }): Promise<SettlementRecord | undefined>;
  /**
   * Gives up a claim on which nothing was recorded: `claimed` → `failed`, only while `owner` (null:
   * nobody, the row waits for a key holder) owns it. Undefined when it changed meanwhile (then a
   * transaction may be on its way: follow the row instead).
   */
  withdraw(id: number, input: { code: SettlementFailureCode; owner: string | null }): Promise<SettlementRecord | undefined>;
  /**
   * Gives up every claim `owner` holds on which nothing was recorded (`claimed` → `failed` with `code`),
   * but those in `keep` (claims its settles are still working on): after an outage, the claims whose
   * settles were answered 503 meanwhile, so that a retry claims the authorization afresh. Gives their ids.
   */
  withdrawOwned(input: { owner: string; code: SettlementFailureCode; keep: readonly number[] }): Promise<number[]>;
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
  /**
   * Retention: deletes up to `limit` finished settlements (settled or failed, never claimed or sent) last
   * changed before `before` (ms, this ledger's clock), with their transactions; returns how many went.
   */
  deleteFinishedSettlements(before: number, limit: number): Promise<number>;
}
