import { EventEmitter } from "node:events";
import { getAddress, type Address, type Hex } from "viem";
import { CATALOG_LOCK, SqlDiscoveryCatalog } from "./sql/catalog.js";
import {
  CHECKPOINT_LIMIT,
  IllegalTransitionError,
  LedgerError,
  type BlockRef,
  type BroadcastRecord,
  type ChainHistoryRecord,
  type HistoryAdoption,
  type HistoryChange,
  type NonceRange,
  type SetAsideRow,
  type BoundPayment,
  type ClaimInput,
  type ClaimResult,
  type CounterHit,
  type DiscoveryBounds,
  type DiscoveryPage,
  type DiscoveryPageRequest,
  type DiscoveryPayment,
  type DiscoveryRecorded,
  type DiscoverySearchPage,
  type IndexedNonce,
  type FillerRecord,
  type InstanceRecord,
  type Lease,
  type Ledger,
  type LedgerHealth,
  type NonceIndexProgress,
  type Penalty,
  type PenaltySubject,
  type PendingSummary,
  type RecordBroadcastInput,
  type RecordFillerInput,
  type RecordReplacementInput,
  type SettlementCall,
  type SettlementKey,
  type SettlementRecord,
  type SettlementStatus,
  type TokenScope,
  type TransactionState,
} from "./types.js";

/** A value bound to a `?` placeholder. */
export type SqlValue = string | number | null;
/** A result row, column name → value (PostgreSQL BIGINTs arrive as strings). */
export type SqlRow = Record<string, unknown>;

/** Runs statements with `?` placeholders. */
export interface SqlExecutor {
  all(sql: string, params?: readonly SqlValue[]): Promise<SqlRow[]>;
  /** Returns the number of rows changed. */
  run(sql: string, params?: readonly SqlValue[]): Promise<number>;
}

/** An open transaction. */
export interface SqlTransaction extends SqlExecutor {
  /** Delivers `message` to every instance's listeners once the transaction commits. */
  notify(message: string): Promise<void>;
}

/** Options of {@link SqlDriver.transaction}. */
export interface SqlTransactionOptions {
  /** Serializes the transactions that name the same lock, across instances (e.g. one payer's claims). */
  lock?: string;
}

/** What a backend provides to {@link SqlLedger}: statements, transactions, notifications. */
export interface SqlDriver extends SqlExecutor {
  readonly backend: "sqlite" | "postgres";
  /** Appended to a sub-select that takes rows for work: ` FOR UPDATE SKIP LOCKED` or nothing. */
  readonly skipLocked: string;
  /** Appended to a select of a row about to change: ` FOR UPDATE` or nothing. */
  readonly forUpdate: string;
  /** Whether a WITH clause may hold UPDATE/INSERT (several changes in one atomic statement). */
  readonly writableCte: boolean;
  /** Notifications from every instance sharing the database (`o:<id>`, `q:<id>`). */
  readonly messages: EventEmitter;
  transaction<T>(work: (tx: SqlTransaction) => Promise<T>): Promise<T>;
  transaction<T>(options: SqlTransactionOptions, work: (tx: SqlTransaction) => Promise<T>): Promise<T>;
  /**
   * A read that may run off the event loop (the embedded ledger's file: a reader thread of its own) and sees
   * every commit made before it was asked; absent where `all` already does (PostgreSQL).
   */
  read?(sql: string, params: readonly SqlValue[]): Promise<SqlRow[]>;
  health(): Promise<LedgerHealth>;
  close(): Promise<void>;
}

/** Options of {@link SqlLedger}. */
export interface SqlLedgerOptions {
  /** Milliseconds since the epoch; default `Date.now`. Tests move it. */
  clock?: () => number;
  /** Outcome waits re-read the row this often, in case a notification was missed; default 1000 ms. */
  pollMs?: number;
}

const FINAL: ReadonlySet<SettlementStatus> = new Set(["settled", "failed"]);
const IN_FLIGHT = "('claimed', 'sent')";

const lower = (value: string) => value.toLowerCase();
// Checksumming costs a keccak; the same few addresses (tokens, relayers, busy payers) come back all the time.
const checksums = new Map<string, Address>();
function checksum(value: string): Address {
  let address = checksums.get(value);
  if (!address) {
    if (checksums.size >= 10_000) checksums.clear();
    checksums.set(value, (address = getAddress(value)));
  }
  return address;
}
const num = (value: unknown) => (value === null || value === undefined ? undefined : Number(value));
const str = (value: unknown) => (value === null || value === undefined ? undefined : String(value));
const big = (value: unknown) => (value === null || value === undefined ? undefined : BigInt(value as string));
const placeholders = (count: number) => Array.from({ length: count }, () => "?").join(", ");

function keyParams(key: SettlementKey): SqlValue[] {
  return [key.chainId, lower(key.token), lower(key.authorizer), lower(key.nonce)];
}

