import { CheckFailure, CheckSkipped, NEED_REASON, type Check, type CheckContext, type Dialect, type Need } from "./check.js";
import { UnreachableError, type FacilitatorHttp } from "./http.js";

/** How one check ended. */
export type CheckStatus = "passed" | "failed" | "skipped";

/** One check's result: what every reporter prints. */
export interface CheckResult {
  id: string;
  /** The network it ran on; absent for checks of the whole service. */
  network?: string;
  dialect: Dialect;
  title: string;
  spec: string;
  status: CheckStatus;
  /** Failed: what was expected and what came back. Skipped: why. Passed: a note, if any. */
  message?: string;
  durationMs: number;
}

/** Counts of a run. */
export interface RunSummary {
  total: number;
  passed: number;
  failed: number;
  skipped: number;
}

/** A finished run. */
export interface RunReport {
  facilitator: string;
  startedAt: string;
  durationMs: number;
  results: CheckResult[];
  summary: RunSummary;
}

/** Options of {@link runChecks}. */
export interface RunChecksOptions {
  http: FacilitatorHttp;
  checks: readonly Check[];
  /** What the caller allowed: settling real payments, spending the rate-limit quota. */
  permissions: { settle: boolean; rateLimit: boolean };
  /** Patterns of the checks to run (`verify.*`, `settle.pays`, `verify.expired@cronos-testnet`); default all. */
  only?: readonly string[];
  /** Called once with the checks about to run, in the order they will run. */
  onStart?: (checks: readonly Check[]) => void;
  /** Called as each check ends, in order. */
  onResult?: (result: CheckResult) => void;
  /** Lines for the person watching (waits, payments made). */
  onNote?: (line: string) => void;
}

/** A check's name in one result: its id, and its network when it has one. */
export function resultName(result: { id: string; network?: string }): string {
  return result.network === undefined ? result.id : `${result.id}@${result.network}`;
}

/** The network a check's result is named after: as its dialect names it. */
export function networkOf(check: Check): string | undefined {
  return check.network ?? check.target?.network;
}

/** The checks `patterns` select (`*` matches any run of characters; a pattern matches the id or `id@network`). */
export function selectChecks(checks: readonly Check[], patterns: readonly string[] | undefined): Check[] {
  if (!patterns || patterns.length === 0) return [...checks];
  const regexes = patterns.map((pattern) => new RegExp(`^${pattern.split("*").map(escapeRegExp).join(".*")}$`));
  return checks.filter((check) => {
    const names = [check.id, resultName({ id: check.id, network: networkOf(check) })];
    return regexes.some((regex) => names.some((name) => regex.test(name)));
  });
}

function escapeRegExp(text: string): string {
  return text.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
}

/** The first need of `check` this run cannot meet. */
function unmetNeed(check: Check, permissions: RunChecksOptions["permissions"]): Need | undefined {
  return check.needs?.find((need) => {
    switch (need) {
      case "buyer":
        return !check.target?.buyer;
      case "rpc":
        return !check.target?.chain;
      case "settle":
        return !permissions.settle;
      case "rate-limit":
        return !permissions.rateLimit;
    }
  });
}

/** One line of an error that is not a check's own failure (an RPC error, a bug in the check). */
function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const shortMessage = (error as { shortMessage?: string }).shortMessage;
  return `${error.name}: ${(shortMessage ?? error.message).split("\n")[0]}`;
}

/**
 * Runs the selected checks one after another (those marked `last` at the end), so the output reads in
 * catalog order and a facilitator's rate limit is met one request at a time. Never throws for a check.
 */
export async function runChecks(options: RunChecksOptions): Promise<RunReport> {
  const started = Date.now();
  const selected = selectChecks(options.checks, options.only);
  const ordered = [...selected.filter((check) => !check.last), ...selected.filter((check) => check.last)];
  options.onStart?.(ordered);
  const context: CheckContext = { http: options.http, shared: new Map(), note: (line) => options.onNote?.(line) };
  const results: CheckResult[] = [];
  let unreachable: string | undefined;

  for (const check of ordered) {
    const checkStarted = Date.now();
    const base = {
      id: check.id,
      ...(networkOf(check) ? { network: networkOf(check) } : {}),
      dialect: check.dialect,
      title: check.title,
      spec: check.spec,
    };
    let status: CheckStatus;
    let message: string | undefined;
    const need = unmetNeed(check, options.permissions);
    if (need) {
      [status, message] = ["skipped", NEED_REASON[need]];
    } else if (unreachable) {
      [status, message] = ["failed", `not run: ${unreachable}`];
    } else {
      try {
        const note = await check.run(context);
        [status, message] = ["passed", note || undefined];
      } catch (error) {
        if (error instanceof CheckSkipped) [status, message] = ["skipped", error.message];
        else if (error instanceof CheckFailure) [status, message] = ["failed", error.message];
        else if (error instanceof UnreachableError) {
          [status, message] = ["failed", `the facilitator did not answer: ${error.message}`];
          if (!(await answers(options.http))) unreachable = `the facilitator at ${options.http.baseUrl} stopped answering (${error.message})`;
        } else [status, message] = ["failed", `error: ${describeError(error)}`];
      }
    }
    const result: CheckResult = { ...base, status, ...(message === undefined ? {} : { message }), durationMs: Date.now() - checkStarted };
    results.push(result);
    options.onResult?.(result);
  }
  return {
    facilitator: options.http.baseUrl,
    startedAt: new Date(started).toISOString(),
    durationMs: Date.now() - started,
    results,
    summary: summarize(results),
  };
}

/** Whether the facilitator still answers anything at all (a quick GET of supported). */
async function answers(http: FacilitatorHttp): Promise<boolean> {
  try {
    await http.request({ method: "GET", path: "/v2/x402/supported", timeoutMs: 10_000, acceptRateLimit: true });
    return true;
  } catch {
    return false;
  }
}

/** Counts results by status. */
export function summarize(results: readonly CheckResult[]): RunSummary {
  const count = (status: CheckStatus) => results.filter((result) => result.status === status).length;
  return { total: results.length, passed: count("passed"), failed: count("failed"), skipped: count("skipped") };
}
