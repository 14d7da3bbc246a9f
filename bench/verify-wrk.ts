// `npm run bench:verify`: verify's throughput and latency measured with wrk (a C load generator that costs
// little), against standalone processes on one local chain (docs/benchmarks.md, "Verify with wrk"):
//  - the production facilitator: the CLI's `cronos-x402 facilitator` (scripts/facilitator.ts) as a process of
//    its own, on an embedded ledger file, with its production defaults but rate limits off;
//  - bare Express answering verify's valid answer as a constant (bench/bare-express.ts);
//  - the peer: Coinbase's `@x402/evm` exact EVM facilitator (bench/reference-facilitator.ts).
// Every request carries an authorization never sent before (bench/verify-bodies.lua reads pre-signed bodies,
// one a line, each sent once). Per concurrency level, BENCH_ROUNDS rounds of every target in turn (A/B/A/B);
// the load average before each run; beside wrk's p50/p99 the facilitator's own, from its latency histogram;
// each server's CPU per request from /proc (main thread / all threads: what the load average does not change
// much). BENCH_TARGETS=kit-before,kit,bare,peer with BENCH_BEFORE_ROOT (a checkout of an earlier commit with
// its node_modules) measures that commit's facilitator in the same run.
// wrk is installed with apt-get when missing (Debian package `wrk`). The Node generator's open loop and the
// verify budget stay in `npm run bench:verify-node` (bench/verify.ts).
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Address } from "viem";
import { keccakBackend } from "../src/chain/keccak.js";
import { secp256k1Backend } from "../src/chain/signature.js";
import { localAccount } from "../src/harness/accounts.js";
import { startLocalChain } from "../src/harness/chain.js";
import { signBodies } from "./sign.js";
import { bucketQuantile, freePort, indexReady, processCpu, sample, scrape, serverBuckets, startServer } from "./verify-common.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 2);
const LEVELS = (process.env.BENCH_CONCURRENCY ?? "1,64").split(",").map(Number);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const TARGETS = (process.env.BENCH_TARGETS ?? "kit,bare,peer").split(",").filter(Boolean);
const THREADS = Number(process.env.BENCH_WRK_THREADS ?? 1);
/** Bodies signed per run: enough for this many requests/s over the run (the peer gets a tenth). */
const MAX_RPS = Number(process.env.BENCH_MAX_RPS ?? 12_000);
/** The facilitator's own variables on top of the bench's (e.g. RECOVERY_WORKERS=0 for the pool's "before"). */
const KIT_ENV = Object.fromEntries((process.env.BENCH_KIT_ENV ?? "").split(",").filter(Boolean).map((pair) => pair.split("=") as [string, string]));
const PAY_TO: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const LUA = join(ROOT, "bench", "verify-bodies.lua");

interface Target {
  /** kit, kit-before, bare or peer. */
  key: string;
  name: string;
  url: string;
  dialect: "cronos" | "x402v2";
  /** Requests/s at most, for the bodies to sign. */
  maxRps: number;
  metricsUrl?: string;
  /** The server's process, for its CPU time (read from /proc). */
  pid: number;
}

interface WrkResult {
  requests: number;
  durationUs: number;
  errors: Record<"connect" | "read" | "write" | "status" | "timeout", number>;
  latencyUs: { p50: number; p90: number; p99: number; max: number; mean: number };
  valid: number;
  invalid: number;
  sent: number;
  available: number;
  exhausted: number;
  firstInvalid: string;
}

/** wrk on PATH, or installed from Debian's packages (as .ci/run installs Chromium). */
function ensureWrk(): string {
  const found = spawnSync("sh", ["-c", "command -v wrk"], { encoding: "utf8" }).stdout.trim();
  if (found) return found;
  console.log("wrk is missing: installing it (apt-get install -y wrk)");
  const install = spawnSync("sh", ["-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk"], { stdio: "inherit" });
  const installed = spawnSync("sh", ["-c", "command -v wrk"], { encoding: "utf8" }).stdout.trim();
  if (install.status !== 0 || !installed) throw new Error("wrk could not be installed: install the Debian package wrk (apt-get install wrk), or put wrk on PATH");
  return installed;
}

