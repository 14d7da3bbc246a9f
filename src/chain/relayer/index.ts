/**
 * The relayer: a nonce-safe sender that keeps each key's transactions until they are mined. One file
 * per concern: a key's state ({@link ./key.ts}), signing and broadcasting ({@link ./broadcast.ts}), a new
 * transaction's admission through the node's refusals ({@link ./admission.ts}), broadcasting one again
 * ({@link ./resend.ts}), the stuck/replace/gap-fill lifecycle ({@link ./lifecycle.ts}); the class
 * ({@link ./relayer.ts}) composes them. What a node's error means is read from one table ({@link ../node-errors.ts}).
 */
export { FeeCapError } from "../fees.js";
export { classifySendError, SEND_REFUSALS, type SendErrorClass, type SendRefusal } from "../node-errors.js";
export { Relayer, type RelayerParameters } from "./relayer.js";
export { KeyNotLeasedError, RelaySendError, type AdoptedTransaction, type EarlyReceipt, type KeyLease, type RelayerEvent, type RelayHooks, type RelayRequest, type SentTransaction, type SignedRelay } from "./types.js";
