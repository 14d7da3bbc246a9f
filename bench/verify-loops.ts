// The load of bench/verify.ts: its targets, the closed and the open loop, and the facilitator's own latency histogram read from /metrics.
import { once } from "node:events";
import { Agent, request } from "node:http";
import { createServer } from "node:net";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { percentile } from "./stack.js";

/** How long each measured run lasts, after its warm-up. */
export const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 5_000);
export const WARMUP_MS = 1_000;

// The generator collects its garbage (the last run's bodies and answers) before each run, so that its own
// pauses do not land inside a measurement: the open loop reports its send lag beside the latencies.
setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc") as () => void;

export type Dialect = "cronos" | "x402v2";
export interface Target {
  name: string;
  url: URL;
  path: string;
  dialect: Dialect;
  /** The kit's /metrics, for its own latency histogram. */
  metricsUrl?: string;
}

export function post(url: URL, path: string, agent: Agent, body: string, version?: string) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const headers: Record<string, string | number> = { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) };
    if (version) headers["X402-Version"] = version;
    const req = request({ host: url.hostname, port: url.port, path, method: "POST", agent, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

export const valid = (status: number, text: string) => status === 200 && text.startsWith('{"isValid":true');

/** Closed loop: `concurrency` clients, each sending its next request when its answer arrives. */
export async function closedLoop(target: Target, bodies: (i: number) => string | undefined, concurrency: number, durationMs = DURATION_MS) {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const version = target.dialect === "cronos" ? "1" : undefined;
  let next = 0;
  const latencies: number[] = [];
  let bad = 0;
  let firstBad = "";
  let measuring = false;
  let stopAt = Infinity;
  const worker = async () => {
    while (performance.now() < stopAt) {
      const body = bodies(next++);
      if (body === undefined) throw new Error("ran out of signed bodies: raise BENCH_MAX_RPS");
      const t = performance.now();
      const { status, text } = await post(target.url, target.path, agent, body, version);
      if (measuring) {
        latencies.push(performance.now() - t);
        if (!valid(status, text)) {
          bad++;
          firstBad ||= `${status} ${text.slice(0, 200)}`;
        }
      }
    }
  };
  collectGarbage();
  stopAt = performance.now() + WARMUP_MS + durationMs;
  const workers = Array.from({ length: concurrency }, worker);
  await new Promise((r) => setTimeout(r, WARMUP_MS));
  measuring = true;
  const before = target.metricsUrl ? await serverBuckets(target.metricsUrl) : undefined;
  const measureStart = performance.now();
  await Promise.all(workers);
  const elapsed = (performance.now() - measureStart) / 1000;
  const after = target.metricsUrl ? await serverBuckets(target.metricsUrl) : undefined;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return {
    rps: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    n: latencies.length,
    bad,
    firstBad,
    server: before && after ? { p50: bucketQuantile(before, after, 0.5), p99: bucketQuantile(before, after, 0.99) } : undefined,
  };
}

/**
 * Open loop: requests start on a fixed schedule (`rate` per second, checked every millisecond) over at most
 * `connections` keep-alive connections, whatever the answers' pace; a request due while every connection is
 * busy waits for one, and that wait counts in its latency (no coordinated omission).
 */
export async function openLoop(target: Target, bodies: (i: number) => string | undefined, rate: number, connections: number) {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const version = target.dialect === "cronos" ? "1" : undefined;
  const latencies: number[] = [];
  const lags: number[] = [];
  let bad = 0;
  let next = 0;
  const total = Math.floor((rate * DURATION_MS) / 1000);
  const pending: Promise<void>[] = [];
  const before = target.metricsUrl ? await serverBuckets(target.metricsUrl) : undefined;
  collectGarbage();
  const started = performance.now();
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const due = Math.min(total, Math.floor(((performance.now() - started) * rate) / 1000));
      while (next < due) {
        const scheduled = started + (next * 1000) / rate;
        const body = bodies(next++);
        if (body === undefined) throw new Error("ran out of signed bodies");
        lags.push(performance.now() - scheduled);
        pending.push(
          post(target.url, target.path, agent, body, version).then(({ status, text }) => {
            latencies.push(performance.now() - scheduled);
            if (!valid(status, text)) bad++;
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
  const after = target.metricsUrl ? await serverBuckets(target.metricsUrl) : undefined;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  lags.sort((a, b) => a - b);
  return {
    rps: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: latencies.at(-1) ?? NaN,
    n: latencies.length,
    bad,
    lagP99: percentile(lags, 99),
    server: before && after ? { p50: bucketQuantile(before, after, 0.5), p99: bucketQuantile(before, after, 0.99) } : undefined,
  };
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
