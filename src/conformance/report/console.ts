import { resultName, type CheckResult, type RunReport } from "../runner.js";

const LABEL = { passed: "PASS", failed: "FAIL", skipped: "SKIP" } as const;

/** Width of the name column, for a run's names. */
export function nameWidth(names: readonly string[]): number {
  return Math.min(56, Math.max(0, ...names.map((name) => name.length)));
}

/**
 * One check's line: `PASS  verify.expired@cronos-testnet  [spec 4.3 check 7, 7.2 Authorization expired]`,
 * with what failed (expected, got), why it was skipped, or a pass's note after a colon.
 */
export function formatResultLine(result: CheckResult, width = 0): string {
  const message = result.message === undefined ? "" : `: ${result.message.replace(/\s*\n\s*/g, " ")}`;
  return `${LABEL[result.status]}  ${resultName(result).padEnd(width)}  [${result.spec}]${message}`;
}

/** The last line: counts, time, and the facilitator. */
export function formatSummary(report: RunReport): string {
  const { total, passed, failed, skipped } = report.summary;
  const verdict = failed === 0 ? "conforms" : "does NOT conform";
  return `${total} check${total === 1 ? "" : "s"}: ${passed} passed, ${failed} failed, ${skipped} skipped in ${(report.durationMs / 1000).toFixed(1)} s; ${report.facilitator} ${verdict} (for the checks run)`;
}
