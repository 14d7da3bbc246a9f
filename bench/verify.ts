// Verify over HTTP on loopback with a Node load generator: `npm run bench:verify-node` (docs/benchmarks.md,
// issue 34's section). Throughput against standalone processes is `npm run bench:verify` (bench/verify-wrk.ts, wrk);
// this one keeps what only a generator in Node gives: the budget by stage and the open loop.
// Every request carries an authorization never verified before (BENCH_CYCLE=400: the old benchmark's 400
// bodies cycled). In one run, each in its own process on the same local chain:
//  1. the verify budget: the local stack with METRICS_VERIFY_STAGES=true, CPU µs per verify by stage at
//     16 clients, per dialect, and the event loop's delay and GC pauses under the open loop;
//  2. closed loops at 1, 16 and 64 clients of bare Express (the same body, a constant answer), the kit
//     (stage timing off) in both dialects and Coinbase's `@x402/evm` facilitator (bench/reference-facilitator.ts),
//     with the kit's own p50/p99 from its latency histogram beside the generator's, and the ratios;
//  3. the open loop (BENCH_OPEN_RATES, default 1,000/s) on the kit;
//  and between 1 and 2, tracing off vs on (BENCH_TRACING=false skips it): the kit at 16 clients without
//  OTEL_* and with spans exported over OTLP/HTTP to a sink in this process, CPU per verify on both.
import os from "node:os";
import type { Address } from "viem";
import { keccakBackend } from "../src/chain/keccak.js";
import { secp256k1Backend } from "../src/chain/signature.js";
import { VERIFY_STAGES, type VerifyStage } from "../src/facilitator/metrics/stages.js";
import { startOtlpSink } from "./otlp-sink.js";
import { signBodies } from "./sign.js";
import { freePort, indexReady, sample, scrape, startServer, type ServerUsage } from "./verify-common.js";
import { startBenchTarget, type StackInfo } from "./stack.js";
import { closedLoop, DURATION_MS, openLoop, WARMUP_MS, type Dialect, type Target } from "./verify-loops.js";

const BUDGET_MS = Number(process.env.BENCH_BUDGET_MS ?? 4_000);
const LEVELS = (process.env.BENCH_CONCURRENCY ?? "1,16,64").split(",").map(Number);
const OPEN_RATES = (process.env.BENCH_OPEN_RATES ?? "1000").split(",").filter(Boolean).map(Number);
const TARGETS = (process.env.BENCH_TARGETS ?? "bare,kit,kit-v2,reference").split(",").filter(Boolean);
/** 0: every request a fresh authorization; n: n bodies cycled (the old benchmark: 400). */
const CYCLE = Number(process.env.BENCH_CYCLE ?? 0);
/** Bodies signed per closed-loop run: enough for this many requests/s over the warm-up and the run. */
const MAX_RPS = Number(process.env.BENCH_MAX_RPS ?? 6_000);
const PAY_TO: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

// The generator collects its garbage (the last run's bodies and answers) before each run, so that its own

/** The bodies a run sends: `count` fresh ones, or (BENCH_CYCLE) the cycled pool. */
function bodiesFor(pools: Record<Dialect, () => string[]>, dialect: Dialect, count: number, net: StackInfo["networks"][string]): (i: number) => string | undefined {
  if (CYCLE > 0) {
    const pool = pools[dialect]();
    return (i) => pool[i % pool.length];
  }
  const bodies = sign(net, dialect, count);
  return (i) => bodies[i];
}

function sign(net: StackInfo["networks"][string], dialect: Dialect, count: number): string[] {
  return signBodies({
    count, buyers: net.buyers, network: "cronos-testnet", chainId: 338, token: net.token, domain: net.domain,
    payTo: PAY_TO, value: 1_000n, validBefore: BigInt(Math.floor(Date.now() / 1000) + 86_400), dialect,
  });
}

/** `bodies`' first `n`, over and over. */
function cycle(bodies: (i: number) => string | undefined, n: number): (i: number) => string | undefined {
  return (i) => bodies(i % n);
}

