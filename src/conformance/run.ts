import type { Check, Dialect } from "./check.js";
import { cronosCatalog } from "./checks/index.js";
import { createFacilitatorHttp } from "./http.js";
import { runChecks, type CheckResult, type RunReport } from "./runner.js";
import type { Target } from "./target.js";

/** Options of {@link runConformance}. */
export interface ConformanceOptions {
  /** The facilitator's base URL. */
  facilitatorUrl: string;
  /** The networks to check, with what is known of each (RPC, buyer, payTo). */
  targets: readonly Target[];
  /** Settle real payments of 1 unit (needs a funded buyer). */
  settle: boolean;
  /** Spend this IP's rate-limit quota to see the 429 answer. */
  rateLimit: boolean;
  /** Patterns of the checks to run; default all. */
  only?: readonly string[];
  onStart?: (checks: readonly Check[]) => void;
  onResult?: (result: CheckResult) => void;
  onNote?: (line: string) => void;
  /** A seller API key for facilitators that require one on verify and settle (sent as `Authorization: Bearer`). */
  apiKey?: string;
  fetch?: typeof fetch;
}

/** A finished conformance run. */
export interface ConformanceRun {
  report: RunReport;
  /** The dialects checked. */
  dialects: Dialect[];
}

/** Runs the catalog against a facilitator: every selected check, each result as it ends. */
export async function runConformance(options: ConformanceOptions): Promise<ConformanceRun> {
  const http = createFacilitatorHttp({
    baseUrl: options.facilitatorUrl,
    ...(options.onNote ? { onWait: options.onNote } : {}),
    ...(options.fetch ? { fetch: options.fetch } : {}),
    ...(options.apiKey ? { postHeaders: { Authorization: `Bearer ${options.apiKey}` } } : {}),
  });
  const checks = cronosCatalog(options.targets);
  const report = await runChecks({
    http,
    checks,
    permissions: { settle: options.settle, rateLimit: options.rateLimit },
    ...(options.only ? { only: options.only } : {}),
    ...(options.onStart ? { onStart: options.onStart } : {}),
    ...(options.onResult ? { onResult: options.onResult } : {}),
    ...(options.onNote ? { onNote: options.onNote } : {}),
  });
  return { report, dialects: ["cronos"] };
}
