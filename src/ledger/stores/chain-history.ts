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
  /** Grows by one each time the chain's rows are all set aside (a history with nothing in common), and each time rows set aside come back. */
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
  /**
   * Settled rows the chain disproved (the change's evidence when no block of the trail was replaced): kept with the
   * change, so that their proof on the chain later brings the change back ({@link ChainHistoryStore.restoreChainHistory}).
   */
  disproven?: readonly number[];
  /** The epoch the caller decided on: the change is refused (`adopted: false`) when another instance changed it meanwhile. */
  epoch: number | undefined;
  /** Why (kept with the rows set aside). */
  reason: string;
}

/** What {@link ChainHistoryStore.adoptChainHistory} did: how many rows it set aside (or deleted: the index's nonces) of each kind. */
export type HistoryAdoption =
  | { adopted: false }
  | { adopted: true; epoch: number; settlements: number; penalties: number; paymentIdentifiers: number; catalogEntries: number; indexedNonces: number };

/**
 * A change of a chain's history as the ledger keeps it, its rows set aside and able to come back: what the history it set
 * aside looked like (its genesis, the trail's blocks after the common one, the settled rows whose disproof was its
 * evidence), so that a chain found to hold that history after all brings every row back.
 */
export interface PendingHistoryChange {
  id: number;
  chainId: number;
  /** The genesis of the history set aside (absent: the chain was first seen). */
  genesisHash?: Hex;
  /** Nothing in common with the chain then (every row of the chain was set aside). */
  everything: boolean;
  common?: BlockRef;
  /** The checkpoints the history set aside had after `common` (every one when `everything`), newest first. */
  trail: Checkpoint[];
  /** The settled rows (as set aside) whose disproof on the chain was the change's evidence. */
  disproven: SettlementRecord[];
  reason: string;
  changedAt: number;
}

/** What {@link ChainHistoryStore.restoreChainHistory} did: how many rows came back of each kind, and how many stay aside (another row holds their place). */
export type HistoryRestoration =
  | { restored: false }
  | { restored: true; epoch: number; settlements: number; penalties: number; paymentIdentifiers: number; catalogEntries: number; indexedNonces: number; leftAside: number };

/** A row set aside because it belongs to another history of its chain: kept, never served. */
export interface SetAsideRow {
  chainId: number;
  /** The genesis of the history it belonged to (as the ledger knew it). */
  genesisHash?: Hex;
  kind: "settlement" | "settlement_transaction" | "penalty" | "payment_identifier" | "catalog_entry";
  /** The change that set it aside (absent: set aside by a version before changes could be undone). */
  changeId?: number;
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
   * (but `keep`), and rows without a block written after `since`; the index's nonces of blocks after it are set aside
   * and its progress lowered to it. Without: every row of the chain (but `keep`), and the index's nonces and progress.
   * Rows set aside go to `set_aside_rows` (nonces to `set_aside_nonces`), never served, and are kept with the change
   * (`history_changes`): nothing is deleted. Refused (`adopted: false`, nothing done) when the chain's epoch is no
   * longer `change.epoch`.
   */
  adoptChainHistory(change: HistoryChange): Promise<HistoryAdoption>;
  /** The changes of chain `chainId` whose rows are still set aside, the latest first, at most `limit`. */
  pendingHistoryChanges(chainId: number, options: { limit: number }): Promise<PendingHistoryChange[]>;
  /**
   * Undoes change `changeId` of chain `chainId`: the chain holds the history it set aside after all. Every row it set
   * aside comes back (a settlement, payment identifier or catalog entry whose place another row holds now stays aside;
   * a penalty keeps the later end), the index's nonces and progress and the trail's checkpoints too, the genesis it
   * replaced, and the epoch grows by one. Refused (`restored: false`, nothing done) when the change is no longer
   * pending or the epoch is no longer `epoch`.
   */
  restoreChainHistory(chainId: number, changeId: number, options: { epoch: number }): Promise<HistoryRestoration>;
  /** Rows set aside (of `chainId`, or every chain), the latest first, at most `limit` (default 100). */
  setAsideRows(options?: { chainId?: number; limit?: number }): Promise<SetAsideRow[]>;
}
