import type { Hex } from "viem";
import { CHECKPOINT_LIMIT, type BlockRef } from "../types.js";
import { lower, type Int8 } from "./columns.js";
import type { SqlExecutor } from "./driver.js";

// The rows a chain's history is kept in (migrations 0011, 0013), and its trail of checkpoints.

/** A row of `chain_histories` (migration 0011). */
export interface ChainHistoryRow {
  chain_id: number;
  genesis_hash: Hex;
  epoch: number;
  updated_at: Int8;
}

/** A row of `chain_checkpoints` (migration 0011). */
export interface CheckpointRow {
  chain_id: number;
  block_number: Int8;
  block_hash: Hex;
  recorded_at: Int8;
}

/** A row of `nonce_index_progress` (migration 0005), as a change keeps it. */
export interface ProgressRow {
  token: string;
  from_block: Int8;
  through_block: Int8;
  updated_at: Int8;
}

/** Keeps the newest {@link CHECKPOINT_LIMIT} checkpoints of the chain. */
export async function pruneCheckpoints(executor: SqlExecutor, chainId: number): Promise<void> {
  await executor.run(
    `DELETE FROM chain_checkpoints WHERE chain_id = ? AND block_number < (
       SELECT MIN(block_number) FROM (SELECT block_number FROM chain_checkpoints WHERE chain_id = ? ORDER BY block_number DESC LIMIT ?) newest)`,
    [chainId, chainId, CHECKPOINT_LIMIT],
  );
}

/**
 * Records `block` as a checkpoint (a later hash at the same height replaces the earlier; the same one keeps when it was
 * first seen: what was written since may belong to the blocks after it) and keeps the newest {@link CHECKPOINT_LIMIT}.
 */
export async function writeCheckpoint(executor: SqlExecutor, chainId: number, block: BlockRef, now: number): Promise<void> {
  await executor.run(
    `INSERT INTO chain_checkpoints (chain_id, block_number, block_hash, recorded_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (chain_id, block_number) DO UPDATE SET
       recorded_at = CASE WHEN chain_checkpoints.block_hash = excluded.block_hash THEN chain_checkpoints.recorded_at ELSE excluded.recorded_at END,
       block_hash = excluded.block_hash`,
    [chainId, Number(block.number), lower(block.hash), now],
  );
  await pruneCheckpoints(executor, chainId);
}
