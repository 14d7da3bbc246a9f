import express, { type NextFunction, type Request, type RequestHandler, type Response } from "express";
import { z } from "zod";
import { canonicalNetwork, NETWORKS } from "../protocol/networks.js";
import { decodePaymentHeader } from "../protocol/header.js";
import { EXACT_SCHEME, SettleEvent, VerifyReason, X402_VERSION } from "../protocol/reasons.js";
import {
  parsePaymentRequirements,
  type PaymentRequirements,
  type PaymentRequirementsInput,
  type SettleSuccess,
} from "../protocol/schemas.js";
import { createFacilitatorClient, type FacilitatorClient } from "./facilitator-client.js";

/** A seller configuration mistake: requirements that are not valid payment requirements. */
export class InvalidRequirementsError extends Error {
  override name = "InvalidRequirementsError";
}

/** Input of {@link paymentRequirements}. */
export interface PaymentRequirementsOptions {
  /** `cronos-testnet`, `cronos-mainnet` or its alias `cronos` (kept as written), or another network with `asset`. */
  network: string;
  /** The seller's address that receives the payment. */
  payTo: string;
  /** Price in the token's base units (USDC.e has 6 decimals: `"1000000"` or `1_000_000n` is 1 USDC.e). */
  amount: string | bigint;
  /** Token address. Default: the network's USDC.e from `NETWORKS`. */
  asset?: string;
  /** Default `"X402 payment request"` (the official client's). */
  description?: string;
  /** MIME type of the paid content. Default `"application/json"`. */
  mimeType?: string;
  /** Default 300. */
  maxTimeoutSeconds?: number;
  /** URL of the paid resource. Omitted when not given. */
  resource?: string;
  /** Scheme-specific extra data, passed through. Omitted when not given. */
  extra?: Record<string, unknown>;
}

/** Defaults of {@link paymentRequirements}, the official client's. */
export const REQUIREMENTS_DEFAULTS = {
  description: "X402 payment request",
  mimeType: "application/json",
  maxTimeoutSeconds: 300,
} as const;

/**
 * Builds the wire payment requirements:
 * `{scheme: "exact", network, payTo, asset, maxAmountRequired, description, mimeType, maxTimeoutSeconds, resource?, extra?}`.
 * `payTo` is checksummed.
 *
 * @throws {InvalidRequirementsError} on an invalid address or amount, or an unknown network without `asset`.
 */
export function paymentRequirements(options: PaymentRequirementsOptions): PaymentRequirements {
  const canonical = canonicalNetwork(options.network);
  const asset = options.asset ?? (canonical ? NETWORKS[canonical].token : undefined);
  if (asset === undefined) {
    throw new InvalidRequirementsError(`unknown network "${options.network}": pass the token address as \`asset\``);
  }
  if (typeof options.amount === "bigint" && options.amount < 0n) {
    throw new InvalidRequirementsError(`amount must not be negative, got ${options.amount}`);
  }
  return parseRequirements({
    scheme: EXACT_SCHEME,
    network: options.network,
    payTo: options.payTo,
    asset,
    maxAmountRequired: String(options.amount),
    description: options.description ?? REQUIREMENTS_DEFAULTS.description,
    mimeType: options.mimeType ?? REQUIREMENTS_DEFAULTS.mimeType,
    maxTimeoutSeconds: options.maxTimeoutSeconds ?? REQUIREMENTS_DEFAULTS.maxTimeoutSeconds,
    ...(options.resource === undefined ? {} : { resource: options.resource }),
    ...(options.extra === undefined ? {} : { extra: options.extra }),
  });
}

function parseRequirements(input: unknown): PaymentRequirements {
  const parsed = parsePaymentRequirements(input);
  if (!parsed.ok) throw new InvalidRequirementsError(`invalid payment requirements: ${parsed.problem}`);
  return parsed.requirements;
}

/** Requirements for a route: fixed, or computed per request (e.g. a price that depends on the query). */
export type RequirementsSource =
  | PaymentRequirementsInput
  | ((req: Request) => PaymentRequirementsInput | Promise<PaymentRequirementsInput>);

