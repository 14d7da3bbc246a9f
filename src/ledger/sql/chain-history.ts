import type { Hex } from "viem";
import {
  CHECKPOINT_LIMIT,
  type BlockRef,
  type ChainHistoryRecord,
  type ChainHistoryStore,
  type HistoryAdoption,
  type HistoryChange,
  type SetAsideRow,
  type SettlementRecord,
} from "../types.js";
import { CATALOG_LOCK, type SqlCatalogStore } from "./catalog.js";
import { lower, placeholders, type Int8 } from "./columns.js";
import { SqlStore, type SqlDriver, type SqlExecutor } from "./driver.js";
import { loadRecords, type SettlementRow, type TransactionRow } from "./settlement-rows.js";

/** A row of `chain_histories` (migration 0011). */
interface ChainHistoryRow {
  chain_id: number;
  genesis_hash: Hex;
  epoch: number;
  updated_at: Int8;
}

/** A row of `chain_checkpoints` (migration 0011). */
interface CheckpointRow {
  chain_id: number;
  block_number: Int8;
  block_hash: Hex;
  recorded_at: Int8;
}

/** A row of `set_aside_rows` (migration 0011): `row_data` is the row set aside, as JSON. */
interface SetAsideRowRow {
  id: Int8;
  chain_id: number;
  genesis_hash: Hex | null;
  kind: SetAsideRow["kind"];
  row_data: string;
  reason: string;
  set_aside_at: Int8;
}

/** Records `block` as a checkpoint (a later hash at the same height replaces the earlier) and keeps the newest {@link CHECKPOINT_LIMIT}. */
export async function writeCheckpoint(executor: SqlExecutor, chainId: number, block: BlockRef, now: number): Promise<void> {
  await executor.run(
    `INSERT INTO chain_checkpoints (chain_id, block_number, block_hash, recorded_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (chain_id, block_number) DO UPDATE SET block_hash = excluded.block_hash, recorded_at = excluded.recorded_at`,
    [chainId, Number(block.number), lower(block.hash), now],
  );
  await executor.run(
    `DELETE FROM chain_checkpoints WHERE chain_id = ? AND block_number < (
       SELECT MIN(block_number) FROM (SELECT block_number FROM chain_checkpoints WHERE chain_id = ? ORDER BY block_number DESC LIMIT ?) newest)`,
    [chainId, chainId, CHECKPOINT_LIMIT],
  );
}

/** Chain histories, their checkpoints and the rows set aside over SQL. */
export class SqlChainHistoryStore extends SqlStore implements ChainHistoryStore {
  readonly #catalog: SqlCatalogStore;

  constructor(driver: SqlDriver, now: () => number, catalog: SqlCatalogStore) {
    super(driver, now);
    this.#catalog = catalog;
  }

  async chainHistory(chainId: number): Promise<ChainHistoryRecord | undefined> {
    const [row] = await this.db.all<Pick<ChainHistoryRow, "genesis_hash" | "epoch">>(`SELECT genesis_hash, epoch FROM chain_histories WHERE chain_id = ?`, [chainId]);
    if (!row) return undefined;
    const checkpoints = await this.db.all<Omit<CheckpointRow, "chain_id">>(
      `SELECT block_number, block_hash, recorded_at FROM chain_checkpoints WHERE chain_id = ? ORDER BY block_number DESC LIMIT ?`,
      [chainId, CHECKPOINT_LIMIT],
    );
    return {
      chainId,
      genesisHash: row.genesis_hash,
      epoch: row.epoch,
      checkpoints: checkpoints.map((c) => ({ number: BigInt(c.block_number), hash: c.block_hash, recordedAt: Number(c.recorded_at) })),
    };
  }

  async recordCheckpoint(chainId: number, block: BlockRef): Promise<void> {
    await writeCheckpoint(this.db, chainId, block, this.now());
  }

