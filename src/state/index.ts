export { TokenIndex, type IndexedPayer, type IndexLogger, type IndexObserver, type IndexStatus, type SpentAt, type TokenIndexParameters } from "./token-index.js";
export type { NonceProgress, NonceScope, NonceStore, StoredNonce } from "./nonce-store.js";
export { ChainHistory, HistoryCheckError, type ChainHistoryParameters } from "./chain-history.js";
export type { BlockRef, HistoryStore } from "./nonce-store.js";