/** Where the middleware finds the facilitator. */
export type FacilitatorOption =
  | {
      facilitatorUrl: string;
      /** Limit of a verify call in ms (default 30 000). */
      timeoutMs?: number;
      /** Limit of a settle call in ms (default 150 000, beyond the facilitator's own receipt wait). */
      settleTimeoutMs?: number;
      facilitator?: never;
    }
  | { facilitator: FacilitatorClient; facilitatorUrl?: never; timeoutMs?: never; settleTimeoutMs?: never };

/** Options of {@link requirePayment}. */
export type RequirePaymentOptions = FacilitatorOption & {
  /** Overrides the requirements' `description`. */
  description?: string;
  /**
   * Also accept the header as a `paymentHeader` field of a JSON body (default true). When no body
   * parser ran before, a JSON body is parsed here with `express.json()` (only if `X-PAYMENT` is absent);
   * parse errors go to `next(err)`.
   */
  acceptBodyHeader?: boolean;
  /**
   * Answer 402 without calling the facilitator when the header is not base64 JSON of a payment
   * (default true), with the reason the facilitator would give (`Invalid Base64 paymentHeader`,
   * `Invalid paymentHeader: …`): the same answer, one round trip less.
   */
  checkHeaderLocally?: boolean;
  /** Merge `payment` into JSON object bodies sent with `res.json` / `res.send` (default true). */
  mergePaymentIntoJson?: boolean;
};

/** The settled payment as it is given to the handler and merged into its JSON answer. */
export interface PaymentReceipt {
  txHash: string;
  from: string;
  to: string;
  value: string;
  blockNumber: number;
  /** ISO time of the settlement, as the facilitator reported it. */
  timestamp: string;
}

/** Everything known about the payment of a request that passed {@link requirePayment}. */
export interface PaymentContext {
  receipt: PaymentReceipt;
  /** The facilitator's settle answer (also sent base64-encoded in `X-PAYMENT-RESPONSE`). */
  settlement: SettleSuccess;
  /** The requirements the payment was verified and settled against. */
  requirements: PaymentRequirements;
  /** The buyer's `X-PAYMENT` value. */
  paymentHeader: string;
}

/** Error texts of the seller's answers. */
export const SellerError = {
  paymentRequired: "Payment Required",
  verificationFailed: "Payment verification failed",
  settlementFailed: "Payment settlement failed",
  verifyRequestFailed: "Facilitator verify request failed",
  settleRequestFailed: "Facilitator settle request failed",
  requirementsUnavailable: "Payment requirements unavailable",
} as const;

const contexts = new WeakMap<Request, PaymentContext>();

/** The payment of a request that passed {@link requirePayment}, or `undefined`. */
export function getPayment(req: Request): PaymentContext | undefined {
  return contexts.get(req);
}

const bodyHeaderSchema = z.object({ paymentHeader: z.string().trim().min(1) });

/**
 * Express 5 middleware that lets a request through only once it is paid (x402, spec 7.3):
 *
 * - no `X-PAYMENT` header (any case) nor JSON body field `paymentHeader` → 402
 *   `{error: "Payment Required", x402Version: 1, paymentRequirements, accepts: [paymentRequirements]}`;
 * - verify answers `isValid: false` → 402, same body with `error: "Payment verification failed"` and `reason`;
 * - settle answers `payment.failed` → 402, same body with `error: "Payment settlement failed"` and `reason`;
 * - the facilitator cannot be reached, times out, answers non-2xx or an invalid answer → 500 `{error, details}`;
 * - settled → `X-PAYMENT-RESPONSE` (base64 JSON of the settle answer) is set and the handler runs.
 *
 * Hand-off to the handler: `res.locals.payment` is the {@link PaymentReceipt}
 * (`{txHash, from, to, value, blockNumber, timestamp}`), {@link getPayment}`(req)` gives the whole
 * {@link PaymentContext}, and `res.json` is wrapped so that a plain-object body gets `payment: receipt`
 * merged in (unless it already has a `payment` key); arrays, strings and buffers are sent unchanged.
 *
 * Settlement happens before the handler runs, as the spec orders: a handler that fails afterwards
 * has still been paid for.
 *
 * @throws {InvalidRequirementsError} at set-up, for fixed requirements that are invalid (computed ones
 *   that are invalid answer 500 `{error: "Payment requirements unavailable", details}`).
 */
