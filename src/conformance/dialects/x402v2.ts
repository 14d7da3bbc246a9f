import type { Address, Hex } from "viem";
import { canonicalNetwork, NETWORKS } from "../../protocol/networks.js";
import type { PaymentRequirements } from "../../protocol/schemas.js";
import { caip2OfNetwork, EvmReason, isCaip2, V2RequestReason, v2SettleResponseSchema, X402_V2_VERSION } from "../../protocol/x402v2.js";
import { describeZodError } from "../../protocol/schemas.js";
import { brief } from "../brief.js";
import { decodeHeaderJson } from "../case-payment.js";
import type { ExpectedReason, VerifyReasonKey } from "../expected-reason.js";
import { fail } from "../check.js";
import type { CasePayment, Codec } from "../codec.js";
import { expectJson, expectObject } from "../expect.js";
import { describeAnswer, PATHS, type Answer } from "../http.js";

/** The code `@x402/evm` answers for each refusal (x402 v2 `invalidReason` / `errorReason`). */
export const V2_CODE: Readonly<Record<VerifyReasonKey, string>> = {
  invalidBase64: EvmReason.unsupportedPayloadType,
  invalidHeader: EvmReason.unsupportedPayloadType,
  invalidPayload: EvmReason.unsupportedPayloadType,
  unsupportedScheme: EvmReason.invalidScheme,
  unsupportedNetwork: EvmReason.networkMismatch,
  unsupportedAsset: EvmReason.eip3009NotSupported,
  invalidAmount: EvmReason.valueMismatch,
  recipientMismatch: EvmReason.recipientMismatch,
  invalidSignature: EvmReason.invalidSignature,
  notYetValid: EvmReason.validAfter,
  expired: EvmReason.validBefore,
  alreadyUsed: EvmReason.nonceAlreadyUsed,
  insufficientBalance: EvmReason.insufficientBalance,
  paymentIdentifierInUse: V2RequestReason.paymentIdentifierConflict,
  refusedByOperator: V2RequestReason.refusedByOperator,
};

/** CAIP-2 ids of the networks the cases name that the kit does not serve. */
const OTHER_CAIP2: Readonly<Record<string, string>> = { "base-sepolia": "eip155:84532" };

/** A network of a Cronos-dialect payment as x402 v2 names it. */
export function v2Network(network: string): string {
  return caip2OfNetwork(network) ?? OTHER_CAIP2[network] ?? network;
}

/** The x402 v2 form of a case's requirements: CAIP-2 network, `amount`, the token's EIP-712 domain in `extra`. */
function v2Requirements(requirements: PaymentRequirements) {
  const canonical = canonicalNetwork(requirements.network);
  const domain = canonical ? NETWORKS[canonical].domain : NETWORKS["cronos-testnet"].domain;
  return {
    scheme: requirements.scheme,
    network: v2Network(requirements.network),
    asset: requirements.asset,
    amount: requirements.maxAmountRequired,
    payTo: requirements.payTo,
    maxTimeoutSeconds: requirements.maxTimeoutSeconds ?? 300,
    extra: { name: domain.name, version: domain.version },
  };
}

/**
 * The x402 v2 body of a case's payment, as `@x402/core`'s client posts it: the header's authorization and
 * signature as `paymentPayload.payload` (numbers as decimal strings), its scheme, network and asset as
 * `accepted`. The signature is the one the case made: the same EIP-712 message in either dialect.
 */
export function v2BodyOf(payment: CasePayment) {
  const paymentRequirements = v2Requirements(payment.paymentRequirements as PaymentRequirements);
  const header = decodeHeaderJson(payment.paymentHeader);
  const signed = header.payload as Record<string, unknown> | undefined;
  const accepted = {
    ...paymentRequirements,
    scheme: header.scheme,
    network: v2Network(header.network),
    asset: (signed?.asset as string | undefined) ?? paymentRequirements.asset,
  };
  const text = (value: unknown) => (typeof value === "number" || typeof value === "bigint" ? String(value) : value);
  const payload =
    signed === undefined
      ? undefined
      : {
          signature: signed.signature,
          authorization: {
            from: signed.from,
            to: signed.to,
            value: text(signed.value),
            validAfter: text(signed.validAfter),
            validBefore: text(signed.validBefore),
            nonce: signed.nonce,
          },
        };
  return {
    x402Version: X402_V2_VERSION,
    paymentPayload: { x402Version: X402_V2_VERSION, accepted, ...(payload ? { payload } : {}) },
    paymentRequirements,
  };
}

/** The payer a case's payment names, when its header has one. */
function payerOf(payment: CasePayment): string | undefined {
  const from = (decodeHeaderJson(payment.paymentHeader).payload as { from?: unknown } | undefined)?.from;
  return typeof from === "string" && /^0x[0-9a-fA-F]{40}$/.test(from) ? from : undefined;
}

