import { signedAuthorization } from "../../protocol/header.js";
import type { DecodedPayload } from "../../protocol/payment.js";
import { EXACT_SCHEME, RequestError, VerifyReason, verifyReasonText, type VerifyReasonCode, type VerifyRefusal } from "../../protocol/reasons.js";
import { fastV2Payment, fastV2Request } from "../../protocol/fast-parse.js";
import {
  caip2OfNetwork,
  EvmReason,
  isCaip2,
  networkOfCaip2,
  paymentIdentifierOf,
  v2FacilitatorRequestSchema,
  v2PaymentPayloadSchema,
  V2RequestReason,
  X402_V2_VERSION,
} from "../../protocol/x402v2.js";
import type { SettleFailureCode } from "../../settlement/settle.js";
import { checkedBody, isJsonObject, settleErrorText, type DialectCodec, type Echo, type ReadResult, type RefusalKind } from "./codec.js";

/** The `@x402/evm` code of each refusal verify and settle share (their texts are the same in both). */
const V2_SHARED_REASON_OF = {
  base64: EvmReason.unsupportedPayloadType,
  header: EvmReason.unsupportedPayloadType,
  scheme: EvmReason.invalidScheme,
  network: EvmReason.networkMismatch,
  asset: EvmReason.eip3009NotSupported,
  amount: EvmReason.valueMismatch,
  recipient: EvmReason.recipientMismatch,
  notYetValid: EvmReason.validAfter,
  expired: EvmReason.validBefore,
  paymentId: V2RequestReason.paymentIdentifierConflict,
  refused: V2RequestReason.refusedByOperator,
} as const;

/**
 * The code `@x402/evm` answers for the same condition, per verify refusal. `docs/conformance.md` lists
 * this table next to the Cronos texts.
 */
export const V2_REASON_OF: Readonly<Record<VerifyReasonCode, string>> = {
  ...V2_SHARED_REASON_OF,
  signature: EvmReason.invalidSignature,
  used: EvmReason.nonceAlreadyUsed,
  balance: EvmReason.insufficientBalance,
};

/** The same per settle failure code (settle's own codes where it has a word, verify's where not). */
export const V2_SETTLE_REASON_OF: Readonly<Record<SettleFailureCode, string>> = {
  ...V2_SHARED_REASON_OF,
  invalidSignature: EvmReason.invalidSignature,
  alreadyUsed: EvmReason.nonceAlreadyUsed,
  insufficientBalance: EvmReason.insufficientBalance,
  failedOnChain: EvmReason.transactionFailed,
};

const REQUEST_REASON_OF: Readonly<Record<RefusalKind, string>> = {
  invalid: V2RequestReason.invalidRequest,
  unavailable: V2RequestReason.unavailable,
  internal: V2RequestReason.internal,
};

/**
 * The x402 v2 dialect (the `@x402/*` packages, e.g. `@x402/core`'s `HTTPFacilitatorClient`):
 * `{x402Version: 2, paymentPayload, paymentRequirements}` with CAIP-2 networks and `amount`, answered
 * `{isValid, invalidReason?, invalidMessage?, payer}` and `{success, errorReason?, errorMessage?, payer, transaction, network}`
 * with `@x402/evm`'s reason codes (the Cronos text goes in `invalidMessage` / `errorMessage`).
 */
