import express, { type NextFunction, type Request, type RequestHandler, type Response } from "express";
import { z } from "zod";
import { canonicalNetwork, NETWORKS } from "../protocol/networks.js";
import { decodeBase64Json, decodePaymentHeader, encodeBase64Json } from "../protocol/header.js";
import { EXACT_SCHEME, SettleError, SettleEvent, VerifyReason, X402_VERSION } from "../protocol/reasons.js";
import {
  describeZodError,
  parsePaymentRequirements,
  type PaymentRequirements,
  type PaymentRequirementsInput,
  type SettlementStatus,
  type SettleSuccess,
} from "../protocol/schemas.js";
import {
  PAYMENT_IDENTIFIER,
  paymentIdentifierOf,
  EvmReason,
  v2PaymentPayloadSchema,
  v2RequirementsOf,
  X402_V2_VERSION,
  X402V2Header,
  type V2PaymentRequirements,
  type V2SettleResponse,
} from "../protocol/x402v2.js";
import { BAZAAR, bazaarDeclarationOf, declarationOfOutputSchema, outputSchemaOf, type DiscoveryDeclaration } from "../protocol/bazaar.js";
import { createFacilitatorClient, FacilitatorError, type FacilitatorClient } from "./facilitator-client.js";

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
  /**
   * Lists the route in the facilitator's discovery catalog (x402 `bazaar`) once it is paid: sent as the
   * requirements' `outputSchema` (`input.discoverable: true`), which the Cronos wire format carries and does
   * not enforce, and as the `bazaar` extension of the x402 v2 offer. Without `resource`, the middleware names
   * the request's URL. `requirePayment(…, { discovery })` does the same for requirements given as they are.
   */
  discovery?: DiscoveryDeclaration;
}

export type { DiscoveryDeclaration };

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
    ...(options.discovery === undefined ? {} : { outputSchema: discoveryOutputSchema(options.discovery) }),
  });
}

/** The `outputSchema` that declares a route for discovery (x402 v1's form, which the Cronos dialect carries). */
function discoveryOutputSchema(discovery: DiscoveryDeclaration): Record<string, unknown> {
  try {
    return outputSchemaOf(discovery);
  } catch (error) {
    throw new InvalidRequirementsError(`invalid discovery declaration: ${messageOf(error)}`);
  }
}

/**
 * The `extensions` of the route's x402 v2 `PAYMENT-REQUIRED`: `payment-identifier` when the route declares
 * it, `bazaar` (the discovery declaration in v2's form) when its requirements do; undefined for none.
 */
function v2ExtensionsOf(requirements: PaymentRequirements, paymentIdentifier: "optional" | "required" | undefined): Record<string, unknown> | undefined {
  const extensions: Record<string, unknown> = {};
  if (paymentIdentifier) {
    extensions[PAYMENT_IDENTIFIER] = {
      info: { required: paymentIdentifier === "required" },
      schema: {
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        properties: { required: { type: "boolean" }, id: { type: "string", minLength: 16, maxLength: 128, pattern: "^[a-zA-Z0-9_-]+$" } },
        required: ["required"],
      },
    };
  }
  // The v2 form of the route's declaration, with the schema its info conforms to (other facilitators refuse one without).
  const declaration = declarationOfOutputSchema((requirements as { outputSchema?: unknown }).outputSchema);
  if (declaration) extensions[BAZAAR] = bazaarDeclarationOf(declaration);
  return Object.keys(extensions).length > 0 ? extensions : undefined;
}

/** Whether requirements declare their route for discovery (`outputSchema.input.discoverable`). */
function declaresDiscovery(requirements: PaymentRequirements): boolean {
  const schema = (requirements as { outputSchema?: { input?: { discoverable?: unknown } } }).outputSchema;
  return typeof schema === "object" && schema !== null && schema.input?.discoverable === true;
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
      /** The seller's API key at the facilitator, sent as `Authorization: Bearer <key>`; never logged. */
      apiKey?: string;
      facilitator?: never;
    }
  | { facilitator: FacilitatorClient; facilitatorUrl?: never; timeoutMs?: never; settleTimeoutMs?: never; apiKey?: never };