function serverGc(before: ServerUsage, after: ServerUsage): string {
  return (["minor", "major"] as const)
    .filter((kind) => after.gc[kind].count > before.gc[kind].count)
    .map((kind) => `${kind} ${after.gc[kind].count - before.gc[kind].count} (${fmt(after.gc[kind].ms - before.gc[kind].ms, 1)} ms, longest so far ${fmt(after.gc[kind].longestMs, 1)} ms)`)
    .join("; ") || "none";
}

const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : "-");
const LABELS: Record<VerifyStage, string> = {
  edge: "request id, Content-Type",
  rateLimit: "rate limiting",
  bodyParse: "body read + JSON.parse",
  schema: "dialect + body schema",
  headerDecode: "payer's header/payload decode",
  checks: "scheme/network/asset/amount/payee",
  typedDataHash: "EIP-712 digest",
  recovery: "signer recovery",
  indexRead: "state index read",
  ledgerReads: "ledger/identifier reads",
  answer: "answer's JSON and headers",
  write: "res.end (socket write)",
  metrics: "metrics, log line, dashboard feed",
};

/** The stages' µs per verify and the verifies since the previous scrape, and the CPU times so far, from one /metrics page. */
function budgetOf(page: string) {
  const stages = Object.fromEntries(VERIFY_STAGES.map((stage) => [stage, sample(page, `x402_verify_stage_microseconds{stage="${stage}"}`)])) as Record<VerifyStage, number>;
  return {
    stages,
    verifies: sample(page, 'x402_verify_stage_verifies{kind="answered"}'),
    waited: sample(page, 'x402_verify_stage_verifies{kind="waited"}'),
    thread: sample(page, "x402_main_thread_cpu_microseconds"),
    process: sample(page, "process_cpu_seconds_total") * 1e6,
  };
}

/** The GC pauses between two pages, by kind: count, total ms, and the smallest bucket holding the longest. */
function gcBetween(before: string, after: string): string {
  const parts: string[] = [];
  for (const kind of ["minor", "major", "incremental", "weakcb"]) {
    const count = sample(after, `nodejs_gc_duration_seconds_count{kind="${kind}"}`) - sample(before, `nodejs_gc_duration_seconds_count{kind="${kind}"}`);
    if (!(count > 0)) continue;
    const sum = sample(after, `nodejs_gc_duration_seconds_sum{kind="${kind}"}`) - sample(before, `nodejs_gc_duration_seconds_sum{kind="${kind}"}`);
    let longest = "> 5 s";
    for (const bound of ["0.001", "0.01", "0.1", "1", "2", "5"]) {
      const below = sample(after, `nodejs_gc_duration_seconds_bucket{le="${bound}",kind="${kind}"}`) - sample(before, `nodejs_gc_duration_seconds_bucket{le="${bound}",kind="${kind}"}`);
      if (below === count) {
        longest = `<= ${Number(bound) * 1000} ms`;
        break;
      }
    }
    parts.push(`${kind} ${count} (${fmt(sum * 1000, 1)} ms, longest ${longest})`);
  }
  return parts.join("; ") || "none";
}

console.log(
  `machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}; ` +
    `load average ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}; secp256k1 ${secp256k1Backend}, keccak ${keccakBackend}`,
);
console.log(`bodies: ${CYCLE > 0 ? `${CYCLE} cycled (BENCH_CYCLE)` : "every request a fresh authorization"}; ${DURATION_MS / 1000} s per run after ${WARMUP_MS / 1000} s warm-up`);

