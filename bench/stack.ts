// Benchmark helper: runs `npm start --json` as a child process (the stack under test gets its own
// process and core; the load generator keeps this one) and returns the parsed JSON line.
import { spawn, type ChildProcess } from "node:child_process";
import { Agent, request } from "node:http";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { Address, Hex } from "viem";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

export interface StackInfo {
  facilitatorUrl: string;
  relayer: Address;
  networks: Record<string, { chainId: number; rpcUrl: string; token: Address; domain: { name: string; version: string }; buyers: Array<{ address: Address; privateKey: Hex }> }>;
}

/**
 * The facilitator under test, per `BENCH_LEDGER`: unset or `memory`, the local stack (`npm start`, its
 * ledger in memory); `embedded` or `postgres`, one `npm run facilitator` process on a ledger file or on
 * PostgreSQL (`npm run instances -- --instances 1`), whose instance holds the cluster's three relayer keys (the
 * local stack has one). `blockTimeMs` 0 = automine; the chain answers as `BENCH_NODE` says ({@link benchNode}).
 */
export function startBenchTarget(blockTimeMs: number, buyers: number, env: Record<string, string>) {
  const ledger = process.env.BENCH_LEDGER ?? "memory";
  const node = benchNode();
  if (ledger === "memory") {
    const mining = blockTimeMs > 0 ? ["--block-time", String(blockTimeMs)] : [];
    return startStackProcess(["--port", "0", "--testnet-rpc-port", "0", "--mainnet-rpc-port", "0", "--networks", "cronos-testnet", "--buyers", String(buyers), "--node", node, ...mining], env);
  }
  if (ledger !== "embedded" && ledger !== "postgres") throw new Error(`BENCH_LEDGER must be memory, embedded or postgres, got "${ledger}"`);
  return startStackProcess(["--instances", "1", "--ledger", ledger, "--block-time", String(blockTimeMs), "--node", node], env, "scripts/instances.ts");
}

/**
 * How the benchmark's chain admits transactions (`BENCH_NODE`): `cronos` (default, as the local chains do)
 * as a Cronos node (strict nonces, its replacement rule), `ethereum` as EDR alone (geth's pool).
 */
export function benchNode(): "cronos" | "ethereum" {
  const node = process.env.BENCH_NODE ?? "cronos";
  if (node !== "cronos" && node !== "ethereum") throw new Error(`BENCH_NODE must be cronos or ethereum, got "${node}"`);
  return node;
}

/** Starts the local stack (or `script`) in a child process; resolves with its JSON line, the process and the time to ready. */
export async function startStackProcess(
  args: string[],
  env: Record<string, string> = {},
  script = "scripts/start.ts",
): Promise<{ info: StackInfo; child: ChildProcess; readyMs: number; stop(): Promise<void> }> {
  const started = performance.now();
  const child = spawn(`${ROOT}node_modules/.bin/tsx`, [script, "--json", ...args], {
    cwd: ROOT,
    env: {
      ...process.env,
      LOG_LEVEL: "silent",
      ...(process.env.BENCH_PROFILE_DIR ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}` } : {}),
      ...(process.env.BENCH_STACK_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_STACK_NODE_OPTIONS } : {}),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const lines = createInterface({ input: child.stdout! });
  const line = await Promise.race([
    once(lines, "line").then(([l]) => l as string),
    once(child, "exit").then(([code]) => {
      throw new Error(`stack exited with ${code}: ${stderr}`);
    }),
  ]);
  const readyMs = performance.now() - started;
  return {
    info: JSON.parse(line) as StackInfo,
    child,
    readyMs,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill("SIGTERM");
      await once(child, "exit");
    },
  };
}

/** Percentile of sorted numbers. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** A settle's answer, as the benchmarks read it. */
export interface SettleAnswer {
  event: string;
  txHash?: Hex;
  blockNumber?: number;
  error?: string;
}

/**
 * POSTs every body to `{facilitatorUrl}/v2/x402/settle` at once, over keep-alive connections (one per
 * body); each promise resolves with its latency and answer. `close` frees the connections.
 */
export function fireSettles(facilitatorUrl: string, bodies: readonly string[]): { answers: Array<Promise<{ ms: number; answer: SettleAnswer }>>; close(): void } {
  const url = new URL(facilitatorUrl);
  const agent = new Agent({ keepAlive: true, maxSockets: bodies.length });
  const answers = bodies.map(
    (body) =>
      new Promise<{ ms: number; answer: SettleAnswer }>((resolve, reject) => {
        const t = performance.now();
        const req = request(
          { host: url.hostname, port: url.port, path: "/v2/x402/settle", method: "POST", agent, headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) } },
          (res) => {
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (c) => (text += c));
            res.on("end", () => resolve({ ms: performance.now() - t, answer: JSON.parse(text) as SettleAnswer }));
          },
        );
        req.on("error", reject);
        req.end(body);
      }),
  );
  return { answers, close: () => agent.destroy() };
}

/** What a burst of settles came to: the settled ones, the failures by error, and the sorted latencies. */
export function tallySettles(results: ReadonlyArray<{ ms: number; answer: SettleAnswer }>) {
  const settled = results.filter((r) => r.answer.event === "payment.settled");
  const failures = new Map<string, number>();
  for (const r of results) if (r.answer.event !== "payment.settled") failures.set(r.answer.error ?? "?", (failures.get(r.answer.error ?? "?") ?? 0) + 1);
  return {
    settled,
    failed: failures.size ? JSON.stringify(Object.fromEntries(failures)) : "none",
    blocks: new Set(settled.map((r) => r.answer.blockNumber)).size,
    lastBlock: Math.max(...settled.map((r) => r.answer.blockNumber ?? 0)),
    latencies: results.map((r) => r.ms).sort((a, b) => a - b),
  };
}
