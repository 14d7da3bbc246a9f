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
  /** Writing the answer: its JSON, headers and the socket write. */
  "answer",
  /** The outcome record: metrics, the log line, the dashboard's feed. */
  "metrics",
] as const;

/** One stage of {@link VERIFY_STAGES}. */
export type VerifyStage = (typeof VERIFY_STAGES)[number];

/** CPU time of the calling thread, in microseconds (user + system). */
function threadMicros(): number {
  const { user, system } = process.threadCpuUsage();
  return user + system;
}

/**
 * Adds up the main thread's CPU time per verify stage (`METRICS_VERIFY_STAGES=true`: off by default, and
 * then absent, so that nothing on the request path asks the clock). A stage is timed from {@link start}
 * to {@link stop}; a stretch that awaits I/O counts the CPU of whatever ran meanwhile, so stages that can
 * wait (the index, the ledger) are timed only when they answered without waiting, and counted apart when not.
 */
export class StageClock {
  readonly #micros = new Float64Array(VERIFY_STAGES.length);
  #verifies = 0;
  #waited = 0;

  /** A reading to pass to {@link stop}. */
  start(): number {
    return threadMicros();
  }

  /** Adds the CPU time since `since` (a {@link start} reading) to `stage`. */
  stop(stage: VerifyStage, since: number): void {
    this.#micros[STAGE_INDEX[stage]]! += threadMicros() - since;
  }

  /** One verify answered (the denominator of the budget). */
  verified(): void {
    this.#verifies++;
  }

  /** A verify whose state read waited on I/O (the index could not answer from memory): not in `indexRead`. */
  waited(): void {
    this.#waited++;
  }

  /** The totals so far: microseconds per stage, verifies answered, verifies whose state read waited. */
  totals(): { micros: Record<VerifyStage, number>; verifies: number; waited: number } {
    const micros = {} as Record<VerifyStage, number>;
    VERIFY_STAGES.forEach((stage, index) => {
      micros[stage] = this.#micros[index]!;
    });
    return { micros, verifies: this.#verifies, waited: this.#waited };
  }
}

const STAGE_INDEX = Object.fromEntries(VERIFY_STAGES.map((stage, index) => [stage, index])) as Record<VerifyStage, number>;

/** The main thread's CPU time so far, in microseconds (the whole of which the stages are parts). */
export function mainThreadMicros(): number {
  return threadMicros();
}
