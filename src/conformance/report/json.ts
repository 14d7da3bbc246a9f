import type { CheckResult, RunReport, RunSummary } from "../runner.js";

/** The one JSON document `--json` prints. */
export interface ConformanceDocument {
  tool: "x402-facilitator-conformance";
  facilitator: string;
  /** Whether the run started its own local stack. */
  local: boolean;
  networks: string[];
  dialects: string[];
  permissions: { settle: boolean; rateLimit: boolean };
  startedAt: string;
  durationMs: number;
  summary: RunSummary;
  checks: CheckResult[];
}

/** The run as one JSON document (what CI in any language can read). */
export function toJsonDocument(report: RunReport, run: Omit<ConformanceDocument, "tool" | "facilitator" | "startedAt" | "durationMs" | "summary" | "checks">): ConformanceDocument {
  return {
    tool: "x402-facilitator-conformance",
    facilitator: report.facilitator,
    ...run,
    startedAt: report.startedAt,
    durationMs: report.durationMs,
    summary: report.summary,
    checks: report.results,
  };
}
