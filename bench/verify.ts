// Verify throughput over HTTP on loopback: `npm run bench:verify`.
// The stack (chain + facilitator, rate limits off) runs in a child process; this process signs
// distinct authorizations up front (native secp256k1) and fires them at 1, 16 and 64 concurrent
// clients over keep-alive connections. Every request carries a fresh nonce, so the facilitator
// pays its real per-payment chain read; the chain does not move during a run.
import { Agent, request } from "node:http";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import os from "node:os";
import { bytesToHex, hexToBytes, recoverTypedDataAddress, toHex, type Address, type Hex } from "viem";
import { domainSeparator, recoverSigner, secp256k1Backend, transferAuthorizationDigest } from "../src/chain/signature.js";
import { ACCOUNT_INDEX, localAccount } from "../src/harness/accounts.js";
import { transferAuthorizationTypedData } from "../src/protocol/eip3009.js";
import { signBodies } from "./sign.js";
import { percentile, startBenchTarget } from "./stack.js";

const require = createRequire(import.meta.url);
const secp = require("secp256k1") as { ecdsaSign(msg: Uint8Array, key: Uint8Array): { signature: Uint8Array; recid: number } };

const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 5_000);
const WARMUP_MS = 1_000;
const LEVELS = (process.env.BENCH_CONCURRENCY ?? "1,16,64").split(",").map(Number);
const PAY_TO: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

function post(url: URL, agent: Agent, body: string) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path: "/v2/x402/verify", method: "POST", agent, headers: { "Content-Type": "application/json", "X402-Version": "1", "Content-Length": Buffer.byteLength(body) } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** Closed loop: `concurrency` clients, each sending its next request when its answer arrives. */
async function run(url: URL, bodies: string[], concurrency: number) {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  let next = 0;
  const latencies: number[] = [];
  let bad = 0;
  let measuring = false;
  let stopAt = Infinity;
  const worker = async () => {
    while (performance.now() < stopAt) {
      const body = bodies[next++];
      if (body === undefined) throw new Error("ran out of signed bodies: raise the pool size");
      const t = performance.now();
      const { status, text } = await post(url, agent, body);
      if (measuring) {
        latencies.push(performance.now() - t);
        if (status !== 200 || !text.startsWith('{"isValid":true')) bad++;
      }
    }
  };
  const started = performance.now();
  stopAt = started + WARMUP_MS + DURATION_MS;
  const workers = Array.from({ length: concurrency }, worker);
  await new Promise((r) => setTimeout(r, WARMUP_MS));
  measuring = true;
  const measureStart = performance.now();
  await Promise.all(workers);
  const elapsed = (performance.now() - measureStart) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return { rps: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99), n: latencies.length, bad };
}

/**
 * Open loop: requests are started on a fixed schedule (`rate` per second, checked every millisecond)
 * over at most `connections` keep-alive connections, whatever the answers' pace; a request due while
 * all connections are busy waits for one, and that wait counts in its latency (no coordinated omission).
 */
async function runOpen(url: URL, bodies: string[], rate: number, connections: number) {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const latencies: number[] = [];
  const lags: number[] = [];
  let bad = 0;
  let next = 0;
  const total = Math.floor((rate * DURATION_MS) / 1000);
  const pending: Promise<void>[] = [];
  const started = performance.now();
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const due = Math.min(total, Math.floor(((performance.now() - started) * rate) / 1000));
      while (next < due) {
        const scheduled = started + (next * 1000) / rate;
        const body = bodies[next++]!;
        lags.push(performance.now() - scheduled);
        pending.push(
          post(url, agent, body).then(({ status, text }) => {
            latencies.push(performance.now() - scheduled);
            if (status !== 200 || !text.startsWith('{"isValid":true')) bad++;
          }),
        );
      }
      if (next >= total) {
        clearInterval(timer);
        resolve();
      }
    }, 1);
  });
  await Promise.all(pending);
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  lags.sort((a, b) => a - b);
  return { rps: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99), n: latencies.length, bad, lagP99: percentile(lags, 99) };
}

/** The facilitator's own verify latency histogram (cumulative buckets, seconds → count) from /metrics. */
async function serverBuckets(metricsUrl: string): Promise<Map<number, number>> {
  const text = await (await fetch(metricsUrl)).text();
  const buckets = new Map<number, number>();
  for (const match of text.matchAll(/^x402_request_duration_seconds_bucket\{le="([^"]+)",route="verify"\} (\d+)$/gm)) {
    buckets.set(match[1] === "+Inf" ? Infinity : Number(match[1]), Number(match[2]));
  }
  return buckets;
}

/** The smallest bucket bound under which `p` % of the requests between two scrapes finished. */
function bucketQuantile(before: Map<number, number>, after: Map<number, number>, p: number): string {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const total = (after.get(Infinity) ?? 0) - (before.get(Infinity) ?? 0);
  for (const bound of bounds) {
    if ((after.get(bound)! - (before.get(bound) ?? 0)) >= (p / 100) * total) return bound === Infinity ? "> max" : `<= ${bound * 1000} ms`;
  }
  return "?";
}

