// One paid request's exchange with the facilitator: its answers to the buyer, its faults, and the hand-off to the handler.
import type { NextFunction, Request, Response } from "express";
import { encodeBase64Json } from "../protocol/header.js";
import type { PaymentRequirements } from "../protocol/schemas.js";
import type { V2PaymentRequirements } from "../protocol/x402v2.js";
import { FacilitatorError, type FacilitatorClient } from "./facilitator-client.js";
import { DEFAULT_RETRY_AFTER_SECONDS, SellerError, type PaymentContext, type SellerLogger } from "./options.js";
import { sendPaymentRequired, type RouteOffer } from "./payment-required.js";
import { isPlainObject, messageOf } from "./values.js";

/** What the middleware asks the facilitator: verify, settle, or a settlement status lookup. */
export type Operation = "verify" | "settle" | "lookup";

/** The `error` of the 500 when an operation fails. */
const FAULT_TEXT: Readonly<Record<Operation, string>> = {
  verify: SellerError.verifyRequestFailed,
  settle: SellerError.settleRequestFailed,
  lookup: SellerError.lookupRequestFailed,
};

/** What {@link requirePayment} fixed at set-up, the same for every request of the route. */
export interface SellerSettings {
  facilitator: FacilitatorClient;
  logger: SellerLogger;
  /** The retry window's clock, in milliseconds since the epoch. */
  clock: () => number;
  checkHeaderLocally: boolean;
  mergePayment: boolean;
  paymentIdentifier: "optional" | "required" | undefined;
}

const contexts = new WeakMap<Request, PaymentContext>();

/** The payment of a request that passed {@link requirePayment}, or `undefined`. */
export function getPayment(req: Request): PaymentContext | undefined {
  return contexts.get(req);
}

/** One request's way through the middleware once its requirements are known. */
export class Exchange {
  readonly req: Request;
  readonly res: Response;
  readonly next: NextFunction;
  readonly settings: SellerSettings;
  readonly requirements: PaymentRequirements;
  readonly v2Requirements: V2PaymentRequirements | undefined;

  constructor(req: Request, res: Response, next: NextFunction, settings: SellerSettings, requirements: PaymentRequirements, v2Requirements: V2PaymentRequirements | undefined) {
    this.req = req;
    this.res = res;
    this.next = next;
    this.settings = settings;
    this.requirements = requirements;
    this.v2Requirements = v2Requirements;
  }

  /** Answers 402 with the route's requirements (see {@link sendPaymentRequired}). */
  paymentRequired(error: string, reason?: string, v2Error?: string): void {
    const offer: RouteOffer = { requirements: this.requirements, v2Requirements: this.v2Requirements, paymentIdentifier: this.settings.paymentIdentifier };
    sendPaymentRequired(this.req, this.res, offer, error, reason, v2Error);
  }

  /** Logs a facilitator fault with its details (buyers get a generic text). */
  logFault(operation: Operation, error: unknown): void {
    const facts = error instanceof FacilitatorError ? { code: error.code, ...(error.status === undefined ? {} : { status: error.status }) } : {};
    this.settings.logger.error(
      { operation, method: this.req.method, path: this.req.originalUrl, facilitator: this.settings.facilitator.url, ...facts, err: messageOf(error) },
      `facilitator ${operation} failed`,
    );
  }

  /**
   * A facilitator fault: the details are logged, the buyer gets a generic text: 503 with `Retry-After`
   * when the facilitator is busy (it answered 429 or 503), else 500.
   */
  unavailable(operation: Operation, error: unknown): void {
    this.logFault(operation, error);
    if (error instanceof FacilitatorError && error.busy) {
      this.res.setHeader("Retry-After", String(error.retryAfterSeconds ?? DEFAULT_RETRY_AFTER_SECONDS));
      this.res.status(503).json({ error: SellerError.facilitatorBusy, details: SellerError.tryLater });
      return;
    }
    this.res.status(500).json({ error: FAULT_TEXT[operation], details: SellerError.tryLater });
  }

  /** Calls the facilitator; on a fault answers 500 (see {@link unavailable}) and gives `undefined`. */
  async ask<T>(operation: Operation, call: () => Promise<T>): Promise<T | undefined> {
    try {
      return await call();
    } catch (error) {
      this.unavailable(operation, error);
      return undefined;
    }
  }

  /** Hands the paid request to the handler. */
  paid(payment: PaymentContext, header: string, value: unknown): void {
    const res = this.res;
    contexts.set(this.req, payment);
    res.locals.payment = payment.receipt;
    res.setHeader(header, encodeBase64Json(value));
    if (this.settings.mergePayment) {
      const json = res.json.bind(res);
      res.json = (body?: unknown) => json(isPlainObject(body) && !("payment" in body) ? { ...body, payment: payment.receipt } : body);
    }
    this.next();
  }
}
