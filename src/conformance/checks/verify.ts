import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { VerifyReason } from "../../protocol/reasons.js";
import { REFUSAL_CASES } from "../cases.js";
import { requirementsFor, signFor, tamper, type CaseContext } from "../case-payment.js";
import type { ExpectedReason } from "../expected-reason.js";
import { CheckFailure, type Check } from "../check.js";
import type { Codec } from "../codec.js";
import { SMALLEST_AMOUNT, type Target } from "../target.js";
import { caseContextOf, freshSignerOf } from "./context.js";
import { boundTo, refusalCases, refusalCheck } from "./refusals.js";

/** verify accepts a funded buyer's payment of the smallest amount. */
export function verifyAcceptsCheck(codec: Codec, target: Target): Check {
  return {
    id: "verify.accepts",
    title: "verify accepts a funded buyer's payment of 1 unit (Cronos: {isValid: true, invalidReason: null})",
    ...boundTo(codec, target, "spec 2.4, 4.3; wire format › verify (invalidReason null when valid)"),
    needs: ["buyer"],
    async run(context) {
      const caseContext = await caseContextOf(context, target);
      const paymentRequirements = requirementsFor({ network: target.network, payTo: target.payTo, asset: target.token, amount: SMALLEST_AMOUNT });
      const paymentHeader = await signFor({ ...caseContext, requirements: paymentRequirements });
      codec.expectValid(await codec.send(context.http, "verify", { paymentHeader, paymentRequirements }), target.buyer!.address);
    },
  };
}

/** A header that fails two checks, and the first of them, which must be the answer. */
interface TwoFaults {
  faults: string;
  header(context: CaseContext): Promise<string>;
  expected: ExpectedReason;
}

const ANOTHER_TOKEN = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const HOUR = 3600n;

const TWO_FAULTS: readonly TwoFaults[] = [
  {
    faults: "scheme and amount",
    header: async (c) => tamper(await signFor(c), (json) => ((json.scheme = "streaming"), (json.payload.value = "0"))),
    expected: { key: "unsupportedScheme", text: VerifyReason.unsupportedScheme("streaming") },
  },
  {
    faults: "network and asset",
    header: async (c) => tamper(await signFor(c), (json) => ((json.network = "base-sepolia"), (json.payload.asset = ANOTHER_TOKEN))),
    expected: { key: "unsupportedNetwork", text: VerifyReason.unsupportedNetwork("base-sepolia") },
  },
  {
    faults: "asset and amount",
    header: async (c) => tamper(await signFor(c), (json) => ((json.payload.asset = ANOTHER_TOKEN), (json.payload.value = "0"))),
    expected: { key: "unsupportedAsset", text: VerifyReason.unsupportedAsset(ANOTHER_TOKEN) },
  },
  {
    faults: "amount and recipient",
    header: async (c) => tamper(await signFor(c), (json) => ((json.payload.value = "0"), (json.payload.to = privateKeyToAccount(generatePrivateKey()).address))),
    expected: { key: "invalidAmount", text: VerifyReason.invalidAmount("0") },
  },
  {
    faults: "recipient and signature (to changed after signing)",
    header: async (c) => tamper(await signFor(c), (json) => (json.payload.to = privateKeyToAccount(generatePrivateKey()).address)),
    expected: { key: "recipientMismatch", text: VerifyReason.recipientMismatch },
  },
  {
    faults: "signature and validity window (validBefore moved into the past after signing)",
    header: async (c) => tamper(await signFor(c), (json) => (json.payload.validBefore = Number(c.now - HOUR))),
    expected: { key: "invalidSignature", text: VerifyReason.invalidSignature },
  },
  {
    faults: "validity window and balance (an empty payer, valid from an hour ahead)",
    header: (c) => signFor(c, { validAfter: c.now + HOUR, validBefore: c.now + 2n * HOUR }),
    expected: { key: "notYetValid", text: VerifyReason.notYetValid },
  },
];

/** verify answers the first failing check, in the spec's order, for headers that fail two. */
export function verifyOrderCheck(codec: Codec, target: Target): Check {
  return {
    id: "verify.first-failure-wins",
    title: "verify answers the first failing check in the spec's order, for headers failing two (7 pairs)",
    ...boundTo(codec, target, "spec 4.3 (checks 1–7 in order); decisions › Verify: the first failure is the answer"),
    async run(context) {
      // An empty payer: the balance is the last check, so every pair's answer comes before it.
      const caseContext = { ...(await caseContextOf(context, target)), signer: freshSignerOf(context) };
      for (const pair of TWO_FAULTS) {
        const payment = { paymentHeader: await pair.header(caseContext), paymentRequirements: caseContext.requirements };
        try {
          codec.expectRefused("verify", await codec.send(context.http, "verify", payment), pair.expected, payment);
        } catch (error) {
          if (error instanceof CheckFailure) throw new CheckFailure(`for a header failing ${pair.faults}: ${error.message}`);
          throw error;
        }
      }
    },
  };
}

/** Every verify check of `codec` for `target` that needs no payment of this run. */
export function verifyChecks(codec: Codec, target: Target): Check[] {
  return [
    verifyAcceptsCheck(codec, target),
    ...refusalCases(REFUSAL_CASES, codec, target, false).map((refusal) => refusalCheck(codec, "verify", refusal, target)),
    verifyOrderCheck(codec, target),
  ];
}
