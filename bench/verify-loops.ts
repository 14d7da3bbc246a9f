// The load of bench/verify.ts: its targets, the closed and the open loop, with the facilitator's own latency
// from its histogram on /metrics beside the generator's.
import { Agent } from "node:http";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { post } from "./http-post.js";
import { bucketQuantile, serverBuckets } from "./verify-common.js";
import { percentile } from "./stack.js";

/** How long each measured run lasts, after its warm-up. */
export const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 5_000);
export const WARMUP_MS = 1_000;
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

const valid = (status: number, text: string) => status === 200 && text.startsWith('{"isValid":true');

/** Closed loop: `concurrency` clients, each sending its next request when its answer arrives. */
export async function closedLoop(target: Target, bodies: (i: number) => string | undefined, concurrency: number, durationMs = DURATION_MS) {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const versionHeader: Record<string, string> = target.dialect === "cronos" ? { "X402-Version": "1" } : {};
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
      const { status, text } = await post(target.url, target.path, agent, body, versionHeader);
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
  const versionHeader: Record<string, string> = target.dialect === "cronos" ? { "X402-Version": "1" } : {};
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
          post(target.url, target.path, agent, body, versionHeader).then(({ status, text }) => {
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

/** A bench server's GC pauses between two readings (the longest: since start). */