async function runWrk(wrk: string, target: Target, bodiesFile: string, connections: number, seconds: number): Promise<WrkResult> {
  const threads = Math.min(THREADS, connections);
  const child = spawn(
    wrk,
    ["-t", String(threads), "-c", String(connections), "-d", `${seconds}s`, "--timeout", "10s", "-s", LUA, target.url, "--", bodiesFile, String(threads), target.dialect === "cronos" ? "1" : "-"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  const [code] = (await once(child, "exit")) as [number | null];
  const line = out.split("\n").find((l) => l.startsWith("WRK_JSON "));
  if (code !== 0 || !line) throw new Error(`wrk exited ${code}: ${out}`);
  return JSON.parse(line.slice("WRK_JSON ".length)) as WrkResult;
}

/** Where the facilitator's recoveries ran between two pages (path: count), and its state reads not from the index. */
function where(before: string, after: string): string {
  const delta = (series: string) => (sample(after, series) || 0) - (sample(before, series) || 0);
  const paths: Array<readonly [string, number]> = ["inline", "worker", "starting", "full", "late", "rescued"].map((path) => [path, delta(`x402_signature_recoveries_total{path="${path}"}`)] as const).filter(([, n]) => n > 0);
  const batches = delta("x402_recovery_batches_total");
  if (batches > 0) paths.push(["per batch", Math.round((10 * delta('x402_signature_recoveries_total{path="worker"}')) / batches) / 10]);
  const chain = delta('x402_verify_state_source_total{network="cronos-testnet",source="chain"}');
  return `${paths.map(([path, n]) => `${path} ${n}`).join(", ") || "none"}${chain > 0 ? `; state read from the chain ${chain}` : ""}`;
}

const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits }) : "-");
const load = () => os.loadavg().map((l) => l.toFixed(1)).join(" ");

console.log(
  `machine: ${os.availableParallelism()} x ${os.cpus()[0]?.model}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}; ` +
    `secp256k1 ${secp256k1Backend}, keccak ${keccakBackend}; load average ${load()}`,
);
const wrk = ensureWrk();
console.log(`${spawnSync(wrk, ["-v"], { encoding: "utf8" }).stdout.split("\n")[0]}; ${THREADS} thread(s); ${DURATION_S} s per run after ${WARMUP_S} s of warm-up; ${ROUNDS} round(s)`);

