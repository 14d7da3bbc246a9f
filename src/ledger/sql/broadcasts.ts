import type { Address, Hex } from "viem";
import type { BroadcastStore, FillerRecord, RecordBroadcastInput, RecordFillerInput, RecordReplacementInput, TransactionState } from "../types.js";
import { checksum, lower, type Int8 } from "./columns.js";
import { SqlStore, type SqlValue } from "./driver.js";
import { fenceParams, leaseFence } from "./leases.js";
import { IN_FLIGHT } from "./settlement-rows.js";

/** The write-ahead record of a signed transaction: completed with the row source (`settlements WHERE …`, or a CTE). */
const INSERT_SIGNED = `INSERT INTO settlement_transactions (hash, settlement_id, chain_id, relayer, relayer_nonce, raw, state, fee_cap, priority_fee, created_at, updated_at)
   SELECT ?, id, chain_id, ?, ?, ?, 'signed', ?, ?, ?, ? FROM`;

function signedParams(input: RecordBroadcastInput | RecordReplacementInput, now: number): SqlValue[] {
  return [lower(input.hash), lower(input.relayer), input.relayerNonce, input.raw, input.feeCap?.toString() ?? null, input.priorityFee?.toString() ?? null, now, now];
}

/** A row of `relayer_fillers` (migration 0010), as `SELECT *` gives it. */
interface FillerRow {
  hash: Hex;
  chain_id: number;
  relayer: string;
  relayer_nonce: Int8;
  raw: Hex;
  holder: string;
  lease_epoch: Int8;
  replaces: Hex | null;
  state: FillerRecord["state"];
  fee_cap: string | null;
  priority_fee: string | null;
  created_at: Int8;
  updated_at: Int8;
}

function toFiller(row: FillerRow): FillerRecord {
  return {
    chainId: row.chain_id,
    hash: row.hash,
    raw: row.raw,
    relayer: checksum(row.relayer),
    relayerNonce: Number(row.relayer_nonce),
    holder: row.holder,
    leaseEpoch: Number(row.lease_epoch),
    state: row.state,
    ...(row.fee_cap != null ? { feeCap: BigInt(row.fee_cap) } : {}),
    ...(row.priority_fee != null ? { priorityFee: BigInt(row.priority_fee) } : {}),
    ...(row.replaces != null ? { replaces: row.replaces } : {}),
    createdAt: Number(row.created_at),
  };
}

/** How long a gap filler's record is kept (it is followed only until its nonce is mined). */
const FILLER_RECORD_MS = 7 * 86_400_000;

/** The write-ahead of transactions over SQL: each recorded under the relayer key's lease before its broadcast. */
export class SqlBroadcastStore extends SqlStore implements BroadcastStore {
  async recordBroadcast(input: RecordBroadcastInput): Promise<boolean> {
    const now = this.now();
    // Only while `owner` owns the unfinished row and holds the relayer key's lease (the fence).
    const sent = `UPDATE settlements SET status = 'sent', tx_hash = ?, relayer = ?, relayer_nonce = ?, next_check_at = ?, updated_at = ?
       WHERE id = ? AND owner = ? AND status IN ${IN_FLIGHT} AND ${leaseFence(this.db, input.leaseEpoch)}`;
    const sentParams = [
      lower(input.hash),
      lower(input.relayer),
      input.relayerNonce,
      now + input.checkAfterMs,
      now,
      input.id,
      input.owner,
      ...fenceParams(this.db, input.relayer, input.owner, now, input.leaseEpoch),
    ];
    const insert = INSERT_SIGNED;
    const insertParams = signedParams(input, now);
    // It runs inside each relayer key's send queue: one round trip where the dialect allows it.
    if (this.db.writableCte) {
      const [row] = await this.db.all<{ n: Int8 }>(
        `WITH sent AS (${sent} RETURNING id, chain_id),
              recorded AS (${insert} sent ON CONFLICT (hash) DO NOTHING)
         SELECT COUNT(*) AS n FROM sent`,
        [...sentParams, ...insertParams],
      );
      return Number(row?.n ?? 0) > 0;
    }
    return this.db.transaction(async (tx) => {
      if ((await tx.run(sent, sentParams)) === 0) return false;
      await tx.run(`${insert} settlements WHERE id = ? ON CONFLICT (hash) DO NOTHING`, [...insertParams, input.id]);
      return true;
    });
  }

  recordReplacement(input: RecordReplacementInput): Promise<boolean> {
    const now = this.now();
    return this.db.transaction(async (tx) => {
      const changed = await tx.run(
        `UPDATE settlements SET tx_hash = ?, updated_at = ?
         WHERE id = ? AND status = 'sent' AND relayer = ? AND relayer_nonce = ? AND ${leaseFence(this.db, input.leaseEpoch)}`,
        [lower(input.hash), now, input.id, lower(input.relayer), input.relayerNonce, ...fenceParams(this.db, input.relayer, input.holder, now, input.leaseEpoch)],
      );
      if (changed === 0) return false;
      await tx.run(`${INSERT_SIGNED} settlements WHERE id = ? ON CONFLICT (hash) DO NOTHING`, [...signedParams(input, now), input.id]);
      return true;
    });
  }

  async recordFiller(input: RecordFillerInput): Promise<boolean> {
    const now = this.now();
    // One statement: the record exists only if the fence held when it was written (the same hash again: recorded once).
    const rows = await this.db.all<Pick<FillerRow, "hash">>(
      `INSERT INTO relayer_fillers (hash, chain_id, relayer, relayer_nonce, raw, holder, lease_epoch, replaces, state, fee_cap, priority_fee, created_at, updated_at)
       SELECT ?, ?, ?, ?, ?, ?, ?, ?, 'signed', ?, ?, ?, ? WHERE ${leaseFence(this.db, input.leaseEpoch)}
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
        ...fenceParams(this.db, input.relayer, input.holder, now, input.leaseEpoch),
      ],
    );
    return rows.length > 0;
  }

  async markFillerRefused(hash: Hex): Promise<void> {
    await this.db.run(`UPDATE relayer_fillers SET state = 'refused', updated_at = ? WHERE hash = ?`, [this.now(), lower(hash)]);
  }

  async pendingFillers(input: { chainId: number; relayer: Address; fromNonce: number; limit: number }): Promise<FillerRecord[]> {
    const rows = await this.db.all<FillerRow>(
      `SELECT * FROM relayer_fillers WHERE chain_id = ? AND relayer = ? AND relayer_nonce >= ? AND state = 'signed'
       ORDER BY relayer_nonce, created_at, hash LIMIT ?`,
      [input.chainId, lower(input.relayer), input.fromNonce, input.limit],
    );
    return rows.map(toFiller);
  }

  async markTransaction(hash: Hex, state: TransactionState): Promise<void> {
    await this.db.run(`UPDATE settlement_transactions SET state = ?, updated_at = ? WHERE hash = ?`, [state, this.now(), lower(hash)]);
  }

  /** Deletes gap fillers' records older than a week. */
  async prune(now: number): Promise<void> {
    // A filler's nonce is mined within minutes; a week-old record is history no holder will follow.
    await this.db.run(`DELETE FROM relayer_fillers WHERE created_at <= ?`, [now - FILLER_RECORD_MS]);
  }
}
