// docs/facilitator.md's lifecycle hooks, verbatim (test/facilitator/hooks.test.ts checks that it is, and runs it).
import type { FacilitatorHooks } from "../../src/index.js";

/** Hooks for `startFacilitator(config, { hooks })`: settle only for the payers in `allowed` (lower case), an audit line per settle. */
export function allowlistHooks(allowed: ReadonlySet<string>, audit: (line: string) => void): FacilitatorHooks {
  return {
    // Called once settle's checks proved the signature: `authorization.from` is the payer.
    onBeforeSettle: ({ authorization }) => (allowed.has(authorization.from.toLowerCase()) ? undefined : { abort: true, reason: "payer not on the allowlist" }),
    onAfterSettle: ({ requestId, result }) => audit(`${requestId} settled ${result.value} from ${result.payer} in ${result.txHash}`),
    onSettleFailure: ({ requestId, failure }) => audit(`${requestId} not settled: ${failure.kind === "limited" ? "rate limited" : failure.reason}`),
    // Each hook is awaited before the answer, for at most this long.
    timeoutMs: 500,
  };
}