export const x402v2Dialect: DialectCodec = {
  name: "x402v2",

  read(body, headerVersion, clock): ReadResult {
    let since = clock.start();
    const requirements = isJsonObject(body) ? body.paymentRequirements : undefined;
    const sentNetwork = isJsonObject(requirements) && typeof requirements.network === "string" ? requirements.network : "unknown";
    const echo: Echo = { network: sentNetwork };
    const fail = (text: string): ReadResult => ({ ok: false, text, echo });
    if (headerVersion !== undefined && headerVersion.trim() !== String(X402_V2_VERSION)) {
      const version = headerVersion.trim();
      return fail(
        version === "1"
          ? RequestError.invalidRequest("the X402-Version header says 1 (the Cronos dialect) but the body is x402Version 2")
          : RequestError.unsupportedVersion(version),
      );
    }
    if (!isJsonObject(body)) return fail(RequestError.invalidRequest("body must be a JSON object"));
    if (typeof body.x402Version === "number" && body.x402Version !== X402_V2_VERSION) {
      return fail(RequestError.unsupportedVersion(body.x402Version));
    }
    const mixed = mixedDialects(body);
    if (mixed) return fail(RequestError.invalidRequest(mixed));
    const request = checkedBody(body, fastV2Request, v2FacilitatorRequestSchema, ({ paymentPayload, paymentRequirements: r }) => ({
      paymentPayload,
      requirements: { scheme: r.scheme, network: r.network, payTo: r.payTo, asset: r.asset, amount: r.amount },
    }));
    if (!request.ok) return fail(RequestError.invalidRequest(request.error));
    const { paymentPayload, requirements: terms } = request.value;
    since = clock.lap("schema", since);
    const checked = checkedBody(paymentPayload, (p) => fastV2Payment(p as Record<string, unknown>), v2PaymentPayloadSchema, ({ accepted, payload: signed, extensions }) => ({
      accepted: { scheme: accepted.scheme, network: accepted.network, asset: accepted.asset },
      authorization: signed.authorization,
      signature: signed.signature,
      extensions,
    }));
    const identifier = checked.ok ? paymentIdentifierOf(checked.value.extensions) : undefined;
    if (identifier && "error" in identifier) return fail(RequestError.invalidRequest(identifier.error));
    let payload: DecodedPayload;
    if (checked.ok) {
      const payment = checked.value;
      const { accepted } = payment;
      payload = {
        ok: true,
        payload: {
          scheme: accepted.scheme,
          network: networkOfCaip2(accepted.network) ?? accepted.network,
          asset: accepted.asset,
          authorization: signedAuthorization(payment.authorization, payment.signature),
        },
      };
    } else {
      payload = { ok: false, code: "header", detail: checked.error };
    }
    clock.stop("headerDecode", since);
    return {
      ok: true,
      payment: {
        requirements: {
          scheme: terms.scheme,
          network: networkOfCaip2(terms.network) ?? terms.network,
          payTo: terms.payTo,
          asset: terms.asset,
          amount: terms.amount,
        },
        payload,
        ...(identifier ? { paymentId: identifier.id } : {}),
      },
      echo: { network: terms.network, ...(payload.ok ? { payer: payload.payload.authorization.from } : {}) },
    };
  },

  verifyAnswer(outcome, echo) {
    if (outcome.isValid) return { isValid: true, payer: echo.payer };
    return { isValid: false, invalidReason: V2_REASON_OF[outcome.code], invalidMessage: v2VerifyText(outcome), ...payer(echo) };
  },

  verifyText: v2VerifyText,

  settleAnswer(outcome, echo) {
    if (outcome.settled) return { success: true, payer: outcome.from, transaction: outcome.txHash, network: echo.network };
    return {
      success: false,
      errorReason: V2_SETTLE_REASON_OF[outcome.code],
      errorMessage: settleErrorText(outcome, v2VerifyText),
      ...payer(echo),
      transaction: outcome.txHash ?? "",
      network: echo.network,
    };
  },

  refusal(route, kind, text, echo) {
    const reason = REQUEST_REASON_OF[kind];
    if (route === "verify") return { isValid: false, invalidReason: reason, invalidMessage: text };
    return { success: false, errorReason: reason, errorMessage: text, transaction: "", network: echo.network };
  },

  kind(network) {
    return { x402Version: X402_V2_VERSION, scheme: EXACT_SCHEME, network: caip2OfNetwork(network)! };
  },
};

/** A verify refusal in x402 v2's words: the payer's part is its `paymentPayload`; the rest as the Cronos dialect words it. */
function v2VerifyText(refusal: VerifyRefusal): string {
  return refusal.code === "header" ? VerifyReason.invalidPayload(refusal.detail ?? "") : verifyReasonText(refusal);
}

function payer(echo: Echo): { payer?: string } {
  return echo.payer ? { payer: echo.payer } : {};
}

/** What in an x402 v2 body belongs to the Cronos dialect, if anything. */
function mixedDialects(body: Record<string, unknown>): string | undefined {
  if ("paymentHeader" in body) {
    return "paymentHeader is the Cronos dialect's field (x402Version 1): x402Version 2 sends a paymentPayload object";
  }
  const requirements = isJsonObject(body.paymentRequirements) ? body.paymentRequirements : {};
  if ("maxAmountRequired" in requirements && !("amount" in requirements)) {
    return "paymentRequirements.maxAmountRequired is the Cronos dialect's field (x402Version 1): x402Version 2 names it amount";
  }
  const accepted = isJsonObject(body.paymentPayload) && isJsonObject(body.paymentPayload.accepted) ? body.paymentPayload.accepted : {};
  for (const [field, network] of [
    ["paymentRequirements.network", requirements.network],
    ["paymentPayload.accepted.network", accepted.network],
  ] as const) {
    if (typeof network === "string" && !isCaip2(network)) {
      const caip2 = caip2OfNetwork(network);
      const hint = caip2 ? `names it ${caip2}` : "names networks in CAIP-2 (eip155:<chain id>)";
      return `${field} ${network} is a Cronos-dialect network name (x402Version 1): x402Version 2 ${hint}`;
    }
  }
  return undefined;
}
