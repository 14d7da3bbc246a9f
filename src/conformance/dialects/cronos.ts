import type { Hex } from "viem";
import { SettleEvent, X402_VERSION } from "../../protocol/reasons.js";
import { settleExpectation } from "../expected-reason.js";
import { fail } from "../check.js";
import type { Codec } from "../codec.js";
import { expectSettled, expectSettleFailure, expectVerifyRefusal, expectVerifyValid } from "../expect.js";
import { describeAnswer, PATHS } from "../http.js";

/**
 * The Cronos dialect (spec 2.2–2.5; wire format): `{x402Version: 1, paymentHeader, paymentRequirements}`
 * with `X402-Version: 1`, answered `{isValid, invalidReason}` and `payment.settled` / `payment.failed`.
 */
export const cronosCodec: Codec = {
  dialect: "cronos",
  networkName: (target) => target.network,
  expresses: () => true,
  send: (http, operation, payment) => http.post(PATHS[operation], { x402Version: X402_VERSION, ...payment }),

  expectRefused(operation, answer, expected, payment) {
    if (operation === "verify") {
      expectVerifyRefusal(answer, expected);
      return {};
    }
    const failure = expectSettleFailure(answer, settleExpectation(expected), payment.paymentRequirements.network);
    return failure.txHash === undefined ? {} : { txHash: failure.txHash as Hex };
  },

  expectValid: (answer) => expectVerifyValid(answer),

  expectSettled(answer, expected) {
    const settled = expectSettled(answer);
    const problems: string[] = [];
    if (settled.x402Version !== X402_VERSION) problems.push(`x402Version ${settled.x402Version} (expected 1)`);
    if (settled.network !== expected.target.network) problems.push(`network ${settled.network} (expected ${expected.target.network}, as sent)`);
    if (settled.from.toLowerCase() !== expected.payer.toLowerCase()) problems.push(`from ${settled.from} (expected the payer ${expected.payer})`);
    if (settled.to.toLowerCase() !== expected.payTo.toLowerCase()) problems.push(`to ${settled.to} (expected payTo ${expected.payTo})`);
    if (settled.value !== expected.value.toString()) problems.push(`value ${settled.value} (expected "${expected.value}")`);
    if (problems.length > 0) fail("payment.settled for this payment", `${problems.join("; ")} in ${describeAnswer(answer)}`);
    return { txHash: settled.txHash as Hex, blockNumber: settled.blockNumber, timestamp: settled.timestamp };
  },

  isSettled: (answer) => (answer.json as { event?: unknown } | undefined)?.event === SettleEvent.settled,
};
