import { settleExpectation, type RefusalCase } from "../cases.js";
import type { Check, Need } from "../check.js";
import { expectSettleFailure, expectVerifyRefusal } from "../expect.js";
import type { Target } from "../target.js";
import { caseContextOf, PATHS } from "./context.js";

/** Whether a refusal case applies to `target`'s network. */
export function appliesTo(refusal: RefusalCase, target: Target): boolean {
  return refusal.networks === undefined || refusal.networks.includes(target.network);
}

/** What a check of `refusal` needs: a buyer for a used nonce (its own), an RPC for the chain's clock. */
function needsOf(refusal: RefusalCase): Need[] {
  return [...(refusal.needs?.includes("usedNonce") ? (["buyer"] as const) : []), ...(refusal.needs?.includes("chainClock") ? (["rpc"] as const) : [])];
}

/**
 * `verify.<case>`: verify answers 200 `{isValid: false, invalidReason}` with the case's reason.
 * `settle.<case>`: settle answers 200 `payment.failed` with settle's word for it (nothing is sent).
 */
export function refusalCheck(operation: "verify" | "settle", refusal: RefusalCase, target: Target): Check {
  return {
    id: `${operation}.${refusal.id}`,
    title: `${operation} refuses ${refusal.title}`,
    spec: operation === "verify" ? refusal.spec : `${refusal.spec}; decisions › Settle (re-runs verify)`,
    dialect: "cronos",
    target,
    needs: needsOf(refusal),
    async run(context) {
      const built = await refusal.build(await caseContextOf(context, target, refusal.needs));
      const answer = await context.http.post(PATHS[operation], { x402Version: 1, paymentHeader: built.paymentHeader, paymentRequirements: built.paymentRequirements });
      if (operation === "verify") expectVerifyRefusal(answer, built.expected);
      else expectSettleFailure(answer, settleExpectation(built.expected), built.paymentRequirements.network);
    },
  };
}
