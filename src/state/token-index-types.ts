// The token state index's parameters, its hooks and the answers it gives (see TokenIndex).
import type { Address, Hex, PublicClient } from "viem";
import type { BlockRef, NonceStore } from "./nonce-store.js";

/** The logging the index does (pino-compatible). */
export interface IndexLogger {
  info(fields: object, message?: string): void;
  warn(fields: object, message?: string): void;
  debug(fields: object, message?: string): void;
}

/** Parameters of {@link TokenIndex}. */
export interface TokenIndexParameters {
  /** Names the network in logs. */
  network: string;
  client: PublicClient;
  chainId: number;
  token: Address;
  /** Where the used and canceled nonces and the backfill's progress are kept (the ledger). */
  store: NonceStore;
  /** The first block the nonce backfill covers; default: the store's, else the token's deployment block. */
  startBlock?: bigint;
  /** What the operator sets to give the start block (named when it cannot be found). */
  startBlockVariable: string;
  /** Blocks per `eth_getLogs` of the backfill, at most. */
  logRangeBlocks: number;
  /**
   * The last blocks before the index's start that the backfill reads block by block, each proven by its own content
   * (whatever node of a load-balanced endpoint answers), rather than by range: default 256 (`TAIL_BLOCKS`, nonce-backfill.ts).
   */
  tailBlocks?: number;
  /** How often the chain's head is asked for while verifies come in (fewer while none do). */
  pollingIntervalMs: number;
  /** `eth_subscribe("newHeads")` tells of new blocks (a WebSocket RPC) rather than polling alone. */
  subscribe?: boolean;
  /**
   * Spent nonces held in memory at most (default: no bound). Beyond it the oldest stored ones are forgotten, and a
   * nonce not held is asked of the store when a filter of the forgotten ones says it may be among them.
   */
  maxNonces?: number;
  logger: IndexLogger;
  /** Told of each block applied, each failure to follow the chain, and each answer the index could not give. */
  observe?: IndexObserver;
  /**
   * Told when the chain's history changed under the index (proven: a block it had read replaced), from after the
   * newest block both share, or (undefined) deeper than it can walk back; the ledger is bound to the chain again
   * (see {@link ChainHistory}) before the index stores anything more.
   */
  history?: { diverged(common: BlockRef | undefined): Promise<void> };
}

/** Measurement hooks of the index (metrics). */
export interface IndexObserver {
  /** The chain could not be followed (an RPC fault, or answers that do not fit together). */
  followError?(kind: "rpc" | "inconsistent"): void;
  /** The index went back to an earlier block of the chain (`rewind`: blocks removed or replaced) or started over (`rebuild`). */
  historyChange?(kind: "rewind" | "rebuild"): void;
}

/** What verify needs of a payer, all true at `head`. */
export interface IndexedPayer {
  head: { number: bigint; timestamp: bigint; hash: Hex };
  balance: bigint;
  /**
   * true: used or canceled; false: unused, every block up to `head` proven read (see `backfillNonces`); undefined:
   * not proven (the backfill has not proven every block before the index's start yet): ask the chain.
   */
  used: boolean | undefined;
}

/** Whether an authorization is spent, and where: the block of the token's log that spent it (see {@link TokenIndex.spentAt}). */
export type SpentAt = { spent: false } | { spent: true; blockNumber: bigint };

/** The index as `/healthcheck` and `/metrics` show it. */
export interface IndexStatus {
  /**
   * `following`: answers verify; `behind`: the chain has blocks it could not read yet, or the ledger is being bound
   * to a changed history (verify reads the chain); `starting`; `stopped`.
   */
  state: "starting" | "following" | "behind" | "stopped";
  /** The block the index is true at. */
  block?: number;
  /** The chain's head as last seen. */
  chainBlock?: number;
  /** Milliseconds since the index last confirmed it is at the chain's head. */
  confirmedMsAgo?: number;
  /** How the index learns of new blocks. */
  mode: "poll" | "subscribe";
  /** Whether the token is paused, per its Pause / Unpause logs. */
  paused?: boolean;
  /** Payers whose balance the index holds. */
  payers: number;
  /** Used and canceled nonces the index holds in memory. */
  nonces: number;
  /** Spent nonces forgotten from memory over `STATE_INDEX_MAX_NONCES` (asked of the ledger when the filter says they may be spent). */
  evictedNonces: number;
  backfill: {
    state: "waiting" | "running" | "done" | "failed";
    fromBlock?: number;
    throughBlock?: number;
    targetBlock?: number;
    /** Why it stopped, naming what to set (only when failed). */
    error?: string;
  };
}