/** `payer`, when an answer carries it, names the payment's payer. */
function expectPayer(answer: Answer, body: Record<string, unknown>, payer: string | undefined, what: string): void {
  if (body.payer === undefined || payer === undefined) return;
  if (typeof body.payer !== "string" || body.payer.toLowerCase() !== payer.toLowerCase()) fail(`${what} with payer ${payer}`, describeAnswer(answer));
}

/**
 * x402 v2 as the `@x402/*` packages speak it: `{x402Version: 2, paymentPayload, paymentRequirements}`,
 * answered `{isValid, invalidReason?, payer}` and `{success, errorReason?, payer, transaction, network}`
 * with `@x402/evm`'s reason codes.
 */
export const x402v2Codec: Codec = {
  dialect: "x402-v2",
  networkName: (target) => `eip155:${target.chainId}`,
  expresses: (refusal) => refusal.dialects === undefined || refusal.dialects.includes("x402-v2"),
  send: (http, operation, payment) => http.post(PATHS[operation], v2BodyOf(payment), { "X402-Version": String(X402_V2_VERSION) }),

  expectRefused(operation, answer, expected, payment) {
    const code = codeOf(expected);
    if (operation === "verify") {
      const what = `verify's refusal {isValid: false, invalidReason: "${code}"}`;
      const body = expectObject(expectJson(answer, 200, what), what);
      if (body.isValid !== false || body.invalidReason !== code) fail(what, describeAnswer(answer));
      expectPayer(answer, body, payerOf(payment), what);
      return {};
    }
    const network = v2Network(String((payment.paymentRequirements as { network?: unknown }).network));
    const what = `settle's refusal {success: false, errorReason: "${code}", transaction, network: "${network}"}`;
    const body = expectObject(expectJson(answer, 200, what), what);
    if (body.success !== false || body.errorReason !== code) fail(what, describeAnswer(answer));
    const parsed = v2SettleResponseSchema.safeParse(body);
    if (!parsed.success) fail(`${what} with a transaction string and the network`, `${describeZodError(parsed.error)} in ${brief(body)}`);
    if (parsed.data.network !== network) fail(`${what} for the network as sent`, describeAnswer(answer));
    expectPayer(answer, body, payerOf(payment), what);
    return parsed.data.transaction === "" ? {} : { txHash: parsed.data.transaction as Hex };
  },

  expectValid(answer, payer) {
    const what = `verify's acceptance {isValid: true, payer: "${payer}"}`;
    const body = expectObject(expectJson(answer, 200, what), what);
    if (body.isValid !== true || body.invalidReason !== undefined || typeof body.payer !== "string" || body.payer.toLowerCase() !== payer.toLowerCase()) {
      fail(what, describeAnswer(answer));
    }
  },

  expectSettled(answer, expected) {
    const network = `eip155:${expected.target.chainId}`;
    const what = `settle's success {success: true, payer, transaction, network: "${network}"}`;
    const body = expectObject(expectJson(answer, 200, what), what);
    const parsed = v2SettleResponseSchema.safeParse(body);
    if (body.success !== true || !parsed.success) fail(what, parsed.success ? describeAnswer(answer) : `${describeZodError(parsed.error)} in ${brief(body)}`);
    const problems: string[] = [];
    if (!/^0x[0-9a-fA-F]{64}$/.test(parsed.data.transaction)) problems.push(`transaction ${JSON.stringify(parsed.data.transaction)} (expected a transaction hash)`);
    if (parsed.data.network !== network) problems.push(`network ${parsed.data.network} (expected ${network}, as sent)`);
    if (parsed.data.payer?.toLowerCase() !== expected.payer.toLowerCase()) problems.push(`payer ${parsed.data.payer} (expected ${expected.payer})`);
    if (parsed.data.errorReason !== undefined) problems.push(`errorReason ${parsed.data.errorReason} on a success`);
    if (problems.length > 0) fail(what, `${problems.join("; ")} in ${describeAnswer(answer)}`);
    return { txHash: parsed.data.transaction as Hex };
  },

  isSettled: (answer) => (answer.json as { success?: unknown } | undefined)?.success === true,
};

function codeOf(expected: ExpectedReason): string {
  if (expected.key === undefined) throw new Error("x402 v2 refusals are checked by reason code; this expectation has none");
  return V2_CODE[expected.key];
}

/** Whether a network id is how x402 v2 names networks (for the supported check). */
export function isV2Network(network: unknown): network is string {
  return typeof network === "string" && isCaip2(network);
}

/** The addresses in a supported answer's `signers` map. */
export function signersOf(supported: unknown): Address[] {
  const signers = (supported as { signers?: Record<string, unknown> } | undefined)?.signers;
  return signers ? Object.values(signers).flat().filter((value): value is Address => typeof value === "string") : [];
}
