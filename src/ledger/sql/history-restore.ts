import type { Hex } from "viem";
import type { HistoryRestoration, PendingHistoryChange, SetAsideRow } from "../types.js";
import type { SqlCatalogStore } from "./catalog.js";
import { restoreEntry, type SetAsideEntry } from "./catalog-restore.js";
import { pruneCheckpoints, type ChainHistoryRow, type CheckpointRow, type ProgressRow } from "./checkpoints.js";
import { placeholders, type Int8 } from "./columns.js";
import type { SqlExecutor, SqlValue } from "./driver.js";
import { toSettlement, type SettlementRow } from "./settlement-rows.js";

// A change of a chain's history undone (migration 0013): the chain holds the history it set aside after all.

/** A row of `history_changes` (migration 0013): `trail`, `disproven` and `progress` are JSON. */
interface ChangeRow {
  id: Int8;
  chain_id: number;
  genesis_hash: Hex | null;
  everything: number;
  common_number: Int8 | null;
  common_hash: Hex | null;
  trail: string;
  disproven: string;
  progress: string;
  reason: string;
  changed_at: Int8;
  restored_at: Int8 | null;
}

/**
 * The columns a row set aside is written back with, per table: fixed lists (each table one statement shape); a column a
 * row set aside by an earlier version lacks is written as null (a column added since: nullable).
 */
const COLUMNS = {
  settlements: [
    "id", "chain_id", "token", "authorizer", "nonce", "network", "payee", "value", "valid_before", "status", "owner", "owner_expires_at",
    "deadline_at", "call_to", "call_data", "call_gas", "tx_hash", "relayer", "relayer_nonce", "block_number", "block_timestamp", "error",
    "attempts", "next_check_at", "created_at", "updated_at", "error_code",
  ],
  settlement_transactions: ["id", "hash", "settlement_id", "chain_id", "relayer", "relayer_nonce", "raw", "state", "fee_cap", "priority_fee", "created_at", "updated_at"],
  revert_penalties: ["chain_id", "token", "kind", "subject", "until_at", "tx_hash", "created_at"],
  payment_identifiers: ["chain_id", "token", "payer", "id", "nonce", "digest", "created_at"],
} as const;

/** What a penalty set aside does to one recorded since for the same subject: the later end stays. */
const PENALTY_CONFLICT = `ON CONFLICT (chain_id, token, kind, subject) DO UPDATE SET
  tx_hash = CASE WHEN excluded.until_at > revert_penalties.until_at THEN excluded.tx_hash ELSE revert_penalties.tx_hash END,
  until_at = CASE WHEN excluded.until_at > revert_penalties.until_at THEN excluded.until_at ELSE revert_penalties.until_at END`;

/** Writes `row` (column → value, as set aside) back into `table`; the number of rows written (0: its place is taken). */
function insertRow(tx: SqlExecutor, table: keyof typeof COLUMNS, row: Record<string, unknown>, conflict = "ON CONFLICT DO NOTHING"): Promise<number> {
  const columns = COLUMNS[table];
  const value = (v: unknown): SqlValue => (v === undefined || v === null ? null : typeof v === "number" || typeof v === "string" ? v : String(v));
  return tx.run(`INSERT INTO ${table} (${columns.join(", ")}) VALUES (${placeholders(columns.length)}) ${conflict}`, columns.map((column) => value(row[column])));
}

/** The changes of `chainId` whose rows are still set aside, the latest first. */
export async function pendingChanges(executor: SqlExecutor, chainId: number, limit: number): Promise<PendingHistoryChange[]> {
  const rows = await executor.all<ChangeRow>(`SELECT * FROM history_changes WHERE chain_id = ? AND restored_at IS NULL ORDER BY id DESC LIMIT ?`, [chainId, limit]);
  return rows.map((row) => ({
    id: Number(row.id),
    chainId: row.chain_id,
    ...(row.genesis_hash != null ? { genesisHash: row.genesis_hash } : {}),
    everything: Number(row.everything) === 1,
    ...(row.common_number != null && row.common_hash != null ? { common: { number: BigInt(row.common_number), hash: row.common_hash } } : {}),
    trail: (JSON.parse(row.trail) as Array<Omit<CheckpointRow, "chain_id">>).map((c) => ({ number: BigInt(c.block_number), hash: c.block_hash, recordedAt: Number(c.recorded_at) })),
    disproven: (JSON.parse(row.disproven) as SettlementRow[]).map((settled) => toSettlement(settled, [])),
    reason: row.reason,
    changedAt: Number(row.changed_at),
  }));
}

/** Parameters of {@link restoreChange}. */
export interface RestoreChange {
  chainId: number;
  changeId: number;
  epoch: number;
  now: number;
  /** ` FOR UPDATE` or nothing (the driver's). */
  forUpdate: string;
  catalog: SqlCatalogStore;
}

/**
 * Undoes a change in the caller's transaction (which holds the catalog's lock): every row it set aside back where it
 * was, but those whose place another row holds now (they stay aside, counted as `leftAside`); the index's nonces, its
 * progress where the index has not started over elsewhere, the trail's checkpoints, the genesis; the epoch grows by one.
 */
