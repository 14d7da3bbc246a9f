import { decodePaymentHeader } from "../../protocol/header.js";
import { NETWORKS } from "../../protocol/networks.js";
import type { DecodedPayload } from "../../protocol/payment.js";
import { EXACT_SCHEME, RequestError, SettleEvent, verifyReasonText, X402_VERSION } from "../../protocol/reasons.js";
import { fastCronosRequest } from "../../protocol/fast-parse.js";
import { facilitatorRequestSchema } from "../../protocol/schemas.js";
import { isCaip2, networkOfCaip2 } from "../../protocol/x402v2.js";
import { checkedBody, isJsonObject, settleErrorText, type DialectCodec, type Echo, type ReadResult } from "./codec.js";

/**
 * The Cronos dialect (the official `@crypto.com/facilitator-client`): `x402Version: 1`, a base64
 * `paymentHeader`, networks `cronos-testnet` / `cronos-mainnet` / `cronos`. Its answers are the ones
 * of `decisions.md`, byte for byte.
 */
export const cronosDialect: DialectCodec = {
  name: "cronos",

  read(body, headerVersion, clock): ReadResult {
    let since = clock.start();
    const echo: Echo = { network: answerNetwork(body) };
    const fail = (text: string): ReadResult => ({ ok: false, text, echo });
    if (headerVersion !== undefined && headerVersion.trim() !== String(X402_VERSION)) {
      return fail(RequestError.unsupportedVersion(headerVersion.trim()));
    }
    if (!isJsonObject(body)) return fail(RequestError.invalidRequest("body must be a JSON object"));
    const version = body.x402Version;
    if (typeof version === "number" && version !== X402_VERSION) return fail(RequestError.unsupportedVersion(version));
    const mixed = mixedDialects(body);
    if (mixed) return fail(RequestError.invalidRequest(mixed));
    const request = checkedBody(body, fastCronosRequest, facilitatorRequestSchema, ({ paymentHeader, paymentRequirements: r }) => ({
      paymentHeader,
      requirements: { scheme: r.scheme, network: r.network, payTo: r.payTo, asset: r.asset, amount: r.maxAmountRequired },
    }));
    if (!request.ok) return fail(RequestError.invalidRequest(request.error));
    const { paymentHeader, requirements } = request.value;
    since = clock.lap("schema", since);
    const decoded = decodePaymentHeader(paymentHeader);
    let payload: DecodedPayload;
    if (decoded.ok) {
      const { x402Version: _version, ...payer } = decoded.payload;
      payload = { ok: true, payload: payer };
    } else {
      payload =
        decoded.kind === "base64"
          ? { ok: false, code: "base64" }
          : { ok: false, code: "header", detail: decoded.detail };
    }
    clock.stop("headerDecode", since);
    return {
      ok: true,
      payment: { requirements, payload },
      echo: { network: requirements.network, ...(payload.ok ? { payer: payload.payload.authorization.from } : {}) },
    };
  },

  verifyAnswer(outcome) {
    return { isValid: outcome.isValid, invalidReason: outcome.isValid ? null : verifyReasonText(outcome) };
  },

  verifyText: verifyReasonText,

  settleAnswer(outcome, echo) {
    if (!outcome.settled) return failed(echo.network, settleErrorText(outcome, verifyReasonText), outcome.txHash);
    return {
      x402Version: X402_VERSION,
      event: SettleEvent.settled,
      txHash: outcome.txHash,
      from: outcome.from,
      to: outcome.to,
      value: outcome.value.toString(),
      blockNumber: Number(outcome.blockNumber),
      network: echo.network,
      timestamp: outcome.timestamp,
    };
  },

  refusal(route, kind, text, echo) {
    // decisions.md: a fault also carries `error` (settle's shape has it already).
    if (route === "verify") return { isValid: false, invalidReason: text, ...(kind === "invalid" ? {} : { error: text }) };
    // A settle fault (503) is not a verdict: nothing was sent, and a retry may settle. No `event`, so no
    // client reads it as `payment.failed`.
    if (kind !== "invalid") return { x402Version: X402_VERSION, network: echo.network, timestamp: new Date().toISOString(), error: text };
    return failed(echo.network, text);
  },

  kind(network) {
    return { x402Version: X402_VERSION, scheme: EXACT_SCHEME, network };
  },
};

function failed(network: string, error: string, txHash?: string) {
  return {
    x402Version: X402_VERSION,
    event: SettleEvent.failed,
    network,
    timestamp: new Date().toISOString(),
    error,
    ...(txHash ? { txHash } : {}),
  };
}

/** What in a Cronos-dialect body belongs to x402 v2, if anything. */
function mixedDialects(body: Record<string, unknown>): string | undefined {
  if ("paymentPayload" in body) {
    return "paymentPayload is x402 v2's field: the Cronos dialect (x402Version 1) sends a paymentHeader string";
  }
  const network = isJsonObject(body.paymentRequirements) ? body.paymentRequirements.network : undefined;
  if (typeof network === "string" && isCaip2(network)) {
    const known = networkOfCaip2(network);
    const name = known ? `names it ${NETWORKS[known].network}` : "names networks cronos-testnet or cronos-mainnet";
    return `paymentRequirements.network ${network} is an x402 v2 (CAIP-2) network: the Cronos dialect (x402Version 1) ${name}`;
  }
  return undefined;
}

/** The network name to answer with: as the caller sent it in any body, parsed or not; else "unknown". */
export function answerNetwork(body: unknown): string {
  const network = (body as { paymentRequirements?: { network?: unknown } } | null | undefined)?.paymentRequirements?.network;
  return typeof network === "string" ? network : "unknown";
}
