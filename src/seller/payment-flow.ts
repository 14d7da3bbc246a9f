// The payment flow of a request: verify, then settle, in the dialect the buyer paid in (x402 v2 or Cronos).
import express, { type Request, type Response } from "express";
import { z } from "zod";
import { decodeBase64Json, decodePaymentHeader } from "../protocol/header.js";
import { SettleError, SettleEvent, VerifyReason, X402_VERSION } from "../protocol/reasons.js";
import { describeZodError, type SettleSuccess } from "../protocol/schemas.js";
import { EvmReason, PAYMENT_IDENTIFIER, paymentIdentifierOf, v2PaymentPayloadSchema, X402V2Header, type V2PaymentRequirements, type V2SettleResponse } from "../protocol/x402v2.js";
import type { Exchange } from "./exchange.js";
import { SellerError, type PaymentReceipt } from "./options.js";
import { facilitatorV2Requirements } from "./payment-required.js";
import { onItsRoute, retry, settledRecord, withinRetryWindow, type Settled } from "./retry-window.js";
import { isPlainObject } from "./values.js";

const bodyHeaderSchema = z.object({ paymentHeader: z.string().trim().min(1) });

/** Reads a request's `X-PAYMENT`, or (with `acceptBodyHeader`) a JSON body's `paymentHeader`, parsing the body if no parser ran. */
export type HeaderReader = (req: Request, res: Response) => Promise<string | undefined>;

/** The {@link HeaderReader} of a route. */
export function headerReader(acceptBodyHeader: boolean): HeaderReader {
  const jsonParser = express.json();
  async function readHeader(req: Request, res: Response): Promise<string | undefined> {
    const header = req.get("X-PAYMENT")?.trim();
    if (header) return header;
    if (!acceptBodyHeader) return undefined;
    if (req.body === undefined && req.is("application/json")) {
      await new Promise<void>((resolve, reject) =>
        jsonParser(req, res, (error?: unknown) => (error ? reject(error) : resolve())),
      );
    }
    const body = bodyHeaderSchema.safeParse(req.body);
    return body.success ? body.data.paymentHeader : undefined;
  }
  return readHeader;
}

/** x402 v2 (`PAYMENT-SIGNATURE`): the payment is a base64 JSON object, passed to the facilitator untouched. */
export async function payV2(exchange: Exchange, signature: string, v2Requirements: V2PaymentRequirements): Promise<void> {
  const paymentRequirements = exchange.requirements;
  const decoded = decodeBase64Json(signature);
  const json = decoded.ok && isPlainObject(decoded.json) ? decoded.json : undefined;
  const local = exchange.settings.checkHeaderLocally && json ? v2PaymentPayloadSchema.safeParse(json) : undefined;
  if (json === undefined || (local && !local.success)) {
    const what = local && !local.success ? describeZodError(local.error) : "PAYMENT-SIGNATURE is not base64 JSON of an object";
    exchange.paymentRequired(SellerError.verificationFailed, VerifyReason.invalidPayload(what), EvmReason.unsupportedPayloadType);
    return;
  }
  const identifier = paymentIdentifierOf(isPlainObject(json.extensions) ? json.extensions : undefined);
  if ((identifier === undefined && exchange.settings.paymentIdentifier === "required") || (identifier && "error" in identifier)) {
    exchange.res.status(400).json({
      error: SellerError.paymentIdentifierRequired,
      details: identifier && "error" in identifier ? identifier.error : `this resource requires paymentPayload.extensions["${PAYMENT_IDENTIFIER}"].info.id`,
    });
    return;
  }
  const authorization = authorizationOfV2(json);
  const context = (receipt: PaymentReceipt, settlement: V2SettleResponse) =>
    ({ dialect: "x402v2", receipt, settlement, requirements: paymentRequirements, v2Requirements, paymentHeader: signature }) as const;
  /** A retry of a settled payment, answered from the facilitator's record as its settle answered it. */
  const serveAgain = (status: Settled) => {
    const settlement: V2SettleResponse = { success: true, payer: status.from, transaction: status.txHash, network: v2Requirements.network };
    const receipt: PaymentReceipt = { txHash: status.txHash, from: status.from, to: paymentRequirements.payTo, value: paymentRequirements.maxAmountRequired };
    exchange.paid(context(receipt, settlement), X402V2Header.paymentResponse, settlement);
  };
  // The seller's side of the request: its own requirements, with what it declares for the catalog.
  const request = { paymentPayload: json, paymentRequirements: facilitatorV2Requirements(exchange.req, paymentRequirements, v2Requirements) };
  const verification = await exchange.ask("verify", () => exchange.settings.facilitator.verifyV2(request));
  if (!verification) return;
  if (!verification.isValid) {
    const code = verification.invalidReason ?? "invalid_payment";
    const refuse = () => exchange.paymentRequired(SellerError.verificationFailed, verification.invalidMessage ?? code, code);
    if (code === EvmReason.nonceAlreadyUsed) await retry(exchange, v2Requirements.network, authorization, serveAgain, refuse);
    else refuse();
    return;
  }
  const settlement = await exchange.ask("settle", () => exchange.settings.facilitator.settleV2(request));
  if (!settlement) return;
  if (!settlement.success) {
    const code = settlement.errorReason ?? "settlement_failed";
    const refuse = () => exchange.paymentRequired(SellerError.settlementFailed, settlement.errorMessage ?? code, code);
    if (code === EvmReason.nonceAlreadyUsed) await retry(exchange, v2Requirements.network, authorization, serveAgain, refuse);
    else refuse();
    return;
  }
  if (identifier) {
    // Under a payment identifier the facilitator answers a repeat as it answered the first settle, which
    // carries no time in v2: the settlement's block time comes from its record.
    let status: Settled | undefined;
    try {
      status = authorization && (await settledRecord(exchange, v2Requirements.network, authorization));
    } catch (error) {
      exchange.unavailable("lookup", error);
      return;
    }
    if (!status || status.txHash.toLowerCase() !== settlement.transaction.toLowerCase()) {
      exchange.unavailable("lookup", new Error(`the facilitator's record does not confirm settlement ${settlement.transaction} of this payment`));
      return;
    }
    if (!withinRetryWindow(exchange, status.timestamp) || !onItsRoute(exchange, v2Requirements.network, authorization, Date.parse(status.timestamp))) return;
  } else if (!onItsRoute(exchange, v2Requirements.network, authorization, exchange.settings.clock())) {
    // A fresh settlement (v2 answers carry no time: now), bound to this route.
    return;
  }
  const receipt: PaymentReceipt = {
    txHash: settlement.transaction,
    from: settlement.payer ?? verification.payer ?? "",
    to: paymentRequirements.payTo,
    value: paymentRequirements.maxAmountRequired,
  };
  exchange.paid(context(receipt, settlement), X402V2Header.paymentResponse, settlement);
}

