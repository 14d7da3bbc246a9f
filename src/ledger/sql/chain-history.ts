import type { Hex } from "viem";
import {
  CHECKPOINT_LIMIT,
  type BlockRef,
  type ChainHistoryRecord,
  type ChainHistoryStore,
  type HistoryAdoption,
  type HistoryChange,
  type HistoryRestoration,
  type PendingHistoryChange,
  type SetAsideRow,
  type SettlementRecord,
} from "../types.js";
import { CATALOG_LOCK, type SqlCatalogStore } from "./catalog.js";
import { writeCheckpoint, type ChainHistoryRow, type CheckpointRow, type ProgressRow } from "./checkpoints.js";
import { lower, placeholders, type Int8 } from "./columns.js";
import { pendingChanges, restoreChange } from "./history-restore.js";
import { SqlStore, type SqlDriver } from "./driver.js";
import { loadRecords, type SettlementRow, type TransactionRow } from "./settlement-rows.js";

export { writeCheckpoint } from "./checkpoints.js";

/** A row of `set_aside_rows` (migration 0011): `row_data` is the row set aside, as JSON. */
interface SetAsideRowRow {
  id: Int8;
  chain_id: number;
  genesis_hash: Hex | null;
  kind: SetAsideRow["kind"];
  row_data: string;
  reason: string;
  set_aside_at: Int8;
  /** The change that set it aside (migration 0013; null for rows set aside before it). */
  change_id: Int8 | null;
}

/** Settled rows a change keeps as its evidence (the chain disproved them): their proof later undoes it. */
const EVIDENCE_ROWS = 8;

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
      // What the history set aside looked like, kept with the change: the trail's blocks after the common one, and the
      // index's progress, before either moves.
      const trail = await tx.all<Omit<CheckpointRow, "chain_id">>(
        `SELECT block_number, block_hash, recorded_at FROM chain_checkpoints WHERE chain_id = ?${everything ? "" : " AND block_number > ?"} ORDER BY block_number DESC`,
        [chainId, ...(everything ? [] : [Number(common.number)])],
      );
      const progress = await tx.all<ProgressRow>(`SELECT token, from_block, through_block, updated_at FROM nonce_index_progress WHERE chain_id = ?`, [chainId]);
      const keep = new Set(change.keep ?? []);
      const settled = everything
        ? await tx.all<SettlementRow>(`SELECT * FROM settlements WHERE chain_id = ?`, [chainId])
        : await tx.all<SettlementRow>(`SELECT * FROM settlements WHERE chain_id = ? AND status = 'settled' AND block_number > ?`, [chainId, Number(common.number)]);
      const gone = settled.filter((row) => !keep.has(Number(row.id)));
      const disproven = new Set(change.disproven ?? []);
      const evidence = gone.filter((row) => disproven.has(Number(row.id))).slice(0, EVIDENCE_ROWS);
      const [record] = await tx.all<{ id: Int8 }>(
        `INSERT INTO history_changes (chain_id, genesis_hash, everything, common_number, common_hash, trail, disproven, progress, reason, changed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
        [
          chainId,
          current?.genesis_hash ?? null,
          everything ? 1 : 0,
          common ? Number(common.number) : null,
          common ? lower(common.hash) : null,
          JSON.stringify(trail),
          JSON.stringify(evidence),
          JSON.stringify(progress),
          change.reason,
          now,
        ],
      );
      const changeId = Number(record!.id);
      await tx.run(
        `INSERT INTO chain_histories (chain_id, genesis_hash, epoch, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (chain_id) DO UPDATE SET genesis_hash = excluded.genesis_hash, epoch = excluded.epoch, updated_at = excluded.updated_at`,
        [chainId, lower(change.genesisHash), epoch, now],
      );
      const aside = async (kind: SetAsideRow["kind"], rows: readonly object[]) => {
        for (let at = 0; at < rows.length; at += 100) {
          const chunk = rows.slice(at, at + 100);
          await tx.run(
            `INSERT INTO set_aside_rows (chain_id, genesis_hash, kind, row_data, reason, set_aside_at, change_id) VALUES ${chunk.map(() => "(?, ?, ?, ?, ?, ?, ?)").join(", ")}`,
            chunk.flatMap((row) => [chainId, current?.genesis_hash ?? null, kind, JSON.stringify(row), change.reason, now, changeId]),
          );
        }
      };
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
      // The index's nonces of the other history go aside with the change (they come back with it); the index reads the
      // chain's own logs again.
      const after = everything ? "" : " AND block_number > ?";
      const nonceParams = [chainId, ...(everything ? [] : [Number(common.number)])];
      const indexedNonces = await tx.run(
        `INSERT INTO set_aside_nonces (change_id, chain_id, token, authorizer, nonce, block_number)
         SELECT ?, chain_id, token, authorizer, nonce, block_number FROM indexed_nonces WHERE chain_id = ?${after}`,
        [changeId, ...nonceParams],
      );
      await tx.run(`DELETE FROM indexed_nonces WHERE chain_id = ?${after}`, nonceParams);
      if (everything) {
        await tx.run(`DELETE FROM nonce_index_progress WHERE chain_id = ?`, [chainId]);
        await tx.run(`DELETE FROM chain_checkpoints WHERE chain_id = ?`, [chainId]);
      } else {
        const through = Number(common.number);
        await tx.run(
          `UPDATE nonce_index_progress SET through_block = CASE WHEN from_block - 1 > ? THEN from_block - 1 ELSE ? END, updated_at = ?
           WHERE chain_id = ? AND through_block > ?`,
          [through, through, now, chainId, through],
        );
        await tx.run(`DELETE FROM chain_checkpoints WHERE chain_id = ? AND block_number > ?`, [chainId, through]);
        await writeCheckpoint(tx, chainId, common, this.now());
      }
      // A first sight that set nothing aside is no change to keep.
      if (!current && trail.length === 0 && gone.length + penalties + paymentIdentifiers + catalogEntries + indexedNonces === 0) {
        await tx.run(`DELETE FROM history_changes WHERE id = ?`, [changeId]);
      }
      return { adopted: true, epoch, settlements: gone.length, penalties, paymentIdentifiers, catalogEntries, indexedNonces };
    });
  }

  pendingHistoryChanges(chainId: number, options: { limit: number }): Promise<PendingHistoryChange[]> {
    return pendingChanges(this.db, chainId, options.limit);
  }

  restoreChainHistory(chainId: number, changeId: number, options: { epoch: number }): Promise<HistoryRestoration> {
    return this.db.transaction({ lock: CATALOG_LOCK }, (tx) => restoreChange(tx, { chainId, changeId, epoch: options.epoch, now: this.now(), forUpdate: this.db.forUpdate, catalog: this.#catalog }));
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
      ...(row.change_id != null ? { changeId: Number(row.change_id) } : {}),
    }));
  }
}
