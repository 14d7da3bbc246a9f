// The conformance checks, run from code: `cronos-x402-facilitator-kit/conformance`. The same checks as
// `cronos-x402 conformance`; `runConformance` returns the report instead of printing it.

export { runConformance, offeredDialects, type ConformanceOptions, type ConformanceRun } from "./run.js";
export type { CheckResult, CheckStatus, RunReport, RunSummary } from "./runner.js";
export type { Dialect } from "./check.js";
export type { Target } from "./target.js";
export { toJsonDocument, type ConformanceDocument } from "./report/json.js";
export { toJUnit } from "./report/junit.js";
export { formatResultLine, formatSummary } from "./report/console.js";
