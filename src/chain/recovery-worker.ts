// A recovery pool's worker thread (recovery-pool.ts): recovers the signers of the batches it is sent.
// A batch is `n` items of 97 bytes (the 32-byte digest, the 65-byte signature); the answer is `n` items of
// 21 bytes (1 when a signer was recovered, then its 20 address bytes; 0 and zeros when none).
import { parentPort } from "node:worker_threads";
import { recoverBatch } from "./recovery-batch.js";

const port = parentPort;
if (!port) throw new Error("recovery-worker.ts runs as a worker thread of a RecoveryPool");
port.on("message", ({ id, items }: { id: number; items: Uint8Array }) => {
  const answers = recoverBatch(items);
  port.postMessage({ id, answers }, [answers.buffer as ArrayBuffer]);
});
port.postMessage({ ready: true });
