import type { Context } from "mocha";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// A test that cannot run here says so: never a silent pass.

/**
 * Skips the running test or suite (`context` is its `this`), printing why (Mocha counts it pending).
 * A missing tool (`tool`: a browser, a Node version) is a failure under CI=true instead: CI must run
 * every test; a missing condition of the machine (`condition`: not Linux, not root) stays a skip.
 */
export function skipBecause(context: Context, reason: string, kind: "tool" | "condition" = "tool"): never {
  if (kind === "tool" && process.env.CI === "true") throw new Error(`cannot run here: ${reason} (CI=true: every test must run)`);
  process.stdout.write(`      skipped: ${reason}\n`);
  context.skip();
}