/**
 * Where the middleware writes what it does not tell buyers: facilitator faults and the seller's own
 * errors, with their details. pino-compatible (`logger.error(fields, message)`), e.g. a pino logger.
 */
export interface SellerLogger {
  error(fields: object, message?: string): void;
}

/** The default {@link SellerLogger}: one line on stderr. */
export const consoleSellerLogger: SellerLogger = {
  error(fields, message) {
    console.error(`[x402 seller] ${message ?? "error"} ${JSON.stringify(fields)}`);
  },
};

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
  /** Where faults are logged with their details (buyers get a generic answer). Default {@link consoleSellerLogger}. */
  logger?: SellerLogger;
  /**
   * x402 v2 `payment-identifier` (idempotent payments): declared in the 402's `PAYMENT-REQUIRED`, so a v2
   * buyer attaches an id and a retry gets the same transaction; `required` answers a v2 payment without one
   * 400. The Cronos dialect has no place for an id: `X-PAYMENT` payments are unaffected.
   */
  paymentIdentifier?: "optional" | "required";
  /**
   * Lists the route in the facilitator's discovery catalog (x402 `bazaar`) once it is paid, as
   * `paymentRequirements({ discovery })` does: added to requirements (fixed or computed) that declare nothing
   * themselves (no `outputSchema`).
   */
  discovery?: DiscoveryDeclaration;
  /**
   * The clock the retry window is measured on, in milliseconds since the epoch (default `Date.now`): a
   * settled payment is served again only until its block's time plus the requirements' `maxTimeoutSeconds`.
   * Real networks' block times follow the wall clock; a seller in front of a local chain whose time a test
   * moves passes that chain's clock.
   */
  clock?: () => number;
};

/** The settled payment as it is given to the handler and merged into its JSON answer. */
export interface PaymentReceipt {
  txHash: string;
  from: string;
  to: string;
  value: string;
  /** The block of the settlement (absent when paid in x402 v2, whose settle answer does not carry it). */
  blockNumber?: number;
  /** ISO time of the settlement, as the facilitator reported it (absent when paid in x402 v2). */
  timestamp?: string;
}

/** Everything known about the payment of a request that passed {@link requirePayment}, in the dialect the buyer paid in. */
export type PaymentContext =
  | {
      /** Paid with `X-PAYMENT` (the Cronos dialect). */
      dialect: "cronos";
      receipt: PaymentReceipt;
      /** The facilitator's settle answer (also sent base64-encoded in `X-PAYMENT-RESPONSE`). */
      settlement: SettleSuccess;
      /** The requirements the payment was verified and settled against. */
      requirements: PaymentRequirements;
      /** The buyer's `X-PAYMENT` value. */
      paymentHeader: string;
    }
  | {
      /** Paid with `PAYMENT-SIGNATURE` (x402 v2, e.g. an `@x402/fetch` buyer). */
      dialect: "x402v2";
      receipt: PaymentReceipt;
      /** The facilitator's v2 settle answer (also sent base64-encoded in `PAYMENT-RESPONSE`). */
      settlement: V2SettleResponse;
      /** The route's requirements; {@link v2Requirements} is the form they were verified and settled in. */
      requirements: PaymentRequirements;
      v2Requirements: V2PaymentRequirements;
      /** The buyer's `PAYMENT-SIGNATURE` value. */
      paymentHeader: string;
    };

/** Error texts of the seller's answers. */
export const SellerError = {
  paymentRequired: "Payment Required",
  verificationFailed: "Payment verification failed",
  settlementFailed: "Payment settlement failed",
  verifyRequestFailed: "Facilitator verify request failed",
  settleRequestFailed: "Facilitator settle request failed",
  requirementsUnavailable: "Payment requirements unavailable",
  /** The 503 when the facilitator is busy (it answered 429 or 503): the buyer may retry after `Retry-After`. */
  facilitatorBusy: "Payment service busy",
  /** The 400 for an x402 v2 payment without the payment identifier the route requires (or with one that is not valid). */
  paymentIdentifierRequired: "Payment identifier required",
  /** The 402 for a settled payment presented again after its retry window (`maxTimeoutSeconds` from its settlement). */
  paymentAlreadyUsed: "Payment already used",
  /** The 500 when the facilitator's settlement lookup fails, or does not confirm a settlement it answered. */
  lookupRequestFailed: "Facilitator settlement lookup failed",
  /** The `details` of every 500: what went wrong is logged, not told to buyers. */
  tryLater: "The payment could not be processed right now; try again later",
} as const;