function recoveryCost(token: Address) {
  const domain = { name: "Bridged USDC (Stargate)", version: "1", chainId: 338, verifyingContract: token };
  const separator = domainSeparator(domain);
  const buyer = localAccount(ACCOUNT_INDEX.firstBuyer);
  const key = hexToBytes(buyer.privateKey);
  const message = { from: buyer.address, to: PAY_TO, value: 1n, validAfter: 0n, validBefore: 2n ** 40n, nonce: toHex(new Uint8Array(32).fill(7)) };
  const digest = transferAuthorizationDigest(separator, message);
  const { signature, recid } = secp.ecdsaSign(digest, key);
  const sig = `${bytesToHex(signature)}${(27 + recid).toString(16)}` as Hex;
  const n = 20_000;
  let t = performance.now();
  for (let i = 0; i < n; i++) recoverSigner(transferAuthorizationDigest(separator, message), sig);
  const native = (performance.now() - t) / n;
  return { native, sig, domain, message };
}

/** A port free right now, for the facilitator's metrics listener (its own, not the service port). */
async function freePort(): Promise<number> {
  const probe = createServer().listen(0, "127.0.0.1");
  await new Promise((resolve) => probe.once("listening", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

const pool = Number(process.env.BENCH_POOL ?? 90_000);
const metricsPort = await freePort();
const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
const stack = await startBenchTarget(0, 8, {
  METRICS_PORT: String(metricsPort),
  // BENCH_RATE_LIMIT: a verify limit that never bites but is counted (on PostgreSQL: one UPSERT per verify).
  RATE_LIMIT_VERIFY_PER_MINUTE: process.env.BENCH_RATE_LIMIT ?? "0",
  RATE_LIMIT_SETTLE_PER_MINUTE: "0",
  // One client (this process) with up to 64 connections and more: no per-client cap.
  MAX_CONNECTIONS_PER_CLIENT: "0",
  // The facilitator's default for real networks (the local stack reads the head on every verify).
  HEAD_CACHE_MS: process.env.HEAD_CACHE_MS ?? "250",
});
try {
  const net = stack.info.networks["cronos-testnet"]!;
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}; secp256k1: ${secp256k1Backend}`);
  console.log(`ledger: ${process.env.BENCH_LEDGER ?? "memory"}; rate limit ${process.env.BENCH_RATE_LIMIT ?? "off"}; stack ready in ${stack.readyMs.toFixed(0)} ms; signing ${pool} distinct authorizations…`);
  const bodies = signBodies({
    count: pool, buyers: net.buyers, network: "cronos-testnet", chainId: 338, token: net.token, domain: net.domain,
    payTo: PAY_TO, value: 1_000n, validBefore: BigInt(Math.floor(Date.now() / 1000) + 86_400),
  });
  const url = new URL(stack.info.facilitatorUrl);
  let offset = 0;
  console.log(`verify over HTTP, ${DURATION_MS / 1000} s per level after ${WARMUP_MS / 1000} s warm-up`);
  console.log("closed loop: each client sends its next request when its answer arrives");
  console.log("concurrency  requests/s   p50 ms   p99 ms   requests  not-valid");
  for (const level of LEVELS) {
    const slice = bodies.slice(offset);
    const result = await run(url, slice, level);
    offset += result.n + 5_000;
    console.log(`${String(level).padStart(11)}  ${result.rps.toFixed(0).padStart(10)}  ${result.p50.toFixed(2).padStart(7)}  ${result.p99.toFixed(2).padStart(7)}  ${String(result.n).padStart(9)}  ${String(result.bad).padStart(9)}`);
  }
  const rates = (process.env.BENCH_OPEN_RATES ?? "1500,2000").split(",").map(Number);
  console.log("open loop over 64 connections (requests started on schedule; a wait for a free connection counts)");
  console.log("offered/s   served/s   p50 ms   p99 ms   requests  not-valid");
  for (const rate of rates) {
    const before = await serverBuckets(metricsUrl);
    const result = await runOpen(url, bodies.slice(offset), rate, 64);
    const after = await serverBuckets(metricsUrl);
    offset += result.n + 5_000;
    console.log(
      `${String(rate).padStart(9)}  ${result.rps.toFixed(0).padStart(9)}  ${result.p50.toFixed(2).padStart(7)}  ${result.p99.toFixed(2).padStart(7)}  ${String(result.n).padStart(9)}  ${String(result.bad).padStart(9)}` +
        `   (in the facilitator, handler only: p50 ${bucketQuantile(before, after, 50)}, p99 ${bucketQuantile(before, after, 99)}; generator's own send lag p99 ${result.lagP99.toFixed(1)} ms)`,
    );
  }
  const cost = recoveryCost(net.token);
  const m = 200;
  const t = performance.now();
  for (let i = 0; i < m; i++) await recoverTypedDataAddress({ ...transferAuthorizationTypedData(cost.domain, cost.message), signature: cost.sig });
  const viemMs = (performance.now() - t) / m;
  console.log(`per-signature cost (EIP-712 digest + recovery): native ${(cost.native * 1000).toFixed(0)} µs; viem recoverTypedDataAddress ${(viemMs * 1000).toFixed(0)} µs`);
} finally {
  await stack.stop();
}
