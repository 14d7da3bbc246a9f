import type { Hex } from "viem";
import type { BroadcastRecord, SettlementKey, SettlementRecord, SettlementStatus, TransactionState } from "../types.js";
import { big, checksum, lower, num, placeholders, str } from "./columns.js";
import type { SqlExecutor, SqlRow, SqlValue } from "./driver.js";

/** The statuses of a settlement in flight, as an SQL list. */
export const IN_FLIGHT = "('claimed', 'sent')";

export function keyParams(key: SettlementKey): SqlValue[] {
  return [key.chainId, lower(key.token), lower(key.authorizer), lower(key.nonce)];
}

export function toTransaction(row: SqlRow): BroadcastRecord {
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

export function toSettlement(row: SqlRow, transactions: BroadcastRecord[]): SettlementRecord {
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

/** The settlements of `rows` with their transactions, oldest first (one read for all of them). */
export async function loadRecords(executor: SqlExecutor, rows: SqlRow[]): Promise<SettlementRecord[]> {
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

/** The settlement of `row` with its transactions (undefined without a row). */
export async function loadRecord(executor: SqlExecutor, row: SqlRow | undefined): Promise<SettlementRecord | undefined> {
  return row ? (await loadRecords(executor, [row]))[0] : undefined;
}