const stackEnv = (metricsPort: number, stages: boolean): Record<string, string> => ({
  METRICS_PORT: String(metricsPort),
  METRICS_VERIFY_STAGES: String(stages),
  // BENCH_RATE_LIMIT: a verify limit that never bites but is counted.
  RATE_LIMIT_VERIFY_PER_MINUTE: process.env.BENCH_RATE_LIMIT ?? "0",
  RATE_LIMIT_SETTLE_PER_MINUTE: "0",
  MAX_CONNECTIONS_PER_CLIENT: "0",
  // As a facilitator runs by default (`npm run facilitator`): the local stack's page for people watching is off.
  DASHBOARD: process.env.BENCH_DASHBOARD ?? "false",
  // The facilitator's default for real networks (the local stack reads the head on every verify).
  HEAD_CACHE_MS: process.env.HEAD_CACHE_MS ?? "250",
});

// --- 1. The budget: stage timing on ---
{
  const metricsPort = await freePort();
  const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
  const stack = await startBenchTarget(0, 8, stackEnv(metricsPort, true));
  try {
    const net = stack.info.networks["cronos-testnet"]!;
    await indexReady(stack.info.facilitatorUrl);
    const url = new URL(stack.info.facilitatorUrl);
    const pools = { cronos: () => sign(net, "cronos", CYCLE), x402v2: () => sign(net, "x402v2", CYCLE) };
    console.log(`\nverify budget (METRICS_VERIFY_STAGES=true, 16 clients, ${BUDGET_MS / 1000} s per dialect; µs per verify on the main thread: stages timed, the trimmed mean; CPU times from the OS)`);
    const columns: Array<{ dialect: Dialect; budget: ReturnType<typeof budgetOf>; rps: number }> = [];
    for (const dialect of ["cronos", "x402v2"] as const) {
      const target: Target = { name: `kit (${dialect})`, url, path: "/v2/x402/verify", dialect };
      const count = Math.ceil((MAX_RPS * (WARMUP_MS + BUDGET_MS)) / 1000);
      await closedLoop(target, bodiesFor(pools, dialect, Math.ceil(count / 2), net), 16, 1_000);
      const before = budgetOf(await scrape(metricsUrl));
      const result = await closedLoop(target, bodiesFor(pools, dialect, count, net), 16, BUDGET_MS);
      const after = budgetOf(await scrape(metricsUrl));
      const { verifies } = after;
      const budget = {
        stages: after.stages,
        verifies,
        waited: after.waited,
        thread: (after.thread - before.thread) / verifies,
        process: (after.process - before.process) / verifies,
      };
      columns.push({ dialect, budget, rps: result.rps });
      if (result.bad) console.log(`  ${dialect}: ${result.bad} answers not valid, e.g. ${result.firstBad}`);
    }
    console.log(`${"stage".padEnd(36)}${columns.map((c) => c.dialect.padStart(10)).join("")}`);
    for (const stage of VERIFY_STAGES) console.log(`${LABELS[stage].padEnd(36)}${columns.map((c) => fmt(c.budget.stages[stage], 1).padStart(10)).join("")}`);
    const sum = (c: (typeof columns)[number]) => VERIFY_STAGES.reduce((total, s) => total + c.budget.stages[s], 0);
    console.log(`${"sum of the stages".padEnd(36)}${columns.map((c) => fmt(sum(c), 1).padStart(10)).join("")}`);
    console.log(`${"rest: Node HTTP, Express routing, GC".padEnd(36)}${columns.map((c) => fmt(c.budget.thread - sum(c), 1).padStart(10)).join("")}`);
    console.log(`${"main thread CPU per verify".padEnd(36)}${columns.map((c) => fmt(c.budget.thread, 1).padStart(10)).join("")}`);
    console.log(`${"process CPU per verify (all threads)".padEnd(36)}${columns.map((c) => fmt(c.budget.process, 1).padStart(10)).join("")}`);
    console.log(`${"requests/s while timed".padEnd(36)}${columns.map((c) => fmt(c.rps).padStart(10)).join("")}`);
    console.log(`${"state read not from memory (verifies)".padEnd(36)}${columns.map((c) => String(c.budget.waited).padStart(10)).join("")}`);
    // Bare Express at the same 16 clients: its main thread's CPU per request, the budget's floor.
    const bareServer = await startServer("bench/bare-express.ts");
    try {
      const bare: Target = { name: "bare", url: bareServer.url, path: "/v2/x402/verify", dialect: "cronos" };
      const pool = sign(net, "cronos", 5_000);
      await closedLoop(bare, cycle((i) => pool[i], pool.length), 16, 1_000);
      const before = await bareServer.usage();
      const result = await closedLoop(bare, cycle((i) => pool[i], pool.length), 16, BUDGET_MS);
      const after = await bareServer.usage();
      // The CPU reading spans the run's warm-up too: its requests at the measured rate.
      const perRequest = (after.mainThreadMicros - before.mainThreadMicros) / ((result.rps * (WARMUP_MS + BUDGET_MS)) / 1000);
      console.log(
        `bare Express, same body, 16 clients: main thread CPU per request ${fmt(perRequest, 1)} µs, ${fmt(result.rps)} requests/s ` +
          `(the kit's per verify: ${columns.map((c) => `${c.dialect} ${fmt(c.budget.thread / perRequest, 2)}x that`).join(", ")})`,
      );
    } finally {
      await bareServer.stop();
    }

    // The tail: the event loop's delay and GC pauses in the facilitator's process under the open loop.
    for (const rate of OPEN_RATES) {
      const target: Target = { name: "kit", url, path: "/v2/x402/verify", dialect: "cronos", metricsUrl };
      const before = await scrape(metricsUrl);
      const result = await openLoop(target, bodiesFor(pools, "cronos", Math.ceil((rate * DURATION_MS) / 1000) + 10, net), rate, 64);
      const after = await scrape(metricsUrl);
      console.log(
        `open loop ${rate}/s with stage timing on: p50 ${fmt(result.p50, 2)} ms, p99 ${fmt(result.p99, 2)} ms, max ${fmt(result.max, 1)} ms; ` +
          `event loop delay p99 ${fmt(sample(after, "nodejs_eventloop_lag_p99_seconds") * 1000, 1)} ms, max ${fmt(sample(after, "nodejs_eventloop_lag_max_seconds") * 1000, 1)} ms; ` +
          `GC ${gcBetween(before, after)}; heap used ${fmt(sample(after, "nodejs_heap_size_used_bytes") / 2 ** 20)} MiB; generator's send lag p99 ${fmt(result.lagP99, 1)} ms`,
      );
    }
    // The same open loop on bare Express, for its GC pauses beside the facilitator's on this machine now.
    if (OPEN_RATES.length) {
      const bare = await startServer("bench/bare-express.ts");
      try {
        const target: Target = { name: "bare", url: bare.url, path: "/v2/x402/verify", dialect: "cronos" };
        const pool = sign(net, "cronos", 5_000);
        for (const rate of OPEN_RATES) {
          const before = await bare.usage();
          const result = await openLoop(target, cycle((i) => pool[i], pool.length), rate, 64);
          const after = await bare.usage();
          console.log(
            `open loop ${rate}/s on bare Express: p50 ${fmt(result.p50, 2)} ms, p99 ${fmt(result.p99, 2)} ms, max ${fmt(result.max, 1)} ms; ` +
              `CPU ${fmt((after.mainThreadMicros - before.mainThreadMicros) / result.n, 1)} µs per request; GC ${serverGc(before, after)}; generator's send lag p99 ${fmt(result.lagP99, 1)} ms`,
          );
        }
      } finally {
        await bare.stop();
      }
    }
  } finally {
    await stack.stop();
  }
}

