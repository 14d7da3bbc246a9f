// The facilitator on a remote RPC: `npm run bench:remote-rpc`. A local chain (automine) sits behind
// bench/rpc-proxy.ts, which adds BENCH_RPC_DELAY_MS (50) to every HTTP request and counts the JSON-RPC
// calls; one `npm run facilitator` process is pointed at the proxy, as at a hosted RPC. Fresh
// authorizations every request; with the token state index (default) or without (STATE_INDEX=false). Prints verify latency at 1 client and throughput at 64, settle latency
// one after another, and the RPC requests and calls each costs, by method.
import { Agent } from "node:http";
import os from "node:os";
import type { Address } from "viem";
import { startFacilitatorProcess } from "../src/harness/cluster.js";
import { localAccount } from "../src/harness/accounts.js";
import { post } from "./http-post.js";
import { startLatencyProxy, type ProxyCounts } from "./rpc-proxy.js";
import { signBodies } from "./sign.js";
import { percentile, startStackProcess } from "./stack.js";

const DELAY_MS = Number(process.env.BENCH_RPC_DELAY_MS ?? 50);
const VERIFY_C1 = Number(process.env.BENCH_VERIFY_C1 ?? 200);
const VERIFY_C64 = Number(process.env.BENCH_VERIFY_C64 ?? 12_000);
const SETTLES = Number(process.env.BENCH_SETTLES ?? 30);
const PAY_TO: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
// Hardhat account #17: a PUBLIC test key, LOCAL-ONLY; funded with gas by the local chain, used by no one else here.
const RELAYER = localAccount(17);

/** `bodies` through `concurrency` closed-loop clients; latencies sorted, wall time, and answers that were not what `ok` expects. */
async function drive(url: URL, path: string, bodies: readonly string[], concurrency: number, ok: (text: string) => boolean) {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  let next = 0;
  let bad = 0;
  const latencies: number[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let body = bodies[next++]; body !== undefined; body = bodies[next++]) {
        const t = performance.now();
        const { status, text } = await post(url, path, agent, body);
        latencies.push(performance.now() - t);
        if (status !== 200 || !ok(text)) bad++;
      }
    }),
  );
  const wallMs = performance.now() - started;
  agent.destroy();
  return { latencies: latencies.sort((a, b) => a - b), wallMs, bad };
}

/** RPC requests and calls per operation, the calls by method (most first). */
function perOperation(counts: ProxyCounts, operations: number): string {
  const calls = Object.values(counts.calls).reduce((a, b) => a + b, 0);
  const methods = Object.entries(counts.calls)
    .sort((a, b) => b[1] - a[1])
    .map(([method, n]) => `${method} ${(n / operations).toFixed(2)}`)
    .join(", ");
  return `${(counts.requests / operations).toFixed(2)} RPC requests (round trips), ${(calls / operations).toFixed(2)} calls: ${methods || "none"}`;
}

const chain = await startStackProcess(["--port", "0", "--testnet-rpc-port", "0", "--mainnet-rpc-port", "0", "--networks", "cronos-testnet", "--buyers", "10"]);
const net = chain.info.networks["cronos-testnet"]!;
const proxy = await startLatencyProxy(net.rpcUrl, DELAY_MS);
const facilitator = await startFacilitatorProcess({
  CRONOS_TESTNET_RPC_URL: proxy.url,
  RELAYER_PRIVATE_KEY: RELAYER.privateKey,
  FACILITATOR_NETWORKS: "cronos-testnet",
  LEDGER_FILE: ":memory:",
  METRICS: "false",
  RATE_LIMIT_VERIFY_PER_MINUTE: "0",
  RATE_LIMIT_SETTLE_PER_MINUTE: "0",
  RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "0",
  RATE_LIMIT_PUBLIC_PER_MINUTE: "0",
  MAX_CONNECTIONS_PER_CLIENT: "0",
  LOG_LEVEL: "warn",
  ...Object.fromEntries(Object.entries(process.env).filter(([name]) => /^(STATE_INDEX|HEAD_CACHE_MS|POLLING_INTERVAL_MS)$/.test(name)) as Array<[string, string]>),
});
try {
  const url = new URL(facilitator.url);
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, node ${process.version}; RPC round trip +${DELAY_MS} ms (bench/rpc-proxy.ts); automine`);
  const sign = (count: number) =>
    signBodies({
      count, buyers: net.buyers, network: "cronos-testnet", chainId: 338, token: net.token, domain: net.domain,
      payTo: PAY_TO, value: 10_000n, validBefore: BigInt(Math.floor(Date.now() / 1000) + 3_600),
    });
  const valid = (text: string) => text.startsWith('{"isValid":true');

  // Steady state: the state index (unless STATE_INDEX=false) following the chain with its backfill done, then a
  // warm-up (connections, each buyer's balance and code read once, JIT).
  if (process.env.STATE_INDEX !== "false") {
    for (;;) {
      const health = (await (await fetch(new URL("/healthcheck", url))).json()) as { results: { networks: Record<string, { stateIndex?: { state: string; backfill: { state: string } } }> } };
      const index = health.results.networks["cronos-testnet"]?.stateIndex;
      if (index?.state === "following" && index.backfill.state === "done") break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  await drive(url, "/v2/x402/verify", sign(50), 8, valid);
  // …and the many-client path warmed up too (JIT, 64 connections), as bench/verify.ts does before it measures.
  await drive(url, "/v2/x402/verify", sign(2_000), 64, valid);

  proxy.reset();
  const c1 = await drive(url, "/v2/x402/verify", sign(VERIFY_C1), 1, valid);
  const c1Counts = proxy.counts();
  console.log(`verify, c=1 (${VERIFY_C1}): p50 ${percentile(c1.latencies, 50).toFixed(1)} ms, p99 ${percentile(c1.latencies, 99).toFixed(1)} ms; not valid: ${c1.bad}`);
  console.log(`  per verify: ${perOperation(c1Counts, VERIFY_C1)}`);

  proxy.reset();
  const c64 = await drive(url, "/v2/x402/verify", sign(VERIFY_C64), 64, valid);
  const c64Counts = proxy.counts();
  console.log(`verify, c=64 (${VERIFY_C64}): ${((VERIFY_C64 / c64.wallMs) * 1000).toFixed(0)} req/s, p50 ${percentile(c64.latencies, 50).toFixed(1)} ms, p99 ${percentile(c64.latencies, 99).toFixed(1)} ms; not valid: ${c64.bad}`);
  console.log(`  per verify: ${perOperation(c64Counts, VERIFY_C64)}`);

  proxy.reset();
  const settles = await drive(url, "/v2/x402/settle", sign(SETTLES), 1, (text) => text.includes('"event":"payment.settled"'));
  const settleCounts = proxy.counts();
  console.log(`settle, one after another (${SETTLES}): median ${percentile(settles.latencies, 50).toFixed(0)} ms, p90 ${percentile(settles.latencies, 90).toFixed(0)} ms; not settled: ${settles.bad}`);
  console.log(`  per settle: ${perOperation(settleCounts, SETTLES)}`);
} finally {
  await facilitator.stop();
  await proxy.close();
  await chain.stop();
}