/** The `Retry-After` of the seller's 503 when the busy facilitator did not say how long to wait. */
export const DEFAULT_RETRY_AFTER_SECONDS = 5;

const contexts = new WeakMap<Request, PaymentContext>();

/** The payment of a request that passed {@link requirePayment}, or `undefined`. */
export function getPayment(req: Request): PaymentContext | undefined {
  return contexts.get(req);
}

const bodyHeaderSchema = z.object({ paymentHeader: z.string().trim().min(1) });

/**
 * Express 5 middleware that lets a request through only once it is paid (x402, spec 7.3), by a
 * Cronos-style buyer (`X-PAYMENT`) or an x402 v2 one such as `@x402/fetch` (`PAYMENT-SIGNATURE`):
 *
 * - no payment → 402 `{error: "Payment Required", x402Version: 1, paymentRequirements, accepts: [paymentRequirements]}`,
 *   plus, on a Cronos network, the x402 v2 offer in `PAYMENT-REQUIRED` (base64 JSON: CAIP-2 network,
 *   `amount`, the token's EIP-712 domain in `extra`);
 * - verify answers `isValid: false` → 402, same body with `error: "Payment verification failed"` and `reason`;
 * - settle answers that it failed → 402, same body with `error: "Payment settlement failed"` and `reason`;
 *   (`PAYMENT-REQUIRED`'s `error` is the reason, or for a v2 payment the facilitator's code);
 * - the facilitator answers 429 or 503 (busy, or briefly unable to settle) → 503
 *   `{error: "Payment service busy", details}` with `Retry-After` (the facilitator's, else
 *   {@link DEFAULT_RETRY_AFTER_SECONDS});
 * - the facilitator cannot be reached, times out, answers another non-2xx or an invalid answer → 500
 *   `{error, details}` with a generic `details`: the facts go to `options.logger`, never to buyers;
 * - settled → `X-PAYMENT-RESPONSE` (or `PAYMENT-RESPONSE` for a v2 payment: base64 JSON of the
 *   facilitator's settle answer) is set and the handler runs;
 * - one payment, one answer and its retries: a settled payment presented again (the same `X-PAYMENT`,
 *   which the facilitator calls used, or a v2 payment under the same payment identifier) is served again
 *   only within the requirements' `maxTimeoutSeconds` of its block's time, by `options.clock`, from the
 *   facilitator's record of that authorization paying this route's price to its `payTo`; after that →
 *   402 `{error: "Payment already used", …, reason}` with fresh requirements.
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
  const outputSchema = options.discovery === undefined ? undefined : discoveryOutputSchema(options.discovery);
  const withDescription = (input: PaymentRequirementsInput): PaymentRequirementsInput => {
    const described = options.description === undefined ? input : { ...input, description: options.description };
    return outputSchema === undefined || (described as { outputSchema?: unknown }).outputSchema !== undefined ? described : { ...described, outputSchema };
  };
  const resolveRequirements: (req: Request) => Promise<PaymentRequirements> =
    typeof requirements === "function"
      ? async (req) => parseRequirements(withDescription(await requirements(req)))
      : constant(parseRequirements(withDescription(requirements)));
  const acceptBodyHeader = options.acceptBodyHeader ?? true;
  const checkHeaderLocally = options.checkHeaderLocally ?? true;
  const mergePayment = options.mergePaymentIntoJson ?? true;
  const logger = options.logger ?? consoleSellerLogger;
  const clock = options.clock ?? Date.now;
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
      // A route declared for discovery is cataloged under a URL: the request's, unless the seller named one.
      if (declaresDiscovery(paymentRequirements) && paymentRequirements.resource === undefined) {
        paymentRequirements = { ...paymentRequirements, resource: resourceOf(req, paymentRequirements).url };
      }
    } catch (error) {
      logger.error({ method: req.method, path: req.originalUrl, err: messageOf(error) }, "payment requirements unavailable");
      res.status(500).json({ error: SellerError.requirementsUnavailable, details: SellerError.tryLater });
      return;
    }
    const v2Requirements = v2RequirementsOf(paymentRequirements);
    const paymentRequired = (error: string, reason?: string, v2Error?: string) => {
      if (v2Requirements) {
        const extensions = v2ExtensionsOf(paymentRequirements, options.paymentIdentifier);
        const offer = {
          x402Version: X402_V2_VERSION,
          error: v2Error ?? reason ?? error,
          resource: resourceOf(req, paymentRequirements),
          accepts: [v2Requirements],
          ...(extensions ? { extensions } : {}),
        };
        res.setHeader(X402V2Header.paymentRequired, encodeBase64Json(offer));
      }
      res.status(402).json({
        error,
        x402Version: X402_VERSION,
        paymentRequirements,
        accepts: [paymentRequirements],
        ...(reason === undefined ? {} : { reason }),
      });
    };
    /** Logs a facilitator fault with its details (buyers get a generic text). */
    const logFault = (operation: Operation, error: unknown) => {
      const facts = error instanceof FacilitatorError ? { code: error.code, ...(error.status === undefined ? {} : { status: error.status }) } : {};
      logger.error(
        { operation, method: req.method, path: req.originalUrl, facilitator: facilitator.url, ...facts, err: messageOf(error) },
        `facilitator ${operation} failed`,
      );
    };
    /**
     * A facilitator fault: the details are logged, the buyer gets a generic text: 503 with `Retry-After`
     * when the facilitator is busy (it answered 429 or 503), else 500.
     */
    const unavailable = (operation: Operation, error: unknown) => {
      logFault(operation, error);
      if (error instanceof FacilitatorError && error.busy) {
        res.setHeader("Retry-After", String(error.retryAfterSeconds ?? DEFAULT_RETRY_AFTER_SECONDS));
        res.status(503).json({ error: SellerError.facilitatorBusy, details: SellerError.tryLater });
        return;
      }
      res.status(500).json({ error: FAULT_TEXT[operation], details: SellerError.tryLater });
    };
    /** Calls the facilitator; on a fault answers 500 (see `unavailable`) and gives `undefined`. */
    const ask = async <T>(operation: Operation, call: () => Promise<T>): Promise<T | undefined> => {
      try {
        return await call();
      } catch (error) {
        unavailable(operation, error);
        return undefined;
      }
    };
    /** Hands the paid request to the handler. */
    const paid = (payment: PaymentContext, header: string, value: unknown) => {
      contexts.set(req, payment);
      res.locals.payment = payment.receipt;
      res.setHeader(header, encodeBase64Json(value));
      if (mergePayment) {
        const json = res.json.bind(res);
        res.json = (body?: unknown) => json(isPlainObject(body) && !("payment" in body) ? { ...body, payment: payment.receipt } : body);
      }
      next();
    };

    // One payment, one answer and its retries: served again only within maxTimeoutSeconds of its block's time.
    const windowMs = (paymentRequirements.maxTimeoutSeconds ?? REQUIREMENTS_DEFAULTS.maxTimeoutSeconds) * 1000;
    /** Whether a payment settled at `timestamp` may still be served; if not, it is answered 402 saying why. */
    const withinRetryWindow = (timestamp: string): boolean => {
      const settledAt = Date.parse(timestamp);
      const until = settledAt + windowMs;
      if (clock() <= until) return true;
      paymentRequired(
        SellerError.paymentAlreadyUsed,
        `this payment was settled at ${new Date(settledAt).toISOString()}, and a payment is served again only within maxTimeoutSeconds (${windowMs / 1000} s) of its settlement, until ${new Date(until).toISOString()}; sign a new payment`,
        EvmReason.nonceAlreadyUsed,
      );
      return false;
    };
    /**
     * The facilitator's record of the authorization's settlement when it confirms one of this route's price to
     * its payee (built from the receipt: the money truth), else `undefined`. Throws on a lookup fault.
     */
    const settledRecord = async (network: string, authorization: { from: string; nonce: string }): Promise<Settled | undefined> => {
      const status = await facilitator.settlement({ network, from: authorization.from, nonce: authorization.nonce });
      return status && settles(status, authorization.from, paymentRequirements) ? status : undefined;
    };
    /**
     * A payment the facilitator calls used: a retry of one it settled for this route is served again within
     * the window (`serve`), one after it gets 402 saying so, and anything else `refuse()`s as before. A busy
     * facilitator is 503 (the retry may yet be served); another lookup fault keeps the refusal.
     */
    const retry = async (network: string, authorization: { from: string; nonce: string } | undefined, serve: (status: Settled) => void, refuse: () => void) => {
      let status: Settled | undefined;
      try {
        status = authorization && (await settledRecord(network, authorization));
      } catch (error) {
        if (error instanceof FacilitatorError && error.busy) return unavailable("lookup", error);
        logFault("lookup", error);
      }
      if (!status) return refuse();
      if (withinRetryWindow(status.timestamp)) serve(status);
    };

    const signature = req.get(X402V2Header.paymentSignature)?.trim();
    if (signature && v2Requirements) {
      // x402 v2: the payment is a base64 JSON object, passed to the facilitator untouched.
      const decoded = decodeBase64Json(signature);
      const json = decoded.ok && isPlainObject(decoded.json) ? decoded.json : undefined;
      const local = checkHeaderLocally && json ? v2PaymentPayloadSchema.safeParse(json) : undefined;
      if (json === undefined || (local && !local.success)) {
        const what = local && !local.success ? describeZodError(local.error) : "PAYMENT-SIGNATURE is not base64 JSON of an object";
        paymentRequired(SellerError.verificationFailed, VerifyReason.invalidPayload(what), EvmReason.unsupportedPayloadType);
        return;
      }
      const identifier = paymentIdentifierOf(isPlainObject(json.extensions) ? json.extensions : undefined);
      if ((identifier === undefined && options.paymentIdentifier === "required") || (identifier && "error" in identifier)) {
        res.status(400).json({
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
        paid(context(receipt, settlement), X402V2Header.paymentResponse, settlement);
      };
      const request = { paymentPayload: json, paymentRequirements: v2Requirements };
      const verification = await ask("verify", () => facilitator.verifyV2(request));
      if (!verification) return;
      if (!verification.isValid) {
        const code = verification.invalidReason ?? "invalid_payment";
        const refuse = () => paymentRequired(SellerError.verificationFailed, verification.invalidMessage ?? code, code);
        if (code === EvmReason.nonceAlreadyUsed) await retry(v2Requirements.network, authorization, serveAgain, refuse);
        else refuse();
        return;
      }
      const settlement = await ask("settle", () => facilitator.settleV2(request));
      if (!settlement) return;
      if (!settlement.success) {
        const code = settlement.errorReason ?? "settlement_failed";
        const refuse = () => paymentRequired(SellerError.settlementFailed, settlement.errorMessage ?? code, code);
        if (code === EvmReason.nonceAlreadyUsed) await retry(v2Requirements.network, authorization, serveAgain, refuse);
        else refuse();
        return;
      }
      if (identifier) {
        // Under a payment identifier the facilitator answers a repeat as it answered the first settle, which
        // carries no time in v2: the settlement's block time comes from its record.
        let status: Settled | undefined;
        try {
          status = authorization && (await settledRecord(v2Requirements.network, authorization));
        } catch (error) {
          unavailable("lookup", error);
          return;
        }
        if (!status || status.txHash.toLowerCase() !== settlement.transaction.toLowerCase()) {
          unavailable("lookup", new Error(`the facilitator's record does not confirm settlement ${settlement.transaction} of this payment`));
          return;
        }
        if (!withinRetryWindow(status.timestamp)) return;
      }
      const receipt: PaymentReceipt = {
        txHash: settlement.transaction,
        from: settlement.payer ?? verification.payer ?? "",
        to: paymentRequirements.payTo,
        value: paymentRequirements.maxAmountRequired,
      };
      paid(context(receipt, settlement), X402V2Header.paymentResponse, settlement);
      return;
    }

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

    const decoded = decodePaymentHeader(paymentHeader);
    if (checkHeaderLocally && !decoded.ok) {
      paymentRequired(
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
      paid({ dialect: "cronos", receipt, settlement, requirements: paymentRequirements, paymentHeader: header }, "X-PAYMENT-RESPONSE", cronosResponse(settlement));
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
    const verification = await ask("verify", () => facilitator.verify(request));
    if (!verification) return;
    if (!verification.isValid) {
      const refuse = () => paymentRequired(SellerError.verificationFailed, verification.invalidReason ?? "Payment is not valid");
      if (verification.invalidReason === VerifyReason.alreadyUsed) await retry(paymentRequirements.network, authorization, serveAgain, refuse);
      else refuse();
      return;
    }

    const settlement = await ask("settle", () => facilitator.settle(request));
    if (!settlement) return;
    if (settlement.event !== SettleEvent.settled) {
      const refuse = () => paymentRequired(SellerError.settlementFailed, settlement.error);
      if (settlement.error === SettleError.alreadyUsed) await retry(paymentRequirements.network, authorization, serveAgain, refuse);
      else refuse();
      return;
    }
    // A facilitator that answers a repeat with the first settle answer is held to the same window.
    if (withinRetryWindow(settlement.timestamp)) served(settlement);
  };
}

/** What the middleware asks the facilitator: verify, settle, or a settlement status lookup. */
type Operation = "verify" | "settle" | "lookup";

/** The `error` of the 500 when an operation fails. */
const FAULT_TEXT: Readonly<Record<Operation, string>> = {
  verify: SellerError.verifyRequestFailed,
  settle: SellerError.settleRequestFailed,
  lookup: SellerError.lookupRequestFailed,
};

/** A settlement status that says settled, with the hash, block and time a settled one carries. */
type Settled = SettlementStatus & { txHash: string; blockNumber: number; timestamp: string };

/**
 * Whether the facilitator's record says this payer's authorization settled this route's price to its
 * payee (a record of the same nonce paying another payee or value is not this route's payment).
 */
function settles(status: SettlementStatus, from: string, requirements: PaymentRequirements): status is Settled {
  return (
    status.status === "settled" &&
    status.txHash !== null &&
    status.blockNumber !== undefined &&
    status.timestamp !== undefined &&
    status.from.toLowerCase() === from.toLowerCase() &&
    status.to.toLowerCase() === requirements.payTo.toLowerCase() &&
    status.value === requirements.maxAmountRequired
  );
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

/** The paid resource for x402 v2's `PAYMENT-REQUIRED`: the requirements' `resource` (made absolute) or the request URL. */
function resourceOf(req: Request, requirements: PaymentRequirements) {
  const base = `${req.protocol}://${req.get("host") ?? "localhost"}`;
  let url: string;
  try {
    url = new URL(requirements.resource ?? req.originalUrl, base).href;
  } catch {
    url = new URL(req.originalUrl, base).href;
  }
  return { url, ...(requirements.description ? { description: requirements.description } : {}), ...(requirements.mimeType ? { mimeType: requirements.mimeType } : {}) };
}

function facilitatorOf(options: RequirePaymentOptions): FacilitatorClient {
  if (options.facilitator) return options.facilitator;
  if (typeof options.facilitatorUrl !== "string") {
    throw new TypeError("requirePayment needs `facilitatorUrl` or `facilitator`");
  }
  return createFacilitatorClient({
    url: options.facilitatorUrl,
    timeoutMs: options.timeoutMs,
    settleTimeoutMs: options.settleTimeoutMs,
    apiKey: options.apiKey,
  });
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