export function requirePayment(requirements: RequirementsSource, options: RequirePaymentOptions): RequestHandler {
  const facilitator = facilitatorOf(options);
  const withDescription = (input: PaymentRequirementsInput): PaymentRequirementsInput =>
    options.description === undefined ? input : { ...input, description: options.description };
  const resolveRequirements: (req: Request) => Promise<PaymentRequirements> =
    typeof requirements === "function"
      ? async (req) => parseRequirements(withDescription(await requirements(req)))
      : constant(parseRequirements(withDescription(requirements)));
  const acceptBodyHeader = options.acceptBodyHeader ?? true;
  const checkHeaderLocally = options.checkHeaderLocally ?? true;
  const mergePayment = options.mergePaymentIntoJson ?? true;
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

  return async (req: Request, res: Response, next: NextFunction) => {
    let paymentRequirements: PaymentRequirements;
    try {
      paymentRequirements = await resolveRequirements(req);
    } catch (error) {
      res.status(500).json({ error: SellerError.requirementsUnavailable, details: messageOf(error) });
      return;
    }
    const paymentRequired = (error: string, reason?: string) => {
      res.status(402).json({
        error,
        x402Version: X402_VERSION,
        paymentRequirements,
        accepts: [paymentRequirements],
        ...(reason === undefined ? {} : { reason }),
      });
    };

    let paymentHeader: string | undefined;
    try {
      paymentHeader = await readHeader(req, res);
    } catch (error) {
      next(error); // a body parser error (400 invalid JSON, 413 too large)
      return;
    }
    if (paymentHeader === undefined) {
      paymentRequired(SellerError.paymentRequired);
      return;
    }

    if (checkHeaderLocally) {
      const decoded = decodePaymentHeader(paymentHeader);
      if (!decoded.ok) {
        paymentRequired(
          SellerError.verificationFailed,
          decoded.kind === "base64" ? VerifyReason.invalidBase64 : VerifyReason.invalidHeader(decoded.detail),
        );
        return;
      }
    }

    const request = { x402Version: X402_VERSION, paymentHeader, paymentRequirements } as const;
    let verification;
    try {
      verification = await facilitator.verify(request);
    } catch (error) {
      res.status(500).json({ error: SellerError.verifyRequestFailed, details: messageOf(error) });
      return;
    }
    if (!verification.isValid) {
      paymentRequired(SellerError.verificationFailed, verification.invalidReason ?? "Payment is not valid");
      return;
    }

    let settlement;
    try {
      settlement = await facilitator.settle(request);
    } catch (error) {
      res.status(500).json({ error: SellerError.settleRequestFailed, details: messageOf(error) });
      return;
    }
    if (settlement.event !== SettleEvent.settled) {
      paymentRequired(SellerError.settlementFailed, settlement.error);
      return;
    }

    const receipt: PaymentReceipt = {
      txHash: settlement.txHash,
      from: settlement.from,
      to: settlement.to,
      value: settlement.value,
      blockNumber: settlement.blockNumber,
      timestamp: settlement.timestamp,
    };
    contexts.set(req, { receipt, settlement, requirements: paymentRequirements, paymentHeader });
    res.locals.payment = receipt;
    res.setHeader("X-PAYMENT-RESPONSE", encodePaymentResponse(settlement));
    if (mergePayment) {
      const json = res.json.bind(res);
      res.json = (body?: unknown) => json(isPlainObject(body) && !("payment" in body) ? { ...body, payment: receipt } : body);
    }
    next();
  };
}

/** base64 JSON of a settle answer, its fields in the spec's order. */
function encodePaymentResponse(settlement: SettleSuccess): string {
  const { x402Version, event, network, timestamp, txHash, from, to, value, blockNumber } = settlement;
  const json = JSON.stringify({ x402Version, event, network, timestamp, txHash, from, to, value, blockNumber });
  return Buffer.from(json, "utf8").toString("base64");
}

function facilitatorOf(options: RequirePaymentOptions): FacilitatorClient {
  if (options.facilitator) return options.facilitator;
  if (typeof options.facilitatorUrl !== "string") {
    throw new TypeError("requirePayment needs `facilitatorUrl` or `facilitator`");
  }
  return createFacilitatorClient({ url: options.facilitatorUrl, timeoutMs: options.timeoutMs, settleTimeoutMs: options.settleTimeoutMs });
}

function constant(requirements: PaymentRequirements): () => Promise<PaymentRequirements> {
  return async () => requirements;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
