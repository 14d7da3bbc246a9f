// A recovery pool's worker thread (recovery-pool.ts): recovers the signers of the batches it is sent.
// A batch is `n` items of 97 bytes (the 32-byte digest, the 65-byte signature); the answer is `n` items of
// 21 bytes (1 when a signer was recovered, then its 20 address bytes; 0 and zeros when none), sent on the
// answers port the pool gave (workerData.answers), which the pool also reads synchronously.
import { parentPort, workerData, type MessagePort } from "node:worker_threads";
import { recoverBatch } from "./recovery-batch.js";

const requests = parentPort;
const answers = (workerData as { answers?: MessagePort } | null)?.answers;
if (!requests || !answers) throw new Error("recovery-worker.ts runs as a worker thread of a RecoveryPool");
requests.on("message", ({ id, items }: { id: number; items: Uint8Array }) => {
  const recovered = recoverBatch(items);
  answers.postMessage({ id, answers: recovered }, [recovered.buffer as ArrayBuffer]);
});
answers.postMessage({ ready: true });