const dir = mkdtempSync(join(os.tmpdir(), "x402-bench-verify-"));
const chain = await startLocalChain({ network: "cronos-testnet", port: 0, buyers: 8 });
const stops: Array<() => Promise<unknown>> = [];
try {
  const targets: Target[] = [];
  for (const name of TARGETS) {
    if (name === "kit" || name === "kit-before") {
      const root = name === "kit" ? ROOT : process.env.BENCH_BEFORE_ROOT;
      if (!root) throw new Error("BENCH_TARGETS kit-before: BENCH_BEFORE_ROOT names a checkout of the earlier commit (with node_modules)");
      targets.push({ key: name, ...(await startKit(root, name === "kit" ? "kit" : "kit before")) });
    } else if (name === "bare") {
      const server = await startServer("bench/bare-express.ts");
      stops.push(() => server.stop());
      targets.push({ key: name, name: "bare Express, constant answer", url: new URL("/v2/x402/verify", server.url).href, dialect: "cronos", maxRps: MAX_RPS, pid: server.pid });
    } else if (name === "peer") {
      const server = await startServer("bench/reference-facilitator.ts", { BENCH_REFERENCE_RPC_URL: chain.rpcUrl });
      stops.push(() => server.stop());
      targets.push({ key: name, name: "peer: @x402/evm 2.27 facilitator (x402 v2)", url: new URL("/verify", server.url).href, dialect: "x402v2", maxRps: Math.ceil(MAX_RPS / 10), pid: server.pid });
    } else throw new Error(`BENCH_TARGETS: unknown target "${name}" (kit, kit-before, bare, peer)`);
  }

  /** The CLI's production facilitator from the sources at `root` (`cronos-x402 facilitator`), started and ready. */
  async function startKit(root: string, label: string): Promise<Omit<Target, "key">> {
    const [port, metricsPort] = [await freePort(), await freePort()];
    const env = {
      PATH: process.env.PATH ?? "",
      PORT: String(port),
      METRICS_PORT: String(metricsPort),
      CRONOS_TESTNET_RPC_URL: chain.rpcUrl,
      // Hardhat's PUBLIC test key #9 (LOCAL-ONLY): verify sends nothing with it.
      RELAYER_PRIVATE_KEY: localAccount(9).privateKey,
      LEDGER_FILE: join(dir, `ledger-${label.replace(/\W/g, "-")}.db`),
      RATE_LIMIT_VERIFY_PER_MINUTE: "0",
      RATE_LIMIT_SETTLE_PER_MINUTE: "0",
      MAX_CONNECTIONS_PER_CLIENT: "0",
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "info",
      ...KIT_ENV,
    };
    // The CLI's production entry from the sources (`cronos-x402 facilitator`); its JSON log lines go nowhere.
    const nodeOptions = process.env.BENCH_KIT_NODE_OPTIONS ? process.env.BENCH_KIT_NODE_OPTIONS.split(" ") : [];
    const child = spawn(process.execPath, [...nodeOptions, "--import", "tsx", "scripts/facilitator.ts"], { cwd: root, env, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = once(child, "exit");
    stops.push(async () => {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    });
    const url = `http://127.0.0.1:${port}`;
    const deadline = performance.now() + 120_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the facilitator exited ${child.exitCode}: ${stderr}`);
      if (performance.now() > deadline) throw new Error(`the facilitator did not answer in 120 s: ${stderr}`);
      const up = await fetch(`${url}/healthcheck`).then((r) => r.ok, () => false);
      if (up) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await indexReady(url);
    return { name: `${label}: cronos-x402 facilitator (LOG_LEVEL=${env.LOG_LEVEL}${Object.keys(KIT_ENV).length ? `, ${process.env.BENCH_KIT_ENV}` : ""})`, url: `${url}/v2/x402/verify`, dialect: "cronos", maxRps: MAX_RPS, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`, pid: child.pid! };
  }

  let file = 0;
  /** A file of `count` fresh bodies, one a line. */
  const bodiesFile = (target: Target, count: number) => {
    const bodies = signBodies({
      count, buyers: chain.buyers, network: "cronos-testnet", chainId: chain.chainId, token: chain.token, domain: chain.domain,
      payTo: PAY_TO, value: 1_000n, validBefore: BigInt(Math.floor(Date.now() / 1000) + 86_400), dialect: target.dialect,
    });
    const path = join(dir, `bodies-${file++}.txt`);
    writeFileSync(path, `${bodies.join("\n")}\n`);
    return path;
  };

  console.log("\nclosed loop with wrk: each connection sends its next request when its answer arrives; every body a fresh authorization, sent once");
  console.log("clients round  target                                                    load avg 1/5/15   requests/s   p50 ms   p99 ms   facilitator p50 / p99 ms   CPU µs/req main/all   not valid");
  const summary: string[] = [];
  for (const level of LEVELS) {
    for (let round = 1; round <= ROUNDS; round++) {
      const rates = new Map<Target, number>();
      for (const target of targets) {
        const warmup = bodiesFile(target, Math.ceil(target.maxRps * WARMUP_S));
        const measured = bodiesFile(target, Math.ceil(target.maxRps * DURATION_S));
        await runWrk(wrk, target, warmup, level, WARMUP_S);
        rmSync(warmup);
        const loadBefore = load();
        const before = target.metricsUrl ? await serverBuckets(target.metricsUrl) : undefined;
        const pageBefore = target.metricsUrl ? await scrape(target.metricsUrl) : "";
        const cpuBefore = processCpu(target.pid);
        const result = await runWrk(wrk, target, measured, level, DURATION_S);
        const cpuAfter = processCpu(target.pid);
        const after = target.metricsUrl ? await serverBuckets(target.metricsUrl) : undefined;
        const pageAfter = target.metricsUrl ? await scrape(target.metricsUrl) : "";
        rmSync(measured);
        const rps = result.requests / (result.durationUs / 1e6);
        rates.set(target, rps);
        const own = before && after ? `${fmt(bucketQuantile(before, after, 0.5), 2)} / ${fmt(bucketQuantile(before, after, 0.99), 2)}` : "";
        const errors = Object.entries(result.errors).filter(([, n]) => n > 0).map(([kind, n]) => `${kind} ${n}`).join(", ");
        const cpu = cpuBefore && cpuAfter ? `${fmt((cpuAfter.mainThread - cpuBefore.mainThread) / result.requests)} / ${fmt((cpuAfter.process - cpuBefore.process) / result.requests)}` : "-";
        const notes = [
          target.metricsUrl ? `recoveries ${where(pageBefore, pageAfter)}` : "",result.exhausted ? `RAN OUT OF BODIES (${result.available}): raise BENCH_MAX_RPS` : "", errors ? `socket errors: ${errors}` : "", result.invalid ? `e.g. ${result.firstInvalid}` : ""].filter(Boolean).join("; ");
        console.log(
          `${String(level).padStart(7)} ${String(round).padStart(5)}  ${target.name.padEnd(56)}  ${loadBefore.padStart(15)}  ${fmt(rps).padStart(11)}  ${fmt(result.latencyUs.p50 / 1000, 2).padStart(7)}  ${fmt(result.latencyUs.p99 / 1000, 2).padStart(7)}  ${own.padStart(25)}  ${cpu.padStart(11)}  ${String(result.invalid).padStart(9)}${notes ? `  ${notes}` : ""}`,
        );
      }
      const [kit, before, bare, peer] = ["kit", "kit-before", "bare", "peer"].map((key) => [...rates].find(([t]) => t.key === key)?.[1]);
      const ratios = [
        kit && bare ? `kit / bare Express ${fmt((100 * kit) / bare)} %` : "",
        kit && peer ? `kit / peer ${fmt(kit / peer, 1)}x` : "",
        kit && before ? `kit / kit before ${fmt((100 * kit) / before)} %` : "",
        before && bare ? `kit before / bare Express ${fmt((100 * before) / bare)} %` : "",
      ].filter(Boolean).join("; ");
      if (ratios) {
        console.log(`${" ".repeat(15)}${ratios}`);
        summary.push(`c=${level} round ${round}: ${ratios}`);
      }
    }
  }
  console.log(`\n${summary.join("\n")}\nload average at the end: ${load()}`);
} finally {
  for (const stop of stops.reverse()) await stop();
  await chain.stop();
  rmSync(dir, { recursive: true, force: true });
}
