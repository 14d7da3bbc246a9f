// Run as a process of its own (POOL_ALONE=1; mocha loads every file under test/, and then this does nothing):
// a recovery pool whose answers are the only thing the process waits for. It prints how many answers were
// right and exits by itself once they came: answers due keep the process alive, an idle pool does not.
import { randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import { bytesToHex } from "viem";
import { RecoveryPool } from "../../src/chain/recovery-pool.js";
import { recoverSigner } from "../../src/chain/signature.js";

if (process.env.POOL_ALONE === "1") {
  const secp = createRequire(import.meta.url)("secp256k1") as { ecdsaSign(message: Uint8Array, key: Uint8Array): { signature: Uint8Array; recid: number } };
  const key = randomBytes(32);
  const cases = Array.from({ length: 100 }, () => {
    const digest = randomBytes(32);
    const { signature, recid } = secp.ecdsaSign(digest, key);
    return { digest, signature: `${bytesToHex(signature)}${(27 + recid).toString(16)}` as const };
  });
  const paths: Record<string, number> = {};
  // No late bound (on a loaded machine the main thread could answer them itself after 10 ms): the worker's answers are the point.
  const pool = new RecoveryPool({ workers: 1, inlineWhenIdle: false, lateMs: 120_000, timeoutMs: 120_000, onRecovered: (path, count) => (paths[path] = (paths[path] ?? 0) + count) });
  // Started by the first recovery; once ready, every recovery of a burst goes to it.
  pool.recover(cases[0]!.digest, cases[0]!.signature);
  const started = setInterval(() => {
    if (pool.state.ready === 0) return;
    clearInterval(started);
    // From here on, nothing but the worker's answers is pending.
    void Promise.all(cases.map((c) => pool.recover(c.digest, c.signature))).then((answers) => {
      const right = answers.filter((answer, i) => answer === recoverSigner(cases[i]!.digest, cases[i]!.signature)).length;
      process.stdout.write(`${JSON.stringify({ right, worker: paths.worker ?? 0 })}\n`);
    });
  }, 10);
}