export async function restoreChange(tx: SqlExecutor, p: RestoreChange): Promise<HistoryRestoration> {
  const [current] = await tx.all<Pick<ChainHistoryRow, "epoch">>(`SELECT epoch FROM chain_histories WHERE chain_id = ?${p.forUpdate}`, [p.chainId]);
  if (!current || current.epoch !== p.epoch) return { restored: false };
  const [change] = await tx.all<ChangeRow>(`SELECT * FROM history_changes WHERE id = ? AND chain_id = ? AND restored_at IS NULL${p.forUpdate}`, [p.changeId, p.chainId]);
  if (!change) return { restored: false };

  const aside = await tx.all<{ id: Int8; kind: SetAsideRow["kind"]; row_data: string }>(`SELECT id, kind, row_data FROM set_aside_rows WHERE change_id = ? ORDER BY id`, [p.changeId]);
  const back: number[] = [];
  const counts = { settlements: 0, penalties: 0, paymentIdentifiers: 0, catalogEntries: 0 };
  const settlementsBack = new Set<number>();
  // Settlements before their transactions (a transaction names its settlement).
  const order: Record<SetAsideRow["kind"], number> = { settlement: 0, settlement_transaction: 1, penalty: 2, payment_identifier: 3, catalog_entry: 4 };
  for (const row of [...aside].sort((a, b) => order[a.kind] - order[b.kind] || Number(a.id) - Number(b.id))) {
    const data = JSON.parse(row.row_data) as Record<string, unknown>;
    let written = false;
    switch (row.kind) {
      case "settlement":
        written = (await insertRow(tx, "settlements", data)) > 0;
        if (written) settlementsBack.add(Number(data.id));
        if (written) counts.settlements++;
        break;
      case "settlement_transaction":
        written = settlementsBack.has(Number(data.settlement_id)) && (await insertRow(tx, "settlement_transactions", data)) > 0;
        break;
      case "penalty":
        written = (await insertRow(tx, "revert_penalties", data, PENALTY_CONFLICT)) > 0;
        if (written) counts.penalties++;
        break;
      case "payment_identifier":
        written = (await insertRow(tx, "payment_identifiers", data)) > 0;
        if (written) counts.paymentIdentifiers++;
        break;
      case "catalog_entry":
        written = await restoreEntry(tx, p.catalog, data as unknown as SetAsideEntry);
        if (written) counts.catalogEntries++;
        break;
    }
    if (written) back.push(Number(row.id));
  }
  for (let at = 0; at < back.length; at += 500) {
    const ids = back.slice(at, at + 500);
    await tx.run(`DELETE FROM set_aside_rows WHERE id IN (${placeholders(ids.length)})`, ids);
  }

  // The index's nonces, and its progress: raised back where the index still starts where it did (its nonces of the
  // blocks between are back), set again where it has none.
  const indexedNonces = await tx.run(
    `INSERT INTO indexed_nonces (chain_id, token, authorizer, nonce, block_number)
     SELECT chain_id, token, authorizer, nonce, block_number FROM set_aside_nonces WHERE change_id = ? ON CONFLICT DO NOTHING`,
    [p.changeId],
  );
  await tx.run(`DELETE FROM set_aside_nonces WHERE change_id = ?`, [p.changeId]);
  for (const progress of JSON.parse(change.progress) as ProgressRow[]) {
    await tx.run(
      `INSERT INTO nonce_index_progress (chain_id, token, from_block, through_block, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (chain_id, token) DO UPDATE SET
         through_block = CASE WHEN nonce_index_progress.from_block = excluded.from_block AND excluded.through_block > nonce_index_progress.through_block
           THEN excluded.through_block ELSE nonce_index_progress.through_block END,
         updated_at = excluded.updated_at`,
      [p.chainId, progress.token, Number(progress.from_block), Number(progress.through_block), p.now],
    );
  }
  for (const checkpoint of JSON.parse(change.trail) as Array<Omit<CheckpointRow, "chain_id">>) {
    await tx.run(`INSERT INTO chain_checkpoints (chain_id, block_number, block_hash, recorded_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, [
      p.chainId,
      Number(checkpoint.block_number),
      checkpoint.block_hash,
      Number(checkpoint.recorded_at),
    ]);
  }
  await pruneCheckpoints(tx, p.chainId);
  const epoch = current.epoch + 1;
  await tx.run(`UPDATE chain_histories SET genesis_hash = COALESCE(?, genesis_hash), epoch = ?, updated_at = ? WHERE chain_id = ?`, [
    Number(change.everything) === 1 ? change.genesis_hash : null,
    epoch,
    p.now,
    p.chainId,
  ]);
  await tx.run(`UPDATE history_changes SET restored_at = ? WHERE id = ?`, [p.now, p.changeId]);
  return { restored: true, epoch, ...counts, indexedNonces, leftAside: aside.length - back.length };
}
