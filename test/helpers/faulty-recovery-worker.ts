// A recovery pool's worker (src/chain/recovery-worker.ts) that fails on demand, for the pool's tests: a batch
// holding a signature whose `r` is 32 bytes of 0xee makes the worker exit (a crash); of 0xdd, loop forever (a
// hang); of 0xcc, stall until the test says "release" on the broadcast channel RELEASE_CHANNEL (a worker starved
// of CPU), then answer it. Other batches are answered as the real worker answers them. Loaded by mocha too
// (every file under test/): there, on the main thread, it does nothing.
import { BroadcastChannel, parentPort, receiveMessageOnPort, workerData, type MessagePort } from "node:worker_threads";
import { BATCH_ITEM_BYTES, recoverBatch } from "../../src/chain/recovery-batch.js";

/** A signature whose `r` is 32 bytes of `byte` (s = 1, v = 27): the worker's poison. */
export const poisonSignature = (byte: "ee" | "dd" | "cc") => `0x${byte.repeat(32)}${"00".repeat(31)}011b` as const;

/** The channel on which a test releases a stalled (0xcc) worker. */
export const RELEASE_CHANNEL = "faulty-recovery-worker:release";

const poisoned = (items: Uint8Array, byte: number) => {
  for (let at = 0; at < items.length; at += BATCH_ITEM_BYTES) if (items.subarray(at + 32, at + 64).every((b) => b === byte)) return true;
  return false;
};

const requests = parentPort;
const answers = (workerData as { answers?: MessagePort } | null)?.answers;
if (requests && answers) {
  const release = new BroadcastChannel(RELEASE_CHANNEL);
  release.unref();
  const pause = new Int32Array(new SharedArrayBuffer(4));
  requests.on("message", ({ id, items }: { id: number; items: Uint8Array }) => {
    if (poisoned(items, 0xee)) process.exit(3);
    if (poisoned(items, 0xdd)) for (;;);
    // Stalled, not hung: the thread blocks (as one given no CPU does) until released, then answers.
    if (poisoned(items, 0xcc)) while (!receiveMessageOnPort(release as unknown as MessagePort)) Atomics.wait(pause, 0, 0, 5);
    const recovered = recoverBatch(items);
    answers.postMessage({ id, answers: recovered }, [recovered.buffer as ArrayBuffer]);
  });
  answers.postMessage({ ready: true });
}
