// requirePayment's options, what it hands the handler, and the texts of its answers.
import type { DiscoveryDeclaration } from "../protocol/bazaar.js";
import type { PaymentRequirements, SettleSuccess } from "../protocol/schemas.js";
import type { V2PaymentRequirements, V2SettleResponse } from "../protocol/x402v2.js";
import { createFacilitatorClient, type FacilitatorClient } from "./facilitator-client.js";

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

/** The facilitator client the options name: the one given, or one for `facilitatorUrl`. */
export function facilitatorOf(options: RequirePaymentOptions): FacilitatorClient {
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
