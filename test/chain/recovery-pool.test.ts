import { expect } from "chai";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
import { BroadcastChannel } from "node:worker_threads";
import { fileURLToPath } from "node:url";
import { bytesToHex, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { RecoveryPool, type RecoveryPath, type RecoveryPoolOptions, type WorkerLoss } from "../../src/chain/recovery-pool.js";
import { recoverSigner } from "../../src/chain/signature.js";
import { poisonSignature, RELEASE_CHANNEL } from "../helpers/faulty-recovery-worker.js";
import { closeAfter } from "../helpers/teardown.js";
import { waitUntil } from "../helpers/wait.js";

const secp = createRequire(import.meta.url)("secp256k1") as { ecdsaSign(message: Uint8Array, key: Uint8Array): { signature: Uint8Array; recid: number } };
const KEYS = Array.from({ length: 4 }, () => randomBytes(32));
const ADDRESSES = KEYS.map((key) => privateKeyToAccount(bytesToHex(key)).address.toLowerCase());
const FAULTY = new URL("../helpers/faulty-recovery-worker.ts", import.meta.url);
/** secp256k1's group order. */
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

interface Case {
  digest: Uint8Array;
  signature: Hex;
  /** The payer's address when the signature is theirs, else what inline recovery says (undefined or another address). */
  expected: string | undefined;
}

/** A fresh digest signed by one of the keys (libsecp256k1 signs with a low `s`). */
function signedCase(i: number): Case {
  const digest = randomBytes(32);
  const { signature, recid } = secp.ecdsaSign(digest, KEYS[i % KEYS.length]!);
  return { digest, signature: `${bytesToHex(signature)}${(27 + recid).toString(16)}`, expected: ADDRESSES[i % KEYS.length] };
}

/** Signatures the token refuses, each kind: high `s`, `v` 29, not hex, too short, `r` 0; and a valid one over another digest. */
function refusedCases(): Case[] {
  const good = signedCase(0);
  const r = good.signature.slice(2, 66);
  const s = BigInt(`0x${good.signature.slice(66, 130)}`);
  const high = `0x${r}${(N - s).toString(16).padStart(64, "0")}${good.signature.endsWith("1b") ? "1c" : "1b"}` as Hex;
  const other = { ...good, digest: randomBytes(32) };
  const cases = [
    { digest: good.digest, signature: high },
    { digest: good.digest, signature: `${good.signature.slice(0, 130)}1d` as Hex },
    { digest: good.digest, signature: `0x${"zz"}${good.signature.slice(4)}` as Hex },
    { digest: good.digest, signature: good.signature.slice(0, -2) as Hex },
    { digest: good.digest, signature: `0x${"00".repeat(32)}${good.signature.slice(66)}` as Hex },
    other,
  ];
  return cases.map((c) => ({ ...c, expected: recoverSigner(c.digest, c.signature) }));
}

/**
 * A pool whose paths and losses are counted; closed after each test. Its late bound is its hang bound unless a
 * test sets it (on a loaded machine a healthy worker can be late by 10 ms; these tests say where each recovery ran).
 */
function counted(options: RecoveryPoolOptions) {
  const paths: Record<RecoveryPath, number> = { inline: 0, worker: 0, starting: 0, full: 0, late: 0, rescued: 0 };
  const lost: WorkerLoss[] = [];
  const pool = new RecoveryPool({ lateMs: Number.MAX_SAFE_INTEGER, ...options, onRecovered: (path, count) => (paths[path] += count), onWorkerLost: (why) => lost.push(why) });
  pools.push(pool);
  return { pool, paths, lost };
}
const pools: RecoveryPool[] = [];

/** The next turn of the event loop (after its I/O and immediates). */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** Waits until `condition` holds (the shared wait: polls, fails loudly naming `what` past its deadline). */
const until = (condition: () => boolean, what: string) => waitUntil(what, condition, undefined, 5);

/** `count` signed cases with the faulty worker's `byte` poison second (the first of a burst runs inline, the poison goes to the worker). */
function poisoned(count: number, byte: "ee" | "dd" | "cc"): Case[] {
  const cases = Array.from({ length: count }, (_, i) => signedCase(i));
  const digest = randomBytes(32);
  const signature = poisonSignature(byte);
  return [cases[0]!, { digest, signature, expected: recoverSigner(digest, signature) }, ...cases.slice(1)];
}

/** Recoveries answered, wherever they ran (each is counted once, when its answer is given). */
const answered = (paths: Record<RecoveryPath, number>) => Object.values(paths).reduce((sum, count) => sum + count, 0);

/** Releases the stalled (0xcc) faulty workers. */
function release(): void {
  const channel = new BroadcastChannel(RELEASE_CHANNEL);
  channel.postMessage("release");
  channel.close();
}

/** Starts the pool's workers (two recoveries in one turn) and waits until `ready` of them are. */
async function warm(pool: RecoveryPool, ready = pool.size): Promise<void> {
  await Promise.all([signedCase(0), signedCase(1)].map((c) => pool.recover(c.digest, c.signature)));
  await until(() => pool.state.ready === ready, `${ready} ready worker(s)`);
  await nextTurn();
}

/** Sends every case in one turn; resolves with each answer and whether it came at once (not a promise). */
async function burst(pool: RecoveryPool, cases: Case[]) {
  const answers = cases.map((c) => pool.recover(c.digest, c.signature));
  const immediate = answers.map((answer) => typeof answer !== "object");
  return { answers: await Promise.all(answers), immediate };
}

/** Once a new worker is ready, a burst of `count` goes to it (all but the first, inline), answered right. */
async function usedAgain(pool: RecoveryPool, paths: Record<RecoveryPath, number>, count: number): Promise<void> {
  await until(() => pool.state.ready === 1, "the new worker");
  await nextTurn();
  const again = Array.from({ length: count }, (_, i) => signedCase(i));
  const worked = paths.worker;
  expect((await burst(pool, again)).answers).to.deep.equal(again.map((c) => c.expected));
  expect(paths.worker - worked).to.equal(count - 1);
}

describe("signature recovery on a pool of worker threads (chain/recovery-pool.ts)", function () {
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((pool) => pool.close()));
  });

  it("is sized to the machine: one worker per core but the calling thread's", () => {
    const { pool } = counted({});
    expect(pool.size).to.equal(Math.max(0, availableParallelism() - 1));
  });

  it("one recovery at a time: each on the calling thread, answered at once, and no worker ever started", async () => {
    const { pool, paths } = counted({ workers: 2 });
    for (let i = 0; i < 12; i++) {
      const c = signedCase(i);
      const answer = pool.recover(c.digest, c.signature);
      expect(answer).to.equal(c.expected);
      await nextTurn();
    }
    expect(paths).to.deep.equal({ inline: 12, worker: 0, starting: 0, full: 0, late: 0, rescued: 0 });
    expect(pool.state).to.deep.equal({ workers: 0, ready: 0, queued: 0 });
  });

  it("many at once: the first of the turn inline, the others on the workers; every answer the signer's, every refusal the same as inline", async () => {
    const { pool, paths } = counted({ workers: 2 });
    const threads = () => process.getActiveResourcesInfo().filter((kind) => kind === "Worker" || kind === "MessagePort").length;
    const before = threads();
    await warm(pool);
    // Its workers and their ports never keep the process alive (an embedder that forgets close() still exits).
    expect(threads()).to.equal(before);
    const counts = { ...paths };
    const cases = [...Array.from({ length: 300 }, (_, i) => signedCase(i)), ...refusedCases()];
    const { answers, immediate } = await burst(pool, cases);
    expect(answers).to.deep.equal(cases.map((c) => c.expected));
    expect(cases.slice(0, 300).every((c) => c.expected !== undefined)).to.equal(true);
    // At once: the first (inline), and the two that are not 65 bytes of hex; high s, v 29 and r 0 are the worker's to refuse.
    expect(immediate.filter(Boolean).length).to.equal(3);
    expect(paths.inline - counts.inline).to.equal(1);
    expect(paths.worker - counts.worker).to.equal(cases.length - 3);
    expect(pool.state.queued).to.equal(0);
  });

  it("before a worker is ready, recoveries run inline (starting), and the answers are the same", async () => {
    const { pool, paths } = counted({ workers: 1 });
    const cases = Array.from({ length: 20 }, (_, i) => signedCase(i));
    const { answers, immediate } = await burst(pool, cases);
    expect(answers).to.deep.equal(cases.map((c) => c.expected));
    expect(immediate.every(Boolean)).to.equal(true);
    expect(paths).to.deep.include({ inline: 1, starting: 19, worker: 0 });
    expect(pool.state.workers).to.equal(1);
  });

  it("a flood is bounded: never more than maxQueue waiting, the rest recovered at once on the calling thread (full), none lost", async () => {
    const { pool, paths } = counted({ workers: 1, maxQueue: 64 });
    await warm(pool);
    const before = { ...paths };
    const cases = Array.from({ length: 2_000 }, (_, i) => signedCase(i));
    let most = 0;
    const answers = cases.map((c) => {
      const answer = pool.recover(c.digest, c.signature);
      most = Math.max(most, pool.state.queued);
      return answer;
    });
    // The worker answers batches meanwhile (taken at each recovery): the bound holds at every step, whatever it freed.
    expect(most).to.equal(64);
    const waiting = answers.filter((answer) => typeof answer === "object").length;
    expect(await Promise.all(answers)).to.deep.equal(cases.map((c) => c.expected));
    expect(paths.worker - before.worker).to.equal(waiting);
    expect(paths.full - before.full).to.equal(2_000 - waiting - 1);
    expect(paths.full - before.full).to.be.greaterThan(0);
    expect(pool.state.queued).to.equal(0);
  });

  it("a worker that exits mid-batch: its batch recovered on the calling thread, each answer once and right; a new worker takes over", async () => {
    const { pool, paths, lost } = counted({ workers: 1, script: FAULTY });
    await warm(pool);
    const given = answered(paths);
    const all = poisoned(40, "ee");
    let settled = 0;
    const answers = all.map((c) => {
      const answer = pool.recover(c.digest, c.signature);
      return Promise.resolve(answer).then((value) => (settled++, value));
    });
    expect(await Promise.all(answers)).to.deep.equal(all.map((c) => c.expected));
    expect(settled).to.equal(all.length);
    // Each answer given once: no batch answered by both the dead worker and the rescue.
    expect(answered(paths) - given).to.equal(all.length);
    expect(lost).to.deep.equal(["exited"]);
    expect(paths.rescued).to.equal(all.length - 1);
    await usedAgain(pool, paths, 10);
    expect(pool.state).to.deep.equal({ workers: 1, ready: 1, queued: 0 });
  });

  it("a worker that hangs: after timeoutMs its batch is recovered on the calling thread, the worker ended and replaced", async () => {
    const { pool, paths, lost } = counted({ workers: 1, script: FAULTY, timeoutMs: 300 });
    await warm(pool);
    const all = poisoned(20, "dd");
    const { answers } = await burst(pool, all);
    expect(answers).to.deep.equal(all.map((c) => c.expected));
    expect(lost).to.deep.equal(["hung"]);
    expect(paths.rescued).to.equal(all.length - 1);
    await usedAgain(pool, paths, 5);
  });

  it("a worker that hangs, with the late bound: its batch answered on the calling thread after lateMs (late), the worker ended after timeoutMs, nothing answered twice", async () => {
    const { pool, paths, lost } = counted({ workers: 1, script: FAULTY, lateMs: 20, timeoutMs: 600 });
    await warm(pool);
    const given = answered(paths);
    const all = poisoned(20, "dd");
    const { answers } = await burst(pool, all);
    expect(answers).to.deep.equal(all.map((c) => c.expected));
    expect(paths.late).to.equal(all.length - 1);
    await until(() => lost.length === 1, "the hung worker's end");
    expect(lost).to.deep.equal(["hung"]);
    // Ended, its batches already answered: none is answered again.
    expect(paths.rescued).to.equal(0);
    expect(answered(paths) - given).to.equal(all.length);
    // Replaced (where its batches then run is the late bound's to say on a loaded machine: not asserted here).
    await until(() => pool.state.ready === 1, "the new worker");
  });

  it("a worker that stalls (starved of CPU): past lateMs its batches are answered on the calling thread, each once; its own answers, when they come, are dropped, and it stays in use", async () => {
    const { pool, paths, lost } = counted({ workers: 1, script: FAULTY, lateMs: 20, timeoutMs: 120_000 });
    await warm(pool);
    const given = answered(paths);
    const all = poisoned(40, "cc");
    const { answers } = await burst(pool, all);
    expect(answers).to.deep.equal(all.map((c) => c.expected));
    // The first inline; the rest (three batches, all behind the stalled one) late.
    expect(paths.late).to.equal(all.length - 1);
    expect(pool.state).to.deep.equal({ workers: 1, ready: 1, queued: 0 });
    release();
    // The worker answers the stalled batches (dropped), then takes new ones: a burst answered by it proves both
    // (its answers come in order on one port).
    const worked = paths.worker;
    let sent = 0;
    for (let round = 0; paths.worker === worked; round++) {
      if (round === 50) throw new Error("no batch answered by the released worker in 50 rounds");
      const again = Array.from({ length: 10 }, (_, i) => signedCase(i));
      expect((await burst(pool, again)).answers).to.deep.equal(again.map((c) => c.expected));
      sent += again.length;
      await nextTurn();
    }
    expect(answered(paths) - given).to.equal(all.length + sent);
    expect(lost).to.deep.equal([]);
    expect(pool.state).to.deep.equal({ workers: 1, ready: 1, queued: 0 });
  });

  it("a worker that cannot start: every recovery runs inline, answered right", async () => {
    const { pool, paths, lost } = counted({ workers: 1, script: new URL("./no-such-worker.js", import.meta.url) });
    const cases = Array.from({ length: 10 }, (_, i) => signedCase(i));
    expect((await burst(pool, cases)).answers).to.deep.equal(cases.map((c) => c.expected));
    await until(() => lost.length >= 1, "the worker's failure");
    expect((await burst(pool, cases)).answers).to.deep.equal(cases.map((c) => c.expected));
    expect(paths.worker).to.equal(0);
  });

  it("close: recoveries in flight are answered, later ones run inline, and the workers are gone", async () => {
    const { pool } = counted({ workers: 2 });
    await warm(pool);
    const cases = Array.from({ length: 50 }, (_, i) => signedCase(i));
    const answers = cases.map((c) => pool.recover(c.digest, c.signature));
    await pool.close();
    expect(await Promise.all(answers)).to.deep.equal(cases.map((c) => c.expected));
    expect(pool.state).to.deep.equal({ workers: 0, ready: 0, queued: 0 });
    const later = signedCase(7);
    expect(pool.recover(later.digest, later.signature)).to.equal(later.expected);
  });

  it("answers due keep a process alive, and it exits by itself once they came (test/helpers/pool-alone.ts)", async () => {
    const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(new URL("../helpers/pool-alone.ts", import.meta.url))], {
      env: { ...process.env, POOL_ALONE: "1" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    closeAfter("the pool-alone process", async () => void child.kill("SIGKILL"));
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
    const [code] = (await once(child, "exit")) as [number | null];
    expect(code).to.equal(0);
    expect(JSON.parse(out)).to.deep.equal({ right: 100, worker: 100 });
  });

  it("refuses a digest that is not 32 bytes (a caller's bug, not a payer's input)", () => {
    const { pool } = counted({ workers: 1 });
    expect(() => pool.recover(new Uint8Array(31), signedCase(0).signature)).to.throw(TypeError, /32 bytes/);
  });
});
