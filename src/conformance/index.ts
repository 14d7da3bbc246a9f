// The conformance checks, run from code: `cronos-x402-facilitator-kit/conformance`. The same checks as
// `cronos-x402 conformance`; `runConformance` returns the report instead of printing it. `createTarget`
// (one network: its RPC and a funded buyer for the on-chain checks) and `createTargets` (the networks a
// facilitator's supported answer lists, as `--facilitator URL` does) build what it checks.

export { runConformance, offeredDialects, type ConformanceOptions, type ConformanceRun } from "./run.js";
export type { CheckResult, CheckStatus, RunReport, RunSummary } from "./runner.js";
export type { Dialect } from "./check.js";
export { createTarget, createTargets, parseNetwork, TargetError, SMALLEST_AMOUNT, type Target, type TargetOptions, type TargetsOptions } from "./target.js";
export { createChainReader, type ChainReader } from "./chain.js";
export { toJsonDocument, type ConformanceDocument } from "./report/json.js";
export { toJUnit } from "./report/junit.js";
export { formatResultLine, formatSummary } from "./report/console.js";
