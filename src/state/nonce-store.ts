import type { Address, Hex } from "viem";
import type { ChainHistoryStore, NonceIndexStore } from "../ledger/types.js";

// The index keeps what must outlive a process, and what instances share, through this port: the
// settlement ledger implements it (src/ledger), and the facilitator hands the ledger in. The nonce shapes
// match the ledger's own (a stand-in store needs nothing of the ledger's); the history port is the ledger's.

/** One token on one chain. */
export interface NonceScope {
  chainId: number;
  token: Address;
}

/** An authorization nonce found used or canceled on chain, and the block of its log. */
export interface StoredNonce {
  authorizer: Address;
  nonce: Hex;
  blockNumber: bigint;
}

/** How far the shared record of used and canceled nonces reaches: every such log of fromBlock..throughBlock is stored. */
export interface NonceProgress {
  fromBlock: bigint;
  throughBlock: bigint;
}

/** Where the nonce backfill keeps its nonces and its progress (the ledger: shared by instances, kept over restarts). */
export interface NonceStore {
  nonceIndexProgress(scope: NonceScope): Promise<NonceProgress | undefined>;
  openNonceIndex(scope: NonceScope, fromBlock: bigint): Promise<NonceProgress>;
  /** `throughHash`: the hash of `throughBlock`, kept with the progress (a checkpoint of the chain's history). */
  recordIndexedNonces(scope: NonceScope, nonces: readonly StoredNonce[], range: { fromBlock: bigint; throughBlock: bigint; throughHash?: Hex }): Promise<NonceProgress>;
  indexedNonces(scope: NonceScope, options: { after?: { authorizer: Address; nonce: Hex }; limit: number }): Promise<StoredNonce[]>;
  indexedNonce(scope: NonceScope, authorizer: Address, nonce: Hex): Promise<StoredNonce | undefined>;
}

/**
 * Where the chain's history is checked against what was learned on it: the ledger itself (the state room sits above
 * it), see its `adoptChainHistory`.
 */
export type HistoryStore = Omit<ChainHistoryStore, "setAsideRows"> & Pick<NonceIndexStore, "nonceIndexProgress">;
export type { BlockRef } from "../ledger/types.js";