// --- Tracing off vs on: the same stack twice, back to back, stage timing on for the CPU readings ---
if (process.env.BENCH_TRACING !== "false") {
  const sink = await startOtlpSink();
  console.log(
    `\ntracing off vs on (16 clients, cronos dialect, ${BUDGET_MS / 1000} s each; on: OTEL_TRACES_EXPORTER=otlp to a sink in this process, the SDK's other defaults)`,
  );
  console.log("tracing   requests/s   p50 ms   p99 ms   main thread CPU µs/verify   process CPU µs/verify   spans per traced verify");
  const thread: number[] = [];
  try {
    for (const on of [false, true]) {
      const metricsPort = await freePort();
      const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
      const otel: Record<string, string> = on ? { OTEL_TRACES_EXPORTER: "otlp", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: sink.url } : {};
      const stack = await startBenchTarget(0, 8, { ...stackEnv(metricsPort, true), ...otel });
      try {
        const net = stack.info.networks["cronos-testnet"]!;
        await indexReady(stack.info.facilitatorUrl);
        const target: Target = { name: "kit", url: new URL(stack.info.facilitatorUrl), path: "/v2/x402/verify", dialect: "cronos" };
        const pools = { cronos: () => sign(net, "cronos", CYCLE), x402v2: () => sign(net, "x402v2", CYCLE) };
        const count = Math.ceil((MAX_RPS * (WARMUP_MS + BUDGET_MS)) / 1000);
        await closedLoop(target, bodiesFor(pools, "cronos", Math.ceil(count / 2), net), 16, 1_000);
        const before = budgetOf(await scrape(metricsUrl));
        const result = await closedLoop(target, bodiesFor(pools, "cronos", count, net), 16, BUDGET_MS);
        const after = budgetOf(await scrape(metricsUrl));
        thread.push((after.thread - before.thread) / after.verifies);
        // The batch processor exports every 5 s (or at 512 spans): what it holds is in once the stack has stopped.
        await stack.stop();
        const { spans, verifies } = sink.counts();
        console.log(
          `${(on ? "on" : "off").padEnd(8)}  ${fmt(result.rps).padStart(10)}  ${fmt(result.p50, 2).padStart(7)}  ${fmt(result.p99, 2).padStart(7)}  ${fmt(thread.at(-1)!, 1).padStart(26)}  ` +
            `${fmt((after.process - before.process) / after.verifies, 1).padStart(22)}  ${on ? fmt(spans / verifies, 2).padStart(24) : `${String(spans).padStart(20)} sent`}` +
            (result.bad ? `  (${result.bad} not valid, e.g. ${result.firstBad})` : ""),
        );
      } finally {
        await stack.stop();
      }
    }
    console.log(`tracing's cost per verify on the main thread: ${fmt(thread[1]! - thread[0]!, 1)} µs (${fmt((100 * (thread[1]! - thread[0]!)) / thread[0]!, 1)} %)`);
  } finally {
    await sink.close();
  }
}

