// A recovery pool's worker (src/chain/recovery-worker.ts) that fails on demand, for the pool's tests: a batch
// holding a signature whose `r` is 32 bytes of 0xee makes the worker exit (a crash); of 0xdd, loop forever (a
// hang). Other batches are answered as the real worker answers them. Loaded by mocha too (every file under
// test/): there, on the main thread, it does nothing.
import { parentPort, workerData, type MessagePort } from "node:worker_threads";
import { BATCH_ITEM_BYTES, recoverBatch } from "../../src/chain/recovery-batch.js";

/** A signature whose `r` is 32 bytes of `byte` (s = 1, v = 27): the worker's poison. */
export const poisonSignature = (byte: "ee" | "dd") => `0x${byte.repeat(32)}${"00".repeat(31)}011b` as const;

const poisoned = (items: Uint8Array, byte: number) => {
  for (let at = 0; at < items.length; at += BATCH_ITEM_BYTES) if (items.subarray(at + 32, at + 64).every((b) => b === byte)) return true;
  return false;
};

const requests = parentPort;
const answers = (workerData as { answers?: MessagePort } | null)?.answers;
if (requests && answers) {
  requests.on("message", ({ id, items }: { id: number; items: Uint8Array }) => {
    if (poisoned(items, 0xee)) process.exit(3);
    if (poisoned(items, 0xdd)) for (;;);
    const recovered = recoverBatch(items);
    answers.postMessage({ id, answers: recovered }, [recovered.buffer as ArrayBuffer]);
  });
  answers.postMessage({ ready: true });
}
