import type { Hex } from "viem";
import { isSettlementFailureCode, type SettlementFailureCode } from "../../protocol/reasons.js";
import type { BroadcastRecord, SettlementKey, SettlementRecord, SettlementStatus, TransactionState } from "../types.js";
import { big, checksum, lower, num, placeholders, type Int8 } from "./columns.js";
import type { SqlExecutor, SqlValue } from "./driver.js";

/** The statuses of a settlement in flight, as an SQL list. */
export const IN_FLIGHT = "('claimed', 'sent')";

/** A settlement key as the columns hold it: chain_id, token, authorizer, nonce. */
export function keyParams(key: SettlementKey): SqlValue[] {
  return [key.chainId, lower(key.token), lower(key.authorizer), lower(key.nonce)];
}

/** A row of `settlements` (migrations 0001, 0012), as `SELECT *` gives it. */
export interface SettlementRow {
  id: Int8;
  chain_id: number;
  token: string;
  authorizer: string;
  nonce: Hex;
  network: string;
  payee: string;
  /** Token amounts are decimal text. */
  value: string;
  valid_before: string;
  status: SettlementStatus;
  owner: string | null;
  owner_expires_at: Int8 | null;
  deadline_at: Int8 | null;
  /** The call's three columns are set (and cleared) together. */
  call_to: string | null;
  call_data: Hex | null;
  call_gas: string | null;
  tx_hash: Hex | null;
  relayer: string | null;
  relayer_nonce: Int8 | null;
  block_number: Int8 | null;
  block_timestamp: Int8 | null;
  /** The text versions before migration 0012 recorded, where it names no code (the kit never wrote one); else null. */
  error: string | null;
  attempts: number;
  next_check_at: Int8 | null;
  created_at: Int8;
  updated_at: Int8;
  /** Why the row failed (migration 0012). */
  error_code: string | null;
}

/** A row of `settlement_transactions` (migrations 0001, 0002), as `SELECT *` gives it. */
export interface TransactionRow {
  id: Int8;
  hash: Hex;
  settlement_id: Int8;
  chain_id: number;
  relayer: string;
  relayer_nonce: Int8;
  raw: Hex;
  state: TransactionState;
  fee_cap: string | null;
  priority_fee: string | null;
  created_at: Int8;
  updated_at: Int8;
}

/** A transaction row as the ledger gives it. */
export function toTransaction(row: TransactionRow): BroadcastRecord {
  return {
    hash: row.hash,
    relayer: checksum(row.relayer),
    relayerNonce: Number(row.relayer_nonce),
    raw: row.raw,
    state: row.state,
    ...(row.fee_cap != null ? { feeCap: BigInt(row.fee_cap) } : {}),
    ...(row.priority_fee != null ? { priorityFee: BigInt(row.priority_fee) } : {}),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

/** A settlement row, with its transactions, as the ledger gives it. */
export function toSettlement(row: SettlementRow, transactions: BroadcastRecord[]): SettlementRecord {
  const defined = <T extends object>(value: T) => Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
  return {
    id: Number(row.id),
    key: {
      chainId: row.chain_id,
      token: checksum(row.token),
      authorizer: checksum(row.authorizer),
      nonce: row.nonce,
    },
    network: row.network,
    payee: checksum(row.payee),
    value: BigInt(row.value),
    validBefore: BigInt(row.valid_before),
    status: row.status,
    attempts: row.attempts,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    transactions,
    ...defined({
      owner: row.owner ?? undefined,
      ownerExpiresAt: num(row.owner_expires_at),
      deadlineAt: num(row.deadline_at),
      call: row.call_to != null ? { to: checksum(row.call_to), data: row.call_data!, gas: BigInt(row.call_gas!) } : undefined,
      txHash: row.tx_hash ?? undefined,
      relayer: row.relayer != null ? checksum(row.relayer) : undefined,
      relayerNonce: num(row.relayer_nonce),
      blockNumber: big(row.block_number),
      blockTimestamp: big(row.block_timestamp),
      errorCode: failureCodeOf(row.error_code),
    }),
  };
}

/** A stored failure code; one this version does not know (written by hand) reads as the generic on-chain failure. */
function failureCodeOf(stored: string | null): SettlementFailureCode | undefined {
  if (stored === null) return undefined;
  return isSettlementFailureCode(stored) ? stored : "failedOnChain";
}

/** The settlements of `rows` with their transactions, oldest first (one read for all of them). */
export async function loadRecords(executor: SqlExecutor, rows: readonly SettlementRow[]): Promise<SettlementRecord[]> {
  if (rows.length === 0) return [];
  const ids = rows.map((row) => Number(row.id));
  const transactions = await executor.all<TransactionRow>(
    `SELECT * FROM settlement_transactions WHERE settlement_id IN (${placeholders(ids.length)}) ORDER BY id`,
    ids,
  );
  const byId = new Map<number, BroadcastRecord[]>(ids.map((id) => [id, []]));
  for (const tx of transactions) byId.get(Number(tx.settlement_id))?.push(toTransaction(tx));
  return rows.map((row) => toSettlement(row, byId.get(Number(row.id)) ?? []));
}

/** The settlement of `row` with its transactions (undefined without a row). */
export async function loadRecord(executor: SqlExecutor, row: SettlementRow | undefined): Promise<SettlementRecord | undefined> {
  return row ? (await loadRecords(executor, [row]))[0] : undefined;
}