// --- 2. and 3. Throughput and the tail: stage timing off (BENCH_TARGETS= empty: the budget alone) ---
if (TARGETS.length === 0) process.exit(0);
const metricsPort = await freePort();
const metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
const stack = await startBenchTarget(0, 8, stackEnv(metricsPort, false));
const servers: Array<{ stop(): Promise<void> }> = [];
try {
  const net = stack.info.networks["cronos-testnet"]!;
  await indexReady(stack.info.facilitatorUrl);
  const kitUrl = new URL(stack.info.facilitatorUrl);
  const targets: Target[] = [];
  for (const name of TARGETS) {
    if (name === "bare") {
      const server = await startServer("bench/bare-express.ts");
      servers.push(server);
      targets.push({ name: "bare Express, constant answer (cronos body)", url: server.url, path: "/v2/x402/verify", dialect: "cronos" });
    } else if (name === "kit") targets.push({ name: "kit verify (cronos)", url: kitUrl, path: "/v2/x402/verify", dialect: "cronos", metricsUrl });
    else if (name === "kit-v2") targets.push({ name: "kit verify (x402 v2)", url: kitUrl, path: "/v2/x402/verify", dialect: "x402v2", metricsUrl });
    else if (name === "reference") {
      const server = await startServer("bench/reference-facilitator.ts", { BENCH_REFERENCE_RPC_URL: net.rpcUrl });
      servers.push(server);
      targets.push({ name: "@x402/evm 2.27 facilitator (x402 v2)", url: server.url, path: "/verify", dialect: "x402v2" });
    } else throw new Error(`BENCH_TARGETS: unknown target "${name}" (bare, kit, kit-v2, reference)`);
  }
  const signed = CYCLE > 0 ? { cronos: sign(net, "cronos", CYCLE), x402v2: sign(net, "x402v2", CYCLE) } : undefined;
  const pools = { cronos: () => signed!.cronos, x402v2: () => signed!.x402v2 };
  const bodies = (dialect: Dialect, count: number) => bodiesFor(pools, dialect, count, net);

  console.log("\nclosed loop: each client sends its next request when its answer arrives (in the facilitator: its histogram, interpolated)");
  console.log("clients  target                                         requests/s   p50 ms   p99 ms  (facilitator p50 / p99 ms)  not valid");
  for (const level of LEVELS) {
    const rates = new Map<string, number>();
    for (const target of targets) {
      const count = Math.ceil((MAX_RPS * (WARMUP_MS + DURATION_MS)) / 1000);
      // Bare Express checks nothing: 5,000 bodies cycled serve it. The facilitators get fresh ones (the reference's at its pace).
      const source = target.name.startsWith("bare") ? cycle(bodies(target.dialect, 5_000), 5_000) : bodies(target.dialect, target.url === kitUrl ? count : Math.ceil(count / 5));
      const result = await closedLoop(target, source, level);
      rates.set(target.name, result.rps);
      const server = result.server ? `(${fmt(result.server.p50, 2)} / ${fmt(result.server.p99, 2)})` : "";
      console.log(
        `${String(level).padStart(7)}  ${target.name.padEnd(45)}  ${fmt(result.rps).padStart(10)}  ${fmt(result.p50, 2).padStart(7)}  ${fmt(result.p99, 2).padStart(7)}  ${server.padStart(26)}  ${String(result.bad).padStart(9)}` +
          (result.bad ? `  e.g. ${result.firstBad}` : ""),
      );
    }
    const kit = rates.get("kit verify (cronos)");
    const kitV2 = rates.get("kit verify (x402 v2)");
    const reference = rates.get("@x402/evm 2.27 facilitator (x402 v2)");
    const bare = rates.get("bare Express, constant answer (cronos body)");
    const ratios = [
      kit && reference ? `kit (cronos) / reference ${fmt(kit / reference, 1)}x` : "",
      kitV2 && reference ? `kit (x402 v2) / reference ${fmt(kitV2 / reference, 1)}x` : "",
      kit && bare ? `kit (cronos) / bare Express ${fmt((100 * kit) / bare)} %` : "",
    ].filter(Boolean);
    if (ratios.length) console.log(`${" ".repeat(9)}${ratios.join("; ")}`);
  }

  const kit = targets.find((t) => t.url === kitUrl && t.dialect === "cronos");
  if (kit && OPEN_RATES.length) {
    console.log("\nopen loop over 64 connections on the kit (requests start on schedule; a wait for a free connection counts)");
    console.log("offered/s   served/s   p50 ms   p99 ms   max ms   requests  not-valid   facilitator p50 / p99 ms   generator's send lag p99");
    for (const rate of OPEN_RATES) {
      const result = await openLoop(kit, bodies("cronos", Math.ceil((rate * DURATION_MS) / 1000) + 10), rate, 64);
      console.log(
        `${String(rate).padStart(9)}  ${fmt(result.rps).padStart(9)}  ${fmt(result.p50, 2).padStart(7)}  ${fmt(result.p99, 2).padStart(7)}  ${fmt(result.max, 1).padStart(7)}  ${String(result.n).padStart(9)}  ${String(result.bad).padStart(9)}` +
          `   ${`${fmt(result.server?.p50 ?? NaN, 2)} / ${fmt(result.server?.p99 ?? NaN, 2)}`.padStart(24)}   ${fmt(result.lagP99, 1)} ms`,
      );
    }
  }
  console.log(`\nload average at the end: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`);
} finally {
  await Promise.all(servers.map((server) => server.stop()));
  await stack.stop();
}