  async settledAfter(chainId: number, options: { afterBlock?: bigint; limit: number }): Promise<SettlementRecord[]> {
    const after = options.afterBlock;
    const rows = await this.db.all<SettlementRow>(
      `SELECT * FROM settlements WHERE chain_id = ? AND status = 'settled'${after !== undefined ? " AND block_number > ?" : ""}
       ORDER BY block_number DESC, id DESC LIMIT ?`,
      [chainId, ...(after !== undefined ? [Number(after)] : []), options.limit],
    );
    return loadRecords(this.db, rows);
  }

  adoptChainHistory(change: HistoryChange): Promise<HistoryAdoption> {
    const { chainId, common } = change;
    const now = this.now();
    // One change at a time, across instances (the second sees the epoch moved and decides again), under the catalog's
    // lock too: the catalog's counts stay exact while its entries of the chain are set aside.
    return this.db.transaction({ lock: CATALOG_LOCK }, async (tx) => {
      const [current] = await tx.all<Pick<ChainHistoryRow, "genesis_hash" | "epoch">>(`SELECT genesis_hash, epoch FROM chain_histories WHERE chain_id = ?${this.db.forUpdate}`, [chainId]);
      if (current?.epoch !== change.epoch) return { adopted: false };
      const everything = common === undefined;
      const epoch = current ? current.epoch + (everything ? 1 : 0) : 1;
      await tx.run(
        `INSERT INTO chain_histories (chain_id, genesis_hash, epoch, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (chain_id) DO UPDATE SET genesis_hash = excluded.genesis_hash, epoch = excluded.epoch, updated_at = excluded.updated_at`,
        [chainId, lower(change.genesisHash), epoch, now],
      );
      const aside = async (kind: SetAsideRow["kind"], rows: readonly object[]) => {
        for (let at = 0; at < rows.length; at += 100) {
          const chunk = rows.slice(at, at + 100);
          await tx.run(
            `INSERT INTO set_aside_rows (chain_id, genesis_hash, kind, row_data, reason, set_aside_at) VALUES ${chunk.map(() => "(?, ?, ?, ?, ?, ?)").join(", ")}`,
            chunk.flatMap((row) => [chainId, current?.genesis_hash ?? null, kind, JSON.stringify(row), change.reason, now]),
          );
        }
      };
      const keep = new Set(change.keep ?? []);
      const settled = everything
        ? await tx.all<SettlementRow>(`SELECT * FROM settlements WHERE chain_id = ?`, [chainId])
        : await tx.all<SettlementRow>(`SELECT * FROM settlements WHERE chain_id = ? AND status = 'settled' AND block_number > ?`, [chainId, Number(common.number)]);
      const gone = settled.filter((row) => !keep.has(Number(row.id)));
      for (let at = 0; at < gone.length; at += 500) {
        const ids = gone.slice(at, at + 500).map((row) => Number(row.id));
        const transactions = await tx.all<TransactionRow>(`SELECT * FROM settlement_transactions WHERE settlement_id IN (${placeholders(ids.length)}) ORDER BY id`, ids);
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
        await writeCheckpoint(tx, chainId, common, this.now());
      }
      return { adopted: true, epoch, settlements: gone.length, penalties, paymentIdentifiers, catalogEntries, indexedNonces };
    });
  }

  async setAsideRows(options: { chainId?: number; limit?: number } = {}): Promise<SetAsideRow[]> {
    const { chainId } = options;
    const rows = await this.db.all<SetAsideRowRow>(
      `SELECT * FROM set_aside_rows${chainId === undefined ? "" : " WHERE chain_id = ?"} ORDER BY id DESC LIMIT ?`,
      [...(chainId === undefined ? [] : [chainId]), options.limit ?? 100],
    );
    return rows.map((row) => ({
      chainId: row.chain_id,
      ...(row.genesis_hash != null ? { genesisHash: row.genesis_hash } : {}),
      kind: row.kind,
      row: JSON.parse(row.row_data) as Record<string, unknown>,
      reason: row.reason,
      setAsideAt: Number(row.set_aside_at),
    }));
  }
}