function toTransaction(row: SqlRow): BroadcastRecord {
  return {
    hash: row.hash as Hex,
    relayer: checksum(row.relayer as string),
    relayerNonce: Number(row.relayer_nonce),
    raw: row.raw as Hex,
    state: row.state as TransactionState,
    ...(row.fee_cap != null ? { feeCap: BigInt(row.fee_cap as string) } : {}),
    ...(row.priority_fee != null ? { priorityFee: BigInt(row.priority_fee as string) } : {}),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

function toSettlement(row: SqlRow, transactions: BroadcastRecord[]): SettlementRecord {
  const defined = <T extends object>(value: T) => Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
  return {
    id: Number(row.id),
    key: {
      chainId: Number(row.chain_id),
      token: checksum(row.token as string),
      authorizer: checksum(row.authorizer as string),
      nonce: row.nonce as Hex,
    },
    network: String(row.network),
    payee: checksum(row.payee as string),
    value: BigInt(row.value as string),
    validBefore: BigInt(row.valid_before as string),
    status: row.status as SettlementStatus,
    attempts: Number(row.attempts),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    transactions,
    ...defined({
      owner: str(row.owner),
      ownerExpiresAt: num(row.owner_expires_at),
      deadlineAt: num(row.deadline_at),
      call:
        row.call_to != null
          ? { to: checksum(row.call_to as string), data: row.call_data as Hex, gas: BigInt(row.call_gas as string) }
          : undefined,
      txHash: str(row.tx_hash) as Hex | undefined,
      relayer: row.relayer != null ? checksum(row.relayer as string) : undefined,
      relayerNonce: num(row.relayer_nonce),
      blockNumber: big(row.block_number),
      blockTimestamp: big(row.block_timestamp),
      error: str(row.error),
    }),
  };
}

function toLease(row: SqlRow): Lease {
  return {
    address: checksum(row.address as string),
    holder: String(row.holder),
    epoch: Number(row.epoch),
    acquiredAt: Number(row.acquired_at),
    expiresAt: Number(row.expires_at),
  };
}

function toPenalty(row: SqlRow): Penalty {
  return {
    chainId: Number(row.chain_id),
    token: checksum(row.token as string),
    kind: row.kind as Penalty["kind"],
    subject: String(row.subject),
    until: BigInt(row.until_at as string),
    ...(row.tx_hash != null ? { txHash: row.tx_hash as Hex } : {}),
  };
}

function toProgress(row: SqlRow): NonceIndexProgress {
  return { fromBlock: BigInt(row.from_block as string), throughBlock: BigInt(row.through_block as string) };
}

/**
 * Most rows in one INSERT of indexed nonces (5 parameters each: far under SQLite's limit of bound parameters).
 * A power of two: a batch goes in chunks of it and then of the powers of two below it, so that only a handful of
 * statement shapes exist (both drivers keep every distinct statement they prepare, for good).
 */
const NONCE_ROWS = 512;

function* nonceChunks<T>(rows: readonly T[]): Generator<readonly T[]> {
  let at = 0;
  for (let size = NONCE_ROWS; size > 0; size >>= 1) {
    for (; rows.length - at >= size; at += size) yield rows.slice(at, at + size);
  }
}

function toBoundPayment(row: SqlRow): BoundPayment {
  return { nonce: row.nonce as Hex, ...(row.digest != null ? { digest: row.digest as Hex } : {}) };
}

/**
 * The settlement a transaction hash names (any of its transactions, or the one that used its authorization):
 * two indexed reads (the transactions' unique hash, the rows' tx_hash), never a scan. An OR across the two
 * tables (`id IN (…) OR tx_hash = ?`) could only be answered by reading every row. Exported for the test
 * that reads its plan.
 */
export const FIND_BY_TX_HASH = `SELECT * FROM settlements WHERE id IN (
   SELECT settlement_id FROM settlement_transactions WHERE hash = ? UNION SELECT id FROM settlements WHERE tx_hash = ?
 ) ORDER BY id LIMIT 1`;

/** The write-ahead record of a signed transaction: completed with the row source (`settlements WHERE …`, or a CTE). */
const INSERT_SIGNED = `INSERT INTO settlement_transactions (hash, settlement_id, chain_id, relayer, relayer_nonce, raw, state, fee_cap, priority_fee, created_at, updated_at)
   SELECT ?, id, chain_id, ?, ?, ?, 'signed', ?, ?, ?, ? FROM`;

function signedParams(input: RecordBroadcastInput | RecordReplacementInput, now: number): SqlValue[] {
  return [lower(input.hash), lower(input.relayer), input.relayerNonce, input.raw, input.feeCap?.toString() ?? null, input.priorityFee?.toString() ?? null, now, now];
}

/**
 * The fence of every write-ahead record: the relayer key's lease is the writer's, not lapsed, and of the
 * generation named (when named). `lock` holds the lease row (PostgreSQL) until the record commits, so a
 * takeover waits for the record and then reads it, or the record sees the new generation and is refused.
 */
function leaseFence(epoch: number | undefined, lock: string): string {
  return `EXISTS (SELECT 1 FROM relayer_leases WHERE address = ? AND holder = ? AND expires_at > ?${epoch === undefined ? "" : " AND epoch = ?"}${lock})`;
}

function fenceParams(relayer: Address, holder: string, now: number, epoch: number | undefined): SqlValue[] {
  return [lower(relayer), holder, now, ...(epoch === undefined ? [] : [epoch])];
}

function toFiller(row: SqlRow): FillerRecord {
  return {
    chainId: Number(row.chain_id),
    hash: row.hash as Hex,
    raw: row.raw as Hex,
    relayer: checksum(row.relayer as string),
    relayerNonce: Number(row.relayer_nonce),
    holder: String(row.holder),
    leaseEpoch: Number(row.lease_epoch),
    state: row.state as FillerRecord["state"],
    ...(row.fee_cap != null ? { feeCap: BigInt(row.fee_cap as string) } : {}),
    ...(row.priority_fee != null ? { priorityFee: BigInt(row.priority_fee as string) } : {}),
    ...(row.replaces != null ? { replaces: row.replaces as Hex } : {}),
    createdAt: Number(row.created_at),
  };
}

/** Runs tasks one at a time per key, in order; a key with nothing queued is forgotten. */
class KeyedSerial {
  readonly #tails = new Map<string, Promise<unknown>>();
  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const result = (this.#tails.get(key) ?? Promise.resolve()).then(task);
    const tail = result.catch(() => undefined);
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }
}

/** How long a gap filler's record is kept (it is followed only until its nonce is mined). */
const FILLER_RECORD_MS = 7 * 86_400_000;

/**
 * The ledger over SQL: every rule lives here once; the backends ({@link SqlDriver}) differ only in
 * how statements run, how transactions serialize and how instances are notified.
 */
export class SqlLedger implements Ledger {
  readonly #db: SqlDriver;
  readonly #now: () => number;
  readonly #pollMs: number;
  // One payer's claims serialize in the database anyway (its reservation); queued here first, they do
  // not each hold a pooled connection while they wait for the lock.
  readonly #payers = new KeyedSerial();
  readonly #catalog: SqlDiscoveryCatalog;

  constructor(driver: SqlDriver, options: SqlLedgerOptions = {}) {
    this.#db = driver;
    this.#catalog = new SqlDiscoveryCatalog(driver);
    this.#now = options.clock ?? Date.now;
    this.#pollMs = options.pollMs ?? 1_000;
  }

  get backend(): "sqlite" | "postgres" {
    return this.#db.backend;
  }

  async #records(executor: SqlExecutor, rows: SqlRow[]): Promise<SettlementRecord[]> {
    if (rows.length === 0) return [];
    const ids = rows.map((row) => Number(row.id));
    const transactions = await executor.all(
      `SELECT * FROM settlement_transactions WHERE settlement_id IN (${placeholders(ids.length)}) ORDER BY id`,
      ids,
    );
    const byId = new Map<number, BroadcastRecord[]>(ids.map((id) => [id, []]));
    for (const tx of transactions) byId.get(Number(tx.settlement_id))?.push(toTransaction(tx));
    return rows.map((row) => toSettlement(row, byId.get(Number(row.id)) ?? []));
  }

  async #record(executor: SqlExecutor, row: SqlRow | undefined): Promise<SettlementRecord | undefined> {
    return row ? (await this.#records(executor, [row]))[0] : undefined;
  }

  async #lockedRow(tx: SqlTransaction, id: number): Promise<SqlRow> {
    const [row] = await tx.all(`SELECT * FROM settlements WHERE id = ?${this.#db.forUpdate}`, [id]);
    if (!row) throw new LedgerError("not_found", `settlement ${id} does not exist`);
    return row;
  }

  claim(input: ClaimInput): Promise<ClaimResult> {
    const key = keyParams(input.key);
    const payer = `${key[0]}:${key[1]}:${key[2]}`;
    return this.#payers.run(payer, () => this.#claim(input, key, payer));
  }

  #claim(input: ClaimInput, key: SqlValue[], payer: string): Promise<ClaimResult> {
    const now = this.#now();
    // Under the payer's lock (taken with BEGIN): only claims change a payer's rows to claimed, so the rows
    // read here stay as read, and a failed one is claimed again only if it is still failed.
    return this.#db.transaction({ lock: payer }, async (tx) => {
      // The authorization's row, and the payer's rows in flight or mined after the block the balance was read
      // at (that balance does not show them yet), in one read.
      const payerRows = await tx.all(
        `SELECT * FROM settlements WHERE chain_id = ? AND token = ? AND authorizer = ?
           AND (nonce = ? OR status IN ${IN_FLIGHT} OR (status = 'settled' AND block_number > ?))`,
        [...key, input.balanceBlock === undefined ? null : Number(input.balanceBlock)],
      );
      const existing = payerRows.find((row) => row.nonce === key[3]);
      if (existing && existing.status !== "failed") return { outcome: "exists", record: (await this.#record(tx, existing))! };
      if (input.balance !== undefined) {
        const counted = payerRows.filter((row) => row !== existing && (row.status === "claimed" || row.status === "sent" || row.status === "settled"));
        const inFlight = counted.reduce((sum, row) => sum + BigInt(row.value as string), 0n);
        if (inFlight + input.value > input.balance) return { outcome: "overBalance", inFlight };
      }
      const ownerExpiresAt = input.owner === null ? null : now + input.ownerTtlMs;
      const deadlineAt = now + input.deadlineMs;
      const nextCheckAt = ownerExpiresAt === null ? deadlineAt : Math.min(ownerExpiresAt, deadlineAt);
      const fields: SqlValue[] = [
        input.network,
        lower(input.payee),
        input.value.toString(),
        input.validBefore.toString(),
        input.owner,
        ownerExpiresAt,
        deadlineAt,
        input.call ? lower(input.call.to) : null,
        input.call?.data ?? null,
        input.call?.gas.toString() ?? null,
        nextCheckAt,
        now,
      ];
      let rows: SqlRow[];
      if (existing) {
        // A failed row claimed again (its authorization is still unused): its transactions stay as history.
        rows = await tx.all(
          `UPDATE settlements SET status = 'claimed', network = ?, payee = ?, value = ?, valid_before = ?, owner = ?,
             owner_expires_at = ?, deadline_at = ?, call_to = ?, call_data = ?, call_gas = ?, next_check_at = ?, updated_at = ?,
             tx_hash = NULL, relayer = NULL, relayer_nonce = NULL, block_number = NULL, block_timestamp = NULL, error = NULL,
             attempts = attempts + 1
           WHERE id = ? AND status = 'failed' RETURNING *`,
          [...fields, Number(existing.id)],
        );
      } else {
        rows = await tx.all(
          `INSERT INTO settlements (network, payee, value, valid_before, owner, owner_expires_at, deadline_at, call_to, call_data,
             call_gas, next_check_at, updated_at, created_at, status, chain_id, token, authorizer, nonce)
           VALUES (${placeholders(fields.length + 1)}, 'claimed', ?, ?, ?, ?)
           ON CONFLICT (chain_id, token, authorizer, nonce) DO NOTHING RETURNING *`,
          [...fields, now, ...key],
        );
      }
      const row = rows[0];
      if (!row) {
        const [current] = await tx.all(`SELECT * FROM settlements WHERE chain_id = ? AND token = ? AND authorizer = ? AND nonce = ?`, key);
        return { outcome: "exists", record: (await this.#record(tx, current))! };
      }
      if (input.owner === null && input.call) await tx.notify(`q:${row.id}`);
      // A new row has no transactions yet; a failed one claimed again keeps its history.
      return { outcome: "claimed", record: existing ? (await this.#record(tx, row))! : toSettlement(row, []) };
    });
  }

  takeQueued(input: { owner: string; chainIds: readonly number[]; limit: number; ownerTtlMs: number }): Promise<SettlementRecord[]> {
    if (input.chainIds.length === 0 || input.limit <= 0) return Promise.resolve([]);
    const now = this.#now();
    return this.#db.transaction(async (tx) => {
      const rows = await tx.all(
        `UPDATE settlements SET owner = ?, owner_expires_at = ?, next_check_at = ?, updated_at = ?
         WHERE id IN (
           SELECT id FROM settlements
           WHERE status = 'claimed' AND owner IS NULL AND call_to IS NOT NULL AND deadline_at > ?
             AND chain_id IN (${placeholders(input.chainIds.length)})
           ORDER BY created_at LIMIT ?${this.#db.skipLocked}
         ) RETURNING *`,
        [input.owner, now + input.ownerTtlMs, now + input.ownerTtlMs, now, now, ...input.chainIds, input.limit],
      );
      return this.#records(tx, rows.sort((a, b) => Number(a.id) - Number(b.id)));
    });
  }

  async recordBroadcast(input: RecordBroadcastInput): Promise<boolean> {
    const now = this.#now();
    // Only while `owner` owns the unfinished row and holds the relayer key's lease (the fence).
    const sent = `UPDATE settlements SET status = 'sent', tx_hash = ?, relayer = ?, relayer_nonce = ?, next_check_at = ?, updated_at = ?
       WHERE id = ? AND owner = ? AND status IN ${IN_FLIGHT} AND ${leaseFence(input.leaseEpoch, this.#db.forUpdate)}`;
    const sentParams = [
      lower(input.hash),
      lower(input.relayer),
      input.relayerNonce,
      now + input.checkAfterMs,
      now,
      input.id,
      input.owner,
      ...fenceParams(input.relayer, input.owner, now, input.leaseEpoch),
    ];
    const insert = INSERT_SIGNED;
    const insertParams = signedParams(input, now);
    // It runs inside each relayer key's send queue: one round trip where the dialect allows it.
    if (this.#db.writableCte) {
      const [row] = await this.#db.all(
        `WITH sent AS (${sent} RETURNING id, chain_id),
              recorded AS (${insert} sent ON CONFLICT (hash) DO NOTHING)
         SELECT COUNT(*) AS n FROM sent`,
        [...sentParams, ...insertParams],
      );
      return Number(row?.n ?? 0) > 0;
    }
    return this.#db.transaction(async (tx) => {
      if ((await tx.run(sent, sentParams)) === 0) return false;
      await tx.run(`${insert} settlements WHERE id = ? ON CONFLICT (hash) DO NOTHING`, [...insertParams, input.id]);
      return true;
    });
  }

  recordReplacement(input: RecordReplacementInput): Promise<boolean> {
    const now = this.#now();
    return this.#db.transaction(async (tx) => {
      const changed = await tx.run(
        `UPDATE settlements SET tx_hash = ?, updated_at = ?
         WHERE id = ? AND status = 'sent' AND relayer = ? AND relayer_nonce = ? AND ${leaseFence(input.leaseEpoch, this.#db.forUpdate)}`,
        [lower(input.hash), now, input.id, lower(input.relayer), input.relayerNonce, ...fenceParams(input.relayer, input.holder, now, input.leaseEpoch)],
      );
      if (changed === 0) return false;
      await tx.run(`${INSERT_SIGNED} settlements WHERE id = ? ON CONFLICT (hash) DO NOTHING`, [...signedParams(input, now), input.id]);
      return true;
    });
  }

  async recordFiller(input: RecordFillerInput): Promise<boolean> {
    const now = this.#now();
    // One statement: the record exists only if the fence held when it was written (the same hash again: recorded once).
    const rows = await this.#db.all(
      `INSERT INTO relayer_fillers (hash, chain_id, relayer, relayer_nonce, raw, holder, lease_epoch, replaces, state, fee_cap, priority_fee, created_at, updated_at)
       SELECT ?, ?, ?, ?, ?, ?, ?, ?, 'signed', ?, ?, ?, ? WHERE ${leaseFence(input.leaseEpoch, this.#db.forUpdate)}
       ON CONFLICT (hash) DO UPDATE SET updated_at = excluded.updated_at RETURNING hash`,
      [
        lower(input.hash),
        input.chainId,
        lower(input.relayer),
        input.relayerNonce,
        input.raw,
        input.holder,
        input.leaseEpoch,
        input.replaces ? lower(input.replaces) : null,
        input.feeCap?.toString() ?? null,
        input.priorityFee?.toString() ?? null,
        now,
        now,
        ...fenceParams(input.relayer, input.holder, now, input.leaseEpoch),
      ],
    );
    return rows.length > 0;
  }

  async markFillerRefused(hash: Hex): Promise<void> {
    await this.#db.run(`UPDATE relayer_fillers SET state = 'refused', updated_at = ? WHERE hash = ?`, [this.#now(), lower(hash)]);
  }

  async pendingFillers(input: { chainId: number; relayer: Address; fromNonce: number; limit: number }): Promise<FillerRecord[]> {
    const rows = await this.#db.all(
      `SELECT * FROM relayer_fillers WHERE chain_id = ? AND relayer = ? AND relayer_nonce >= ? AND state = 'signed'
       ORDER BY relayer_nonce, created_at, hash LIMIT ?`,
      [input.chainId, lower(input.relayer), input.fromNonce, input.limit],
    );
    return rows.map(toFiller);
  }

  async markTransaction(hash: Hex, state: TransactionState): Promise<void> {
    await this.#db.run(`UPDATE settlement_transactions SET state = ?, updated_at = ? WHERE hash = ?`, [state, this.#now(), lower(hash)]);
  }

  markSettled(id: number, input: { txHash: Hex; blockNumber: bigint; blockTimestamp: bigint }): Promise<SettlementRecord> {
    const now = this.#now();
    const hash = lower(input.txHash);
    return this.#db.transaction(async (tx) => {
      const [updated] = await tx.all(
        `UPDATE settlements SET status = 'settled', tx_hash = ?, block_number = ?, block_timestamp = ?, error = NULL,
           next_check_at = NULL, updated_at = ? WHERE id = ? AND status IN ${IN_FLIGHT} RETURNING *`,
        [hash, input.blockNumber.toString(), input.blockTimestamp.toString(), now, id],
      );
      if (!updated) {
        const row = await this.#lockedRow(tx, id);
        const status = row.status as SettlementStatus;
        if (status === "settled" && row.tx_hash === hash) return (await this.#record(tx, row))!;
        throw new IllegalTransitionError(status, "settled", id);
      }
      await tx.run(`UPDATE settlement_transactions SET state = 'mined', updated_at = ? WHERE hash = ? AND settlement_id = ?`, [now, hash, id]);
      // Its other versions at the same nonce (replacements, or the one it replaced) can never be mined now.
      await tx.run(
        `UPDATE settlement_transactions SET state = 'replaced', updated_at = ?
         WHERE settlement_id = ? AND hash <> ? AND state IN ('signed', 'accepted')
           AND (relayer, relayer_nonce) IN (SELECT relayer, relayer_nonce FROM settlement_transactions WHERE hash = ? AND settlement_id = ?)`,
        [now, id, hash, hash, id],
      );
      await tx.notify(`o:${id}`);
      return (await this.#record(tx, updated))!;
    });
  }

  markFailed(id: number, input: { error: string; owner?: string | null; txHash?: Hex }): Promise<SettlementRecord | undefined> {
    const now = this.#now();
    return this.#db.transaction(async (tx) => {
      const row = await this.#lockedRow(tx, id);
      const status = row.status as SettlementStatus;
      if (status === "failed") return this.#record(tx, row);
      if (status === "settled") throw new IllegalTransitionError(status, "failed", id);
      if (input.owner !== undefined && (row.owner ?? null) !== input.owner) return undefined;
      const [updated] = await tx.all(
        `UPDATE settlements SET status = 'failed', error = ?, tx_hash = COALESCE(?, tx_hash), next_check_at = NULL, updated_at = ? WHERE id = ? RETURNING *`,
        [input.error, input.txHash ? lower(input.txHash) : null, now, id],
      );
      await tx.notify(`o:${id}`);
      return this.#record(tx, updated);
    });
  }

  withdraw(id: number, input: { error: string; owner: string | null }): Promise<SettlementRecord | undefined> {
    const now = this.#now();
    return this.#db.transaction(async (tx) => {
      const [row] = await tx.all(
        `UPDATE settlements SET status = 'failed', error = ?, next_check_at = NULL, updated_at = ?
         WHERE id = ? AND status = 'claimed' AND owner IS NOT DISTINCT FROM ? RETURNING *`,
        [input.error, now, id, input.owner],
      );
      if (!row) return undefined;
      await tx.notify(`o:${id}`);
      return this.#record(tx, row);
    });
  }

  withdrawOwned(input: { owner: string; error: string; keep: readonly number[] }): Promise<number[]> {
    const now = this.#now();
    const keep = input.keep.length > 0 ? ` AND id NOT IN (${input.keep.map(() => "?").join(", ")})` : "";
    return this.#db.transaction(async (tx) => {
      const rows = await tx.all(
        `UPDATE settlements SET status = 'failed', error = ?, next_check_at = NULL, updated_at = ?
         WHERE status = 'claimed' AND owner = ?${keep} RETURNING id`,
        [input.error, now, input.owner, ...input.keep],
      );
      const ids = rows.map((row) => Number(row.id));
      for (const id of ids) await tx.notify(`o:${id}`);
      return ids;
    });
  }

  requeue(id: number, owner: string, call?: SettlementCall): Promise<boolean> {
    const now = this.#now();
    return this.#db.transaction(async (tx) => {
      const changed = await tx.run(
        `UPDATE settlements SET owner = NULL, owner_expires_at = NULL, next_check_at = deadline_at, updated_at = ?,
           call_to = COALESCE(?, call_to), call_data = COALESCE(?, call_data), call_gas = COALESCE(?, call_gas)
         WHERE id = ? AND owner = ? AND status = 'claimed'`,
        [now, call ? lower(call.to) : null, call?.data ?? null, call?.gas.toString() ?? null, id, owner],
      );
      if (changed > 0) await tx.notify(`q:${id}`);
      return changed > 0;
    });
  }

  async get(key: SettlementKey): Promise<SettlementRecord | undefined> {
    const [row] = await this.#db.all(`SELECT * FROM settlements WHERE chain_id = ? AND token = ? AND authorizer = ? AND nonce = ?`, keyParams(key));
    return this.#record(this.#db, row);
  }

  async getById(id: number): Promise<SettlementRecord | undefined> {
    const [row] = await this.#db.all(`SELECT * FROM settlements WHERE id = ?`, [id]);
    return this.#record(this.#db, row);
  }

  async findByTxHash(hash: Hex): Promise<SettlementRecord | undefined> {
    const h = lower(hash);
    const [row] = await this.#db.all(FIND_BY_TX_HASH, [h, h]);
    return this.#record(this.#db, row);
  }

  async findByAuthorization(chainId: number, authorizer: Address, nonce: Hex): Promise<SettlementRecord[]> {
    const rows = await this.#db.all(`SELECT * FROM settlements WHERE chain_id = ? AND authorizer = ? AND nonce = ? ORDER BY id`, [
      chainId,
      lower(authorizer),
      lower(nonce),
    ]);
    return this.#records(this.#db, rows);
  }

  async listPending(options: { chainIds?: readonly number[]; limit?: number } = {}): Promise<SettlementRecord[]> {
    const chains = options.chainIds;
    const rows = await this.#db.all(
      `SELECT * FROM settlements WHERE status IN ${IN_FLIGHT}${chains ? ` AND chain_id IN (${placeholders(chains.length)})` : ""}
       ORDER BY created_at, id LIMIT ?`,
      [...(chains ?? []), options.limit ?? 1_000],
    );
    return this.#records(this.#db, rows);
  }

  async pendingSummary(): Promise<PendingSummary> {
    const [row] = await this.#db.all(`SELECT COUNT(*) AS count, MIN(created_at) AS oldest FROM settlements WHERE status IN ${IN_FLIGHT}`);
    const oldest = num(row?.oldest);
    return { count: Number(row?.count ?? 0), ...(oldest !== undefined ? { oldestCreatedAt: oldest } : {}) };
  }

  takeDue(input: { chainIds: readonly number[]; limit: number; recheckMs: number }): Promise<SettlementRecord[]> {
    if (input.chainIds.length === 0 || input.limit <= 0) return Promise.resolve([]);
    const now = this.#now();
    return this.#db.transaction(async (tx) => {
      const rows = await tx.all(
        `UPDATE settlements SET next_check_at = ?
         WHERE id IN (
           SELECT id FROM settlements
           WHERE status IN ${IN_FLIGHT} AND next_check_at <= ? AND chain_id IN (${placeholders(input.chainIds.length)})
           ORDER BY next_check_at LIMIT ?${this.#db.skipLocked}
         ) RETURNING *`,
        [now + input.recheckMs, now, ...input.chainIds, input.limit],
      );
      return this.#records(tx, rows.sort((a, b) => Number(a.id) - Number(b.id)));
    });
  }

  async deferCheck(id: number, untilMs: number): Promise<void> {
    await this.#db.run(`UPDATE settlements SET next_check_at = ? WHERE id = ? AND status IN ${IN_FLIGHT}`, [untilMs, id]);
  }

  async waitForOutcome(id: number, timeoutMs: number, signal?: AbortSignal): Promise<SettlementRecord | undefined> {
    const messages = this.#db.messages;
    const event = `o:${id}`;
    let wake: () => void = () => {};
    const listener = () => wake();
    messages.on(event, listener);
    const deadline = performance.now() + timeoutMs;
    try {
      for (;;) {
        const record = await this.getById(id);
        const left = deadline - performance.now();
        if (!record || FINAL.has(record.status) || left <= 0 || signal?.aborted) return record;
        // Sleep until a notification, the next poll, the deadline or an abort, whichever comes first.
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, Math.min(this.#pollMs, left));
          function done() {
            clearTimeout(timer);
            signal?.removeEventListener("abort", done);
            resolve();
          }
          wake = done;
          signal?.addEventListener("abort", done, { once: true });
        });
      }
    } finally {
      messages.off(event, listener);
    }
  }

  onQueued(listener: () => void): () => void {
    const handler = (message: string) => {
      if (message.startsWith("q:")) listener();
    };
    this.#db.messages.on("message", handler);
    return () => this.#db.messages.off("message", handler);
  }

  async acquireLease(address: Address, holder: string, ttlMs: number): Promise<Lease | undefined> {
    const now = this.#now();
    const [row] = await this.#db.all(
      `INSERT INTO relayer_leases (address, holder, epoch, acquired_at, expires_at) VALUES (?, ?, 1, ?, ?)
       ON CONFLICT (address) DO UPDATE SET
         holder = excluded.holder,
         epoch = CASE WHEN relayer_leases.holder = excluded.holder THEN relayer_leases.epoch ELSE relayer_leases.epoch + 1 END,
         acquired_at = CASE WHEN relayer_leases.holder = excluded.holder THEN relayer_leases.acquired_at ELSE excluded.acquired_at END,
         expires_at = excluded.expires_at
       WHERE relayer_leases.holder = excluded.holder OR relayer_leases.expires_at <= ?
       RETURNING *`,
      [lower(address), holder, now, now + ttlMs, now],
    );
    return row ? toLease(row) : undefined;
  }

  async renewLeases(holder: string, ttlMs: number): Promise<Lease[]> {
    const rows = await this.#db.all(`UPDATE relayer_leases SET expires_at = ? WHERE holder = ? AND expires_at > 0 RETURNING *`, [
      this.#now() + ttlMs,
      holder,
    ]);
    return rows.map(toLease).sort((a, b) => a.address.localeCompare(b.address));
  }

  async releaseLease(address: Address, holder: string): Promise<void> {
    await this.#db.run(`UPDATE relayer_leases SET expires_at = 0 WHERE address = ? AND holder = ?`, [lower(address), holder]);
  }

  async leases(): Promise<Lease[]> {
    return (await this.#db.all(`SELECT * FROM relayer_leases ORDER BY address`)).map(toLease);
  }

  async heartbeat(id: string, ttlMs: number, info: Record<string, unknown> = {}): Promise<void> {
    const now = this.#now();
    await this.#db.run(
      `INSERT INTO ledger_instances (id, info, started_at, heartbeat_at, expires_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET info = excluded.info, heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at`,
      [id, JSON.stringify(info), now, now, now + ttlMs],
    );
  }

  async instances(): Promise<InstanceRecord[]> {
    const rows = await this.#db.all(`SELECT * FROM ledger_instances WHERE expires_at > ? ORDER BY started_at, id`, [this.#now()]);
    return rows.map((row) => ({
      id: String(row.id),
      info: JSON.parse(String(row.info)) as Record<string, unknown>,
      startedAt: Number(row.started_at),
      heartbeatAt: Number(row.heartbeat_at),
      expiresAt: Number(row.expires_at),
    }));
  }

  async removeInstance(id: string): Promise<void> {
    await this.#db.run(`DELETE FROM ledger_instances WHERE id = ?`, [id]);
  }

  async penalize(penalty: Penalty): Promise<void> {
    await this.#db.run(
      `INSERT INTO revert_penalties (chain_id, token, kind, subject, until_at, tx_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (chain_id, token, kind, subject) DO UPDATE SET
         tx_hash = CASE WHEN excluded.until_at > revert_penalties.until_at THEN excluded.tx_hash ELSE revert_penalties.tx_hash END,
         until_at = CASE WHEN excluded.until_at > revert_penalties.until_at THEN excluded.until_at ELSE revert_penalties.until_at END`,
      [
        penalty.chainId,
        lower(penalty.token),
        penalty.kind,
        lower(penalty.subject),
        Number(penalty.until),
        penalty.txHash ? lower(penalty.txHash) : null,
        this.#now(),
      ],
    );
  }

  async activePenalty(scope: TokenScope, subjects: readonly PenaltySubject[], now: bigint): Promise<Penalty | undefined> {
    if (subjects.length === 0) return undefined;
    const [row] = await this.#db.all(
      `SELECT * FROM revert_penalties WHERE chain_id = ? AND token = ? AND until_at > ?
         AND (${subjects.map(() => "(kind = ? AND subject = ?)").join(" OR ")})
       ORDER BY until_at DESC LIMIT 1`,
      [scope.chainId, lower(scope.token), Number(now), ...subjects.flatMap((s) => [s.kind, lower(s.subject)])],
    );
    return row ? toPenalty(row) : undefined;
  }

  async bindPaymentIdentifier(scope: TokenScope, payer: Address, id: string, payment: BoundPayment): Promise<BoundPayment> {
    const [row] = await this.#db.all(
      `INSERT INTO payment_identifiers (chain_id, token, payer, id, nonce, digest, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (chain_id, token, payer, id) DO UPDATE SET nonce = payment_identifiers.nonce
       RETURNING nonce, digest`,
      [scope.chainId, lower(scope.token), lower(payer), id, lower(payment.nonce), payment.digest ? lower(payment.digest) : null, this.#now()],
    );
    return toBoundPayment(row!);
  }

  async paymentIdentifierBinding(scope: TokenScope, payer: Address, id: string): Promise<BoundPayment | undefined> {
    const [row] = await this.#db.all(`SELECT nonce, digest FROM payment_identifiers WHERE chain_id = ? AND token = ? AND payer = ? AND id = ?`, [
      scope.chainId,
      lower(scope.token),
      lower(payer),
      id,
    ]);
    return row ? toBoundPayment(row) : undefined;
  }

  async nonceIndexProgress(scope: TokenScope): Promise<NonceIndexProgress | undefined> {
    const [row] = await this.#db.all(`SELECT from_block, through_block FROM nonce_index_progress WHERE chain_id = ? AND token = ?`, [
      scope.chainId,
      lower(scope.token),
    ]);
    return row ? toProgress(row) : undefined;
  }

  async openNonceIndex(scope: TokenScope, fromBlock: bigint): Promise<NonceIndexProgress> {
    // One statement, so that instances opening it at once agree; an earlier start starts the covered range over.
    const earlier = `excluded.from_block < nonce_index_progress.from_block`;
    const [row] = await this.#db.all(
      `INSERT INTO nonce_index_progress (chain_id, token, from_block, through_block, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (chain_id, token) DO UPDATE SET
         through_block = CASE WHEN ${earlier} THEN excluded.through_block ELSE nonce_index_progress.through_block END,
         updated_at = CASE WHEN ${earlier} THEN excluded.updated_at ELSE nonce_index_progress.updated_at END,
         from_block = CASE WHEN ${earlier} THEN excluded.from_block ELSE nonce_index_progress.from_block END
       RETURNING from_block, through_block`,
      [scope.chainId, lower(scope.token), Number(fromBlock), Number(fromBlock - 1n), this.#now()],
    );
    return toProgress(row!);
  }

  recordIndexedNonces(scope: TokenScope, nonces: readonly IndexedNonce[], range: NonceRange): Promise<NonceIndexProgress> {
    const token = lower(scope.token);
    // A nonce given twice (in another case, or from log ranges that overlap) is one row: the first one given.
    const rows = new Map<string, SqlValue[]>();
    for (const indexed of nonces) {
      const authorizer = lower(indexed.authorizer);
      const nonce = lower(indexed.nonce);
      const key = `${authorizer}:${nonce}`;
      if (!rows.has(key)) rows.set(key, [scope.chainId, token, authorizer, nonce, Number(indexed.blockNumber)]);
    }
    const now = this.#now();
    return this.#db.transaction(async (tx) => {
      // The progress row first: its lock (PostgreSQL) makes one token's recorders take turns, so that their inserts
      // of the same nonces in other orders cannot deadlock.
      const [row] = await tx.all(
        // Raised only over a range that joins the stored one: no block between is left unread.
        `UPDATE nonce_index_progress SET through_block = CASE WHEN through_block < ? AND through_block >= ? THEN ? ELSE through_block END, updated_at = ?
         WHERE chain_id = ? AND token = ? RETURNING from_block, through_block`,
        [Number(range.throughBlock), Number(range.fromBlock) - 1, Number(range.throughBlock), now, scope.chainId, token],
      );
      if (!row) throw new LedgerError("not_found", `the nonce index of token ${scope.token} on chain ${scope.chainId} was never opened`);
      for (const chunk of nonceChunks([...rows.values()])) {
        await tx.run(
          `INSERT INTO indexed_nonces (chain_id, token, authorizer, nonce, block_number) VALUES ${chunk.map(() => "(?, ?, ?, ?, ?)").join(", ")}
           ON CONFLICT (chain_id, token, authorizer, nonce) DO NOTHING`,
          chunk.flat(),
        );
      }
      const progress = toProgress(row);
      if (range.throughHash && progress.throughBlock === range.throughBlock) await this.#checkpoint(tx, scope.chainId, { number: range.throughBlock, hash: range.throughHash });
      return progress;
    });
  }

  async indexedNonces(scope: TokenScope, options: { after?: { authorizer: Address; nonce: Hex }; limit: number }): Promise<IndexedNonce[]> {
    if (options.limit <= 0) return [];
    const { after } = options;
    const rows = await this.#db.all(
      `SELECT authorizer, nonce, block_number FROM indexed_nonces
       WHERE chain_id = ? AND token = ?${after ? ` AND (authorizer, nonce) > (?, ?)` : ""}
       ORDER BY authorizer, nonce LIMIT ?`,
      [scope.chainId, lower(scope.token), ...(after ? [lower(after.authorizer), lower(after.nonce)] : []), options.limit],
    );
    // Rows come by authorizer: each is checksummed once, and a page of thousands of payers does not crowd the shared cache out.
    let last: { stored: string; address: Address } | undefined;
    return rows.map((row) => {
      const stored = row.authorizer as string;
      if (last?.stored !== stored) last = { stored, address: getAddress(stored) };
      return { authorizer: last.address, nonce: row.nonce as Hex, blockNumber: BigInt(row.block_number as string) };
    });
  }

  async indexedNonce(scope: TokenScope, authorizer: Address, nonce: Hex): Promise<IndexedNonce | undefined> {
    const [row] = await this.#db.all(`SELECT block_number FROM indexed_nonces WHERE chain_id = ? AND token = ? AND authorizer = ? AND nonce = ?`, [
      scope.chainId,
      lower(scope.token),
      lower(authorizer),
      lower(nonce),
    ]);
    return row ? { authorizer: checksum(lower(authorizer)), nonce: lower(nonce) as Hex, blockNumber: BigInt(row.block_number as string) } : undefined;
  }

  async chainHistory(chainId: number): Promise<ChainHistoryRecord | undefined> {
    const [row] = await this.#db.all(`SELECT genesis_hash, epoch FROM chain_histories WHERE chain_id = ?`, [chainId]);
    if (!row) return undefined;
    const checkpoints = await this.#db.all(
      `SELECT block_number, block_hash, recorded_at FROM chain_checkpoints WHERE chain_id = ? ORDER BY block_number DESC LIMIT ?`,
      [chainId, CHECKPOINT_LIMIT],
    );
    return {
      chainId,
      genesisHash: row.genesis_hash as Hex,
      epoch: Number(row.epoch),
      checkpoints: checkpoints.map((c) => ({ number: BigInt(c.block_number as string), hash: c.block_hash as Hex, recordedAt: Number(c.recorded_at) })),
    };
  }

  async recordCheckpoint(chainId: number, block: BlockRef): Promise<void> {
    await this.#checkpoint(this.#db, chainId, block);
  }

  /** Records `block` as a checkpoint (a later hash at the same height replaces the earlier) and keeps the newest {@link CHECKPOINT_LIMIT}. */
  async #checkpoint(executor: SqlExecutor, chainId: number, block: BlockRef): Promise<void> {
    await executor.run(
      `INSERT INTO chain_checkpoints (chain_id, block_number, block_hash, recorded_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (chain_id, block_number) DO UPDATE SET block_hash = excluded.block_hash, recorded_at = excluded.recorded_at`,
      [chainId, Number(block.number), lower(block.hash), this.#now()],
    );
    await executor.run(
      `DELETE FROM chain_checkpoints WHERE chain_id = ? AND block_number < (
         SELECT MIN(block_number) FROM (SELECT block_number FROM chain_checkpoints WHERE chain_id = ? ORDER BY block_number DESC LIMIT ?) newest)`,
      [chainId, chainId, CHECKPOINT_LIMIT],
    );
  }

  async settledAfter(chainId: number, options: { afterBlock?: bigint; limit: number }): Promise<SettlementRecord[]> {
    const after = options.afterBlock;
    const rows = await this.#db.all(
      `SELECT * FROM settlements WHERE chain_id = ? AND status = 'settled'${after !== undefined ? " AND block_number > ?" : ""}
       ORDER BY block_number DESC, id DESC LIMIT ?`,
      [chainId, ...(after !== undefined ? [Number(after)] : []), options.limit],
    );
    return this.#records(this.#db, rows);
  }

  adoptChainHistory(change: HistoryChange): Promise<HistoryAdoption> {
    const { chainId, common } = change;
    const now = this.#now();
    // One change at a time, across instances (the second sees the epoch moved and decides again), under the catalog's
    // lock too: the catalog's counts stay exact while its entries of the chain are set aside.
    return this.#db.transaction({ lock: CATALOG_LOCK }, async (tx) => {
      const [current] = await tx.all(`SELECT genesis_hash, epoch FROM chain_histories WHERE chain_id = ?${this.#db.forUpdate}`, [chainId]);
      if ((current ? Number(current.epoch) : undefined) !== change.epoch) return { adopted: false };
      const everything = common === undefined;
      const epoch = current ? Number(current.epoch) + (everything ? 1 : 0) : 1;
      await tx.run(
        `INSERT INTO chain_histories (chain_id, genesis_hash, epoch, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (chain_id) DO UPDATE SET genesis_hash = excluded.genesis_hash, epoch = excluded.epoch, updated_at = excluded.updated_at`,
        [chainId, lower(change.genesisHash), epoch, now],
      );
      const aside = async (kind: SetAsideRow["kind"], rows: readonly SqlRow[]) => {
        for (let at = 0; at < rows.length; at += 100) {
          const chunk = rows.slice(at, at + 100);
          await tx.run(
            `INSERT INTO set_aside_rows (chain_id, genesis_hash, kind, row_data, reason, set_aside_at) VALUES ${chunk.map(() => "(?, ?, ?, ?, ?, ?)").join(", ")}`,
            chunk.flatMap((row) => [chainId, (current?.genesis_hash as string | undefined) ?? null, kind, JSON.stringify(row), change.reason, now]),
          );
        }
      };
      const keep = new Set(change.keep ?? []);
      const settled = everything
        ? await tx.all(`SELECT * FROM settlements WHERE chain_id = ?`, [chainId])
        : await tx.all(`SELECT * FROM settlements WHERE chain_id = ? AND status = 'settled' AND block_number > ?`, [chainId, Number(common.number)]);
      const gone = settled.filter((row) => !keep.has(Number(row.id)));
      for (let at = 0; at < gone.length; at += 500) {
        const ids = gone.slice(at, at + 500).map((row) => Number(row.id));
        const transactions = await tx.all(`SELECT * FROM settlement_transactions WHERE settlement_id IN (${placeholders(ids.length)}) ORDER BY id`, ids);
        await aside("settlement_transaction", transactions);
        await aside("settlement", gone.slice(at, at + 500));
        await tx.run(`DELETE FROM settlement_transactions WHERE settlement_id IN (${placeholders(ids.length)})`, ids);
        await tx.run(`DELETE FROM settlements WHERE id IN (${placeholders(ids.length)})`, ids);
      }
      // Rows without a block: all of them, or those written since the histories parted (the ledger's clock), and
      // catalog entries paid in a block at or after the common one's time (the chain's clock).
      const since = everything ? undefined : change.since;
      let penalties = 0;
      let paymentIdentifiers = 0;
      let catalogEntries = 0;
      if (everything || change.commonTime !== undefined) {
        const entries = await this.#catalog.takeNetwork(tx, `eip155:${chainId}`, everything ? undefined : change.commonTime);
        await aside("catalog_entry", entries);
        catalogEntries = entries.length;
      }
      if (everything || since !== undefined) {
        const written = since === undefined ? "" : " AND created_at > ?";
        const params = [chainId, ...(since === undefined ? [] : [since])];
        for (const [kind, table] of [
          ["penalty", "revert_penalties"],
          ["payment_identifier", "payment_identifiers"],
        ] as const) {
          const rows = await tx.all(`SELECT * FROM ${table} WHERE chain_id = ?${written}`, params);
          await aside(kind, rows);
          await tx.run(`DELETE FROM ${table} WHERE chain_id = ?${written}`, params);
          if (kind === "penalty") penalties = rows.length;
          else paymentIdentifiers = rows.length;
        }
      }
      // The index's nonces are the chain's own logs, read again: deleted, not kept.
      let indexedNonces: number;
      if (everything) {
        indexedNonces = await tx.run(`DELETE FROM indexed_nonces WHERE chain_id = ?`, [chainId]);
        await tx.run(`DELETE FROM nonce_index_progress WHERE chain_id = ?`, [chainId]);
        await tx.run(`DELETE FROM chain_checkpoints WHERE chain_id = ?`, [chainId]);
      } else {
        const through = Number(common.number);
        indexedNonces = await tx.run(`DELETE FROM indexed_nonces WHERE chain_id = ? AND block_number > ?`, [chainId, through]);
        await tx.run(
          `UPDATE nonce_index_progress SET through_block = CASE WHEN from_block - 1 > ? THEN from_block - 1 ELSE ? END, updated_at = ?
           WHERE chain_id = ? AND through_block > ?`,
          [through, through, now, chainId, through],
        );
        await tx.run(`DELETE FROM chain_checkpoints WHERE chain_id = ? AND block_number > ?`, [chainId, through]);
        await this.#checkpoint(tx, chainId, common);
      }
      return { adopted: true, epoch, settlements: gone.length, penalties, paymentIdentifiers, catalogEntries, indexedNonces };
    });
  }

  async setAsideRows(options: { chainId?: number; limit?: number } = {}): Promise<SetAsideRow[]> {
    const { chainId } = options;
    const rows = await this.#db.all(
      `SELECT * FROM set_aside_rows${chainId === undefined ? "" : " WHERE chain_id = ?"} ORDER BY id DESC LIMIT ?`,
      [...(chainId === undefined ? [] : [chainId]), options.limit ?? 100],
    );
    return rows.map((row) => ({
      chainId: Number(row.chain_id),
      ...(row.genesis_hash != null ? { genesisHash: row.genesis_hash as Hex } : {}),
      kind: row.kind as SetAsideRow["kind"],
      row: JSON.parse(String(row.row_data)) as Record<string, unknown>,
      reason: String(row.reason),
      setAsideAt: Number(row.set_aside_at),
    }));
  }

  recordDiscoveryPayment(payment: DiscoveryPayment, bounds: DiscoveryBounds): Promise<DiscoveryRecorded> {
    return this.#catalog.record(payment, bounds);
  }

  listDiscoveryResources(request: DiscoveryPageRequest): Promise<DiscoveryPage> {
    return this.#catalog.list(request);
  }

  searchDiscoveryResources(request: DiscoveryPageRequest & { words: readonly string[] }): Promise<DiscoverySearchPage> {
    return this.#catalog.search(request);
  }

  removeDiscoveryResource(resource: string, method?: string, payTo?: string): Promise<number> {
    return this.#catalog.remove(resource, method, payTo);
  }

  deleteFinishedSettlements(before: number, limit: number): Promise<number> {
    if (limit <= 0) return Promise.resolve(0);
    return this.#db.transaction(async (tx) => {
      // The partial index of finished rows by age: the oldest first, never a row in flight.
      const rows = await tx.all(`SELECT id FROM settlements WHERE status IN ('settled', 'failed') AND updated_at < ? ORDER BY updated_at, id LIMIT ?`, [before, limit]);
      if (rows.length === 0) return 0;
      const ids = rows.map((row) => Number(row.id));
      await tx.run(`DELETE FROM settlement_transactions WHERE settlement_id IN (${placeholders(ids.length)})`, ids);
      return tx.run(`DELETE FROM settlements WHERE id IN (${placeholders(ids.length)}) AND status IN ('settled', 'failed')`, ids);
    });
  }

  async hit(key: string, windowMs: number): Promise<CounterHit> {
    const now = this.#now();
    const [row] = await this.#db.all(
      `INSERT INTO rate_limit_counters (key, hits, reset_at) VALUES (?, 1, ?)
       ON CONFLICT (key) DO UPDATE SET
         hits = CASE WHEN rate_limit_counters.reset_at <= ? THEN 1 ELSE rate_limit_counters.hits + 1 END,
         reset_at = CASE WHEN rate_limit_counters.reset_at <= ? THEN excluded.reset_at ELSE rate_limit_counters.reset_at END
       RETURNING hits, reset_at`,
      [key, now + windowMs, now, now],
    );
    return { hits: Number(row!.hits), resetAt: Number(row!.reset_at) };
  }

  async unhit(key: string): Promise<void> {
    await this.#db.run(`UPDATE rate_limit_counters SET hits = hits - 1 WHERE key = ? AND hits > 0`, [key]);
  }

  async resetHits(key: string): Promise<void> {
    await this.#db.run(`DELETE FROM rate_limit_counters WHERE key = ?`, [key]);
  }

  async prune(): Promise<void> {
    const now = this.#now();
    await this.#db.run(`DELETE FROM rate_limit_counters WHERE reset_at <= ?`, [now]);
    await this.#db.run(`DELETE FROM ledger_instances WHERE expires_at <= ?`, [now]);
    await this.#db.run(`DELETE FROM revert_penalties WHERE until_at <= ?`, [Math.floor(now / 1000) - 86_400]);
    // A filler's nonce is mined within minutes; a week-old record is history no holder will follow.
    await this.#db.run(`DELETE FROM relayer_fillers WHERE created_at <= ?`, [now - FILLER_RECORD_MS]);
  }

  health(): Promise<LedgerHealth> {
    return this.#db.health();
  }

  close(): Promise<void> {
    return this.#db.close();
  }
}

/** Lets a driver deliver `o:<id>` and `q:<id>` messages: each as its own event and as `message`. */
export function deliver(messages: EventEmitter, message: string): void {
  messages.emit(message, message);
  messages.emit("message", message);
}