/** The Cronos dialect (`X-PAYMENT`, or a JSON body's `paymentHeader`). */
export async function payCronos(exchange: Exchange, readHeader: HeaderReader): Promise<void> {
  const paymentRequirements = exchange.requirements;
  let paymentHeader: string | undefined;
  try {
    paymentHeader = await readHeader(exchange.req, exchange.res);
  } catch (error) {
    exchange.next(error); // a body parser error (400 invalid JSON, 413 too large)
    return;
  }
  if (paymentHeader === undefined) {
    exchange.paymentRequired(SellerError.paymentRequired);
    return;
  }

  const decoded = decodePaymentHeader(paymentHeader);
  if (exchange.settings.checkHeaderLocally && !decoded.ok) {
    exchange.paymentRequired(
      SellerError.verificationFailed,
      decoded.kind === "base64" ? VerifyReason.invalidBase64 : VerifyReason.invalidHeader(decoded.detail),
    );
    return;
  }
  const header = paymentHeader;
  const authorization = decoded.ok ? decoded.payload.authorization : undefined;
  const served = (settlement: SettleSuccess) => {
    const receipt: PaymentReceipt = {
      txHash: settlement.txHash,
      from: settlement.from,
      to: settlement.to,
      value: settlement.value,
      blockNumber: settlement.blockNumber,
      timestamp: settlement.timestamp,
    };
    exchange.paid({ dialect: "cronos", receipt, settlement, requirements: paymentRequirements, paymentHeader: header }, "X-PAYMENT-RESPONSE", cronosResponse(settlement));
  };
  /** A retry of a settled payment, answered from the facilitator's record in the settle answer's shape. */
  const serveAgain = (status: Settled) =>
    served({
      x402Version: X402_VERSION,
      event: SettleEvent.settled,
      network: paymentRequirements.network,
      timestamp: status.timestamp,
      txHash: status.txHash,
      from: status.from,
      to: status.to,
      value: status.value,
      blockNumber: status.blockNumber,
    });

  const request = { x402Version: X402_VERSION, paymentHeader, paymentRequirements } as const;
  const verification = await exchange.ask("verify", () => exchange.settings.facilitator.verify(request));
  if (!verification) return;
  if (!verification.isValid) {
    const refuse = () => exchange.paymentRequired(SellerError.verificationFailed, verification.invalidReason ?? "Payment is not valid");
    if (verification.invalidReason === VerifyReason.alreadyUsed) await retry(exchange, paymentRequirements.network, authorization, serveAgain, refuse);
    else refuse();
    return;
  }

  const settlement = await exchange.ask("settle", () => exchange.settings.facilitator.settle(request));
  if (!settlement) return;
  if (settlement.event !== SettleEvent.settled) {
    const refuse = () => exchange.paymentRequired(SellerError.settlementFailed, settlement.error);
    if (settlement.error === SettleError.alreadyUsed) await retry(exchange, paymentRequirements.network, authorization, serveAgain, refuse);
    else refuse();
    return;
  }
  // A facilitator that answers a repeat with the first settle answer is held to the same window and route.
  if (withinRetryWindow(exchange, settlement.timestamp) && onItsRoute(exchange, paymentRequirements.network, authorization, Date.parse(settlement.timestamp))) served(settlement);
}

/** The payer and nonce of an x402 v2 payment, when it has them as strings. */
function authorizationOfV2(payment: Record<string, unknown>): { from: string; nonce: string } | undefined {
  const payload = payment.payload;
  const authorization = isPlainObject(payload) ? payload.authorization : undefined;
  if (!isPlainObject(authorization)) return undefined;
  const { from, nonce } = authorization;
  return typeof from === "string" && typeof nonce === "string" ? { from, nonce } : undefined;
}

/** The settle answer with its fields in the spec's order, as `X-PAYMENT-RESPONSE` carries it. */
function cronosResponse(settlement: SettleSuccess): SettleSuccess {
  const { x402Version, event, network, timestamp, txHash, from, to, value, blockNumber } = settlement;
  return { x402Version, event, network, timestamp, txHash, from, to, value, blockNumber };
}