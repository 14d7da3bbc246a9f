import type { ChainHistoryStore, IndexedNonce, NonceIndexProgress, NonceIndexStore, TokenScope } from "../ledger/types.js";

// The index keeps what must outlive a process, and what instances share, through the ledger's stores (src/ledger):
// the facilitator hands the ledger in; a stand-in (a benchmark's) implements the nonce store alone.

/** One token on one chain. */
export type NonceScope = TokenScope;

/** An authorization nonce found used or canceled on chain, and the block of its log. */
export type StoredNonce = IndexedNonce;

/** How far the shared record of used and canceled nonces reaches: every such log of fromBlock..throughBlock is stored. */
export type NonceProgress = NonceIndexProgress;

/** Where the nonce backfill keeps its nonces and its progress (the ledger: shared by instances, kept over restarts). */
export type NonceStore = NonceIndexStore;

/**
 * Where the chain's history is checked against what was learned on it: the ledger itself (the state room sits above
 * it), see its `adoptChainHistory`.
 */
export type HistoryStore = Omit<ChainHistoryStore, "setAsideRows"> & Pick<NonceIndexStore, "nonceIndexProgress">;
export type { BlockRef } from "../ledger/types.js";
