export { TokenIndex } from "./token-index.js";
export type { IndexedPayer, IndexLogger, IndexObserver, IndexStatus, SpentAt, TokenIndexParameters } from "./token-index-types.js";
export type { NonceProgress, NonceScope, NonceStore, StoredNonce } from "./nonce-store.js";
export { ChainHistory, HistoryCheckError, type ChainHistoryParameters, type RowProof, type RowProver } from "./chain-history.js";
export type { BlockRef, HistoryStore } from "./nonce-store.js";
