import type { Hex } from "viem";
import type { SettlementRecord } from "./settlements.js";

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
 * A change of a chain's history, for {@link ChainHistoryStore.adoptChainHistory}: which of the chain's rows belong to the
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

/** What {@link ChainHistoryStore.adoptChainHistory} did: how many rows it set aside (or deleted: the index's nonces) of each kind. */
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
 * What the ledger's rows were learned on: each chain's history (its genesis, a trail of checkpoints), and the
 * rows set aside when that history changed.
 */
export interface ChainHistoryStore {
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
}
