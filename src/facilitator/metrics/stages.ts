// Verify's budget (METRICS_VERIFY_STAGES): the stage clock, and its microseconds per stage per scrape window with the main thread's CPU time.
import { Gauge, type Registry } from "prom-client";
import { QUIET_CLOCK, type CheckStage, type StageClock } from "../../settlement/deps.js";

/**
 * The stages of one verify request whose CPU time {@link StageClock} adds up (the verify budget of
 * `npm run bench:verify`, docs/benchmarks.md). Each is a stretch of work on the main thread: the HTTP
 * server's own parsing and writing, Express routing and garbage collection are what remains of the
 * thread's CPU beside them.
 */
export const VERIFY_STAGES = [
  /** The request id and the Content-Type check. */
  "edge",
  /** The per-client (or per-key) limiter, when a limit is set. */
  "rateLimit",
  /** Reading the body and `JSON.parse` (the JSON middleware's own work). */
  "bodyParse",
  /** Telling the dialect and checking the body's shape (requirements and envelope). */
  "schema",
  /** The payer's part: the Cronos base64 header (decode, parse, check), or the x402 v2 payload's check. */
  "headerDecode",
  /** The spec's checks that need neither hash nor chain (scheme, network, asset, amount, recipient). */
  "checks",
  /** The EIP-712 digest of the authorization. */
  "typedDataHash",
  /** Recovering the signer from the signature, and comparing it with the payer. */
  "recovery",
  /** The payer's state: the token state index (or the chain reads when it cannot vouch). */
  "indexRead",
  /** The payment identifier's binding and settlement (x402 v2 with an identifier only). */
  "ledgerReads",
  /** The answer's JSON and headers. */
  "answer",
  /** Handing the answer to the socket (`res.end`: on loopback the kernel's delivery to the client is in it). */
  "write",
  /** The outcome record: metrics, the log line, the dashboard's feed. */
  "metrics",
] as const;

/** One stage of {@link VERIFY_STAGES}. */
export type VerifyStage = (typeof VERIFY_STAGES)[number];

/** The verify budget's clock as the HTTP edge uses it: the stages (verify's own among them), and each verify answered. */
export interface RequestClock extends StageClock<VerifyStage | CheckStage> {
  /** One verify answered (the denominator of the budget). */
  verified(): void;
}

/** The request clock that times nothing (`METRICS_VERIFY_STAGES` off, the default). */
export const QUIET_REQUEST_CLOCK: RequestClock = { ...QUIET_CLOCK, verified() {} };

/** Samples kept per stage between two reads of the clock (the oldest give way). */
const SAMPLES = 1 << 16;

/**
 * Times each verify stage (`METRICS_VERIFY_STAGES=true`: off by default, and then absent, so that nothing
 * on the request path asks the clock). A stage is a synchronous stretch, timed from {@link start} to
 * {@link stop} on the monotonic clock: the main thread's CPU while it runs, unless the OS preempts the
 * process meanwhile (a shared machine), which the summary's trimmed mean leaves out. (The thread's CPU clock
 * of `process.threadCpuUsage()` advances in scheduler ticks, too coarsely for stretches of microseconds.)
 * Stretches that may wait on I/O are not timed: the state read counts only when it answered from memory,
 * and verifies whose read waited are counted apart.
 */
export class VerifyStageClock implements RequestClock {
  readonly #samples = VERIFY_STAGES.map(() => new Float64Array(SAMPLES));
  readonly #counts = new Float64Array(VERIFY_STAGES.length);
  #verifies = 0;
  #waited = 0;

  /** A reading to pass to {@link stop}. */
  start(): number {
    return performance.now();
  }

  /** Records the time since `since` (a {@link start} reading) as one sample of `stage`. */
  stop(stage: VerifyStage, since: number): void {
    this.lap(stage, since);
  }

  /** {@link stop}, and a new reading for the next stage. */
  lap(stage: VerifyStage, since: number): number {
    const now = performance.now();
    const index = STAGE_INDEX[stage];
    const count = this.#counts[index]!;
    this.#samples[index]![count % SAMPLES] = (now - since) * 1000;
    this.#counts[index] = count + 1;
    return now;
  }

  /** One verify answered (the denominator of the budget). */
  verified(): void {
    this.#verifies++;
  }

  /** A verify whose state read waited on I/O (the index could not answer from memory): not in `indexRead`. */
  waited(): void {
    this.#waited++;
  }

  /**
   * What was recorded since the last call, which starts a new window: per stage the microseconds per verify
   * (its samples' mean, those above the stage's 99th percentile left out, times its samples per verify), the
   * verifies answered, and those whose state read waited.
   */
  take(): { micros: Record<VerifyStage, number>; verifies: number; waited: number } {
    const micros = {} as Record<VerifyStage, number>;
    const verifies = this.#verifies;
    VERIFY_STAGES.forEach((stage, index) => {
      const count = this.#counts[index]!;
      const kept = this.#samples[index]!.slice(0, Math.min(count, SAMPLES)).sort();
      const below = kept.subarray(0, Math.max(1, Math.floor(kept.length * 0.99)));
      const mean = below.length > 0 && count > 0 ? below.reduce((a, b) => a + b, 0) / below.length : 0;
      micros[stage] = verifies > 0 ? (mean * count) / verifies : 0;
      this.#counts[index] = 0;
    });
    const taken = { micros, verifies, waited: this.#waited };
    this.#verifies = 0;
    this.#waited = 0;
    return taken;
  }
}

const STAGE_INDEX = Object.fromEntries(VERIFY_STAGES.map((stage, index) => [stage, index])) as Record<VerifyStage, number>;

/** The main thread's CPU time so far, in microseconds (scheduler-tick resolution: for windows of seconds). */
export function mainThreadMicros(): number {
  const { user, system } = process.threadCpuUsage();
  return user + system;
}

/**
 * The verify budget as gauges, over the window since the previous scrape (each scrape starts a new one:
 * for the bench, which scrapes before and after a run): microseconds per verify by stage, the verifies
 * answered and those whose state read waited; and the main thread's CPU time since start.
 */
export function watchStages(registry: Registry, clock: VerifyStageClock): void {
  let window: ReturnType<VerifyStageClock["take"]> | undefined;
  // The gauges of one scrape read one window.
  const taken = () => (window ??= clock.take());
  new Gauge({
    name: "x402_verify_stage_microseconds",
    help: "microseconds per verify spent in each stage since the previous scrape (METRICS_VERIFY_STAGES; trimmed mean of the stage's samples)",
    labelNames: ["stage"],
    registers: [registry],
    collect() {
      const { micros } = taken();
      for (const stage of VERIFY_STAGES) this.set({ stage }, micros[stage]);
    },
  });
  new Gauge({
    name: "x402_verify_stage_verifies",
    help: "verify requests answered since the previous scrape (METRICS_VERIFY_STAGES); `waited`: those whose state read waited on I/O",
    labelNames: ["kind"],
    registers: [registry],
    collect() {
      const { verifies, waited } = taken();
      this.set({ kind: "answered" }, verifies);
      this.set({ kind: "waited" }, waited);
      window = undefined;
    },
  });
  new Gauge({
    name: "x402_main_thread_cpu_microseconds",
    help: "CPU time of the main thread (the event loop) since start",
    registers: [registry],
    collect() {
      this.set(mainThreadMicros());
    },
  });
}
