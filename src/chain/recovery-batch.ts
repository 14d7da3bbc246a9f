import { recoverAddressBytes } from "./secp256k1.js";

/** One item of a recovery batch: the 32-byte digest, then the 65-byte `r‖s‖v` signature. */
export const BATCH_ITEM_BYTES = 97;
/** One answer of a recovery batch: 1 (a signer) or 0 (none), then 20 address bytes. */
export const BATCH_ANSWER_BYTES = 21;

/** The signers of a batch's items (recovery-worker.ts; and the pool's rescue of a batch a worker never answered). */
export function recoverBatch(items: Uint8Array): Uint8Array {
  const bytes = Buffer.from(items.buffer, items.byteOffset, items.byteLength);
  const count = Math.floor(bytes.length / BATCH_ITEM_BYTES);
  const answers = new Uint8Array(count * BATCH_ANSWER_BYTES);
  for (let i = 0; i < count; i++) {
    const at = i * BATCH_ITEM_BYTES;
    const signer = recoverAddressBytes(bytes.subarray(at, at + 32), bytes, at + 32);
    if (!signer) continue;
    answers[i * BATCH_ANSWER_BYTES] = 1;
    answers.set(signer, i * BATCH_ANSWER_BYTES + 1);
  }
  return answers;
}
