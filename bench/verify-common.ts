// Helpers of the verify benchmarks (bench/verify.ts, bench/verify-wrk.ts): the facilitator's own latency
// histogram from /metrics, free ports, bench servers in their own processes, the state index's readiness.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** GC pauses of one kind in a bench server (bench/serve.ts). */
export interface GcKind {
  count: number;
  ms: number;
  longestMs: number;
}
/** A bench server's main-thread CPU time so far (µs) and its GC pauses. */
export interface ServerUsage {
  mainThreadMicros: number;
  gc: { minor: GcKind; major: GcKind };
}

export async function scrape(metricsUrl: string): Promise<string> {
  return (await fetch(metricsUrl)).text();
}

/** One sample's value from a Prometheus text page (`name{labels}` exactly as written), or NaN. */
export function sample(page: string, series: string): number {
  const line = page.split("\n").find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : NaN;
}

/** The facilitator's own verify latency histogram (cumulative buckets, seconds → count). */
export async function serverBuckets(metricsUrl: string): Promise<Map<number, number>> {
  const page = await scrape(metricsUrl);
  const buckets = new Map<number, number>();
  for (const match of page.matchAll(/^x402_request_duration_seconds_bucket\{le="([^"]+)",route="verify"\} (\d+)$/gm)) {
    buckets.set(match[1] === "+Inf" ? Infinity : Number(match[1]), Number(match[2]));
  }
  return buckets;
}

/** The `q` quantile (ms) of the requests between two scrapes, interpolated within its bucket as Prometheus' histogram_quantile does. */
export function bucketQuantile(before: Map<number, number>, after: Map<number, number>, q: number): number {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const count = (bound: number) => after.get(bound)! - (before.get(bound) ?? 0);
  const total = count(Infinity);
  if (total === 0) return NaN;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const bound of bounds) {
    const here = count(bound);
    if (here >= rank) {
      if (bound === Infinity) return lower * 1000;
      return (lower + ((bound - lower) * (rank - below)) / Math.max(1, here - below)) * 1000;
    }
    lower = bound;
    below = here;
  }
  return NaN;
}

/** A port free right now, for the facilitator's metrics listener. */
export async function freePort(): Promise<number> {
  const probe = createServer().listen(0, "127.0.0.1");
  await once(probe, "listening");
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}


/** A bench server (bench/bare-express.ts, bench/reference-facilitator.ts) in its own process; resolves with its URL. */
export async function startServer(script: string, env: Record<string, string> = {}) {
  // Node itself (not the tsx CLI's wrapper process): its pid is the server's, for processCpu.
  const child = spawn(process.execPath, ["--import", "tsx", script], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const line = await Promise.race([
    once(createInterface({ input: child.stdout! }), "line").then(([l]) => l as string),
    once(child, "exit").then(([code]) => {
      throw new Error(`${script} exited with ${code}: ${stderr}`);
    }),
  ]);
  const url = new URL((JSON.parse(line) as { url: string }).url);
  return {
    url,
    pid: child.pid!,
    /** The server's main-thread CPU time (µs) and GC pauses so far. */
    async usage(): Promise<ServerUsage> {
      return (await (await fetch(new URL("/cpu", url))).json()) as ServerUsage;
    },
    async stop() {
      if (child.exitCode !== null) return;
      child.kill("SIGTERM");
      await once(child, "exit");
    },
  };
}
/**
 * A process's CPU time so far (µs, from /proc: the kernel's count, at its tick of 10 ms), its main thread's
 * and all its threads'; read from outside, so it costs the process nothing. Undefined where there is no /proc.
 */
export function processCpu(pid: number): { mainThread: number; process: number } | undefined {
  const ticks = (path: string) => {
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    const stat = readFileSync(path, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) * (1e6 / CLOCK_TICKS);
  };
  try {
    return { mainThread: ticks(`/proc/${pid}/task/${pid}/stat`), process: ticks(`/proc/${pid}/stat`) };
  } catch {
    return undefined;
  }
}
/** USER_HZ: 100 on Linux (the unit of /proc's CPU times). */
const CLOCK_TICKS = 100;

/** Waits until the stack's token state index follows the chain with its backfill done (verify answers from it). */
export async function indexReady(facilitatorUrl: string): Promise<void> {
  for (;;) {
    const health = (await (await fetch(new URL("/healthcheck", facilitatorUrl))).json()) as {
      results: { networks: Record<string, { stateIndex?: { state: string; backfill: { state: string } } }> };
    };
    const index = health.results.networks["cronos-testnet"]?.stateIndex;
    if (index?.state === "following" && index.backfill.state === "done") return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

