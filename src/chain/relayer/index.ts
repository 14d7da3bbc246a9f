/**
 * The relayer: a nonce-safe sender that keeps each key's transactions until they are mined. One file
 * per concern: a key's state ({@link ./key.ts}), signing and broadcasting ({@link ./broadcast.ts}), the
 * stuck/replace/gap-fill lifecycle ({@link ./lifecycle.ts}); the class ({@link ./relayer.ts}) composes them.
 */
export { FeeCapError } from "../fees.js";
export { sendErrorKind } from "./broadcast.js";
export { Relayer, type RelayerParameters } from "./relayer.js";
export { KeyNotLeasedError, RelaySendError, type AdoptedTransaction, type EarlyReceipt, type KeyLease, type RelayerEvent, type RelayHooks, type RelayRequest, type SentTransaction, type SignedRelay } from "./types.js";
