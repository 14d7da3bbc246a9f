import { X402_VERSION } from "../protocol/reasons.js";
import { X402_V2_VERSION } from "../protocol/x402v2.js";
import type { Check, Dialect } from "./check.js";
import { catalog } from "./checks/index.js";
import { createFacilitatorHttp, PATHS, type FacilitatorHttp } from "./http.js";
import { runChecks, type CheckResult, type RunReport } from "./runner.js";
import { createTargets, type Target } from "./target.js";

/** Options of {@link runConformance}. */
export interface ConformanceOptions {
  /** The facilitator's base URL. */
  facilitatorUrl: string;
  /**
   * The networks to check, with what is known of each (RPC, buyer, payTo): build them with
   * `createTarget` / `createTargets`. Default: every network the facilitator's supported answer lists,
   * without RPC or buyer (the checks that need one are skipped, each saying so).
   */
  targets?: readonly Target[];
  /** The dialects to check; default those the facilitator's supported answer offers (the Cronos one when it offers none). */
  dialects?: readonly Dialect[];
  /** Settle real payments of 1 unit (needs a target with a funded buyer and an RPC); default false. */
  settle?: boolean;
  /** Spend this IP's rate-limit quota to see the 429 answer; default false. */
  rateLimit?: boolean;
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

const DIALECT_OF_VERSION: Readonly<Record<number, Dialect>> = { [X402_VERSION]: "cronos", [X402_V2_VERSION]: "x402-v2" };

/** The dialects a facilitator offers, per the x402Version of its supported kinds; undefined when it cannot be read. */
export async function offeredDialects(http: FacilitatorHttp): Promise<Dialect[] | undefined> {
  try {
    const kinds = ((await http.request({ method: "GET", path: PATHS.supported, timeoutMs: 30_000 })).json as { kinds?: unknown } | undefined)?.kinds;
    if (!Array.isArray(kinds)) return undefined;
    const versions = new Set(kinds.map((kind) => (kind as { x402Version?: unknown })?.x402Version));
    return (["cronos", "x402-v2"] as const).filter((dialect) => [...versions].some((version) => DIALECT_OF_VERSION[version as number] === dialect));
  } catch {
    return undefined;
  }
}

/**
 * Runs the catalog against a facilitator: every selected check, each result as it ends; resolves with
 * the report (never throws for a failed check: read `report.summary.failed`).
 *
 * ```ts
 * const target = await createTarget({ network: "cronos-testnet", rpcUrl, buyerKey });
 * const { report } = await runConformance({ facilitatorUrl, targets: [target], settle: true });
 * ```
 */
export async function runConformance(options: ConformanceOptions): Promise<ConformanceRun> {
  const http = createFacilitatorHttp({
    baseUrl: options.facilitatorUrl,
    ...(options.onNote ? { onWait: options.onNote } : {}),
    ...(options.fetch ? { fetch: options.fetch } : {}),
    ...(options.apiKey ? { postHeaders: { Authorization: `Bearer ${options.apiKey}` } } : {}),
  });
  let dialects = options.dialects ? [...options.dialects] : await offeredDialects(http);
  if (!dialects || dialects.length === 0) dialects = ["cronos"];
  else if (!options.dialects && !dialects.includes("x402-v2")) options.onNote?.("supported offers no x402Version 2 kind: checking the Cronos dialect only");
  const targets =
    options.targets ??
    (await createTargets({ facilitatorUrl: options.facilitatorUrl, ...(options.onNote ? { onNote: options.onNote } : {}), ...(options.fetch ? { fetch: options.fetch } : {}) }));
  const report = await runChecks({
    http,
    checks: catalog(targets, dialects),
    permissions: { settle: options.settle ?? false, rateLimit: options.rateLimit ?? false },
    ...(options.only ? { only: options.only } : {}),
    ...(options.onStart ? { onStart: options.onStart } : {}),
    ...(options.onResult ? { onResult: options.onResult } : {}),
    ...(options.onNote ? { onNote: options.onNote } : {}),
  });
  return { report, dialects };
}
