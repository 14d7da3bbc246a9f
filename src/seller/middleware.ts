import type { NextFunction, Request, RequestHandler, Response } from "express";
import type { PaymentRequirements, PaymentRequirementsInput } from "../protocol/schemas.js";
import { v2RequirementsOf, X402V2Header } from "../protocol/x402v2.js";
import { globalTracer } from "../telemetry/spans.js";
import { Exchange, type SellerSettings } from "./exchange.js";
import { consoleSellerLogger, facilitatorOf, SellerError, type RequirePaymentOptions } from "./options.js";
import { headerReader, payCronos, payV2 } from "./payment-flow.js";
import { resourceOf } from "./payment-required.js";
import { constant, declaresDiscovery, discoveryOutputSchema, parseRequirements, type RequirementsSource } from "./requirements.js";
import { tracedPayment } from "./tracing.js";
import { messageOf } from "./values.js";

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
 *   facilitator's record of that authorization paying this route's price to its `payTo`, and only on the
 *   route (resource) it was first served on; after that, or on another route →
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
  const readHeader = headerReader(options.acceptBodyHeader ?? true);
  const settings: SellerSettings = {
    facilitator,
    logger: options.logger ?? consoleSellerLogger,
    clock: options.clock ?? Date.now,
    checkHeaderLocally: options.checkHeaderLocally ?? true,
    mergePayment: options.mergePaymentIntoJson ?? true,
    paymentIdentifier: options.paymentIdentifier,
  };

  return async (req: Request, res: Response, next: NextFunction) => {
    let paymentRequirements: PaymentRequirements;
    try {
      paymentRequirements = await resolveRequirements(req);
      // A route declared for discovery is cataloged under a URL: the request's, unless the seller named one.
      if (declaresDiscovery(paymentRequirements) && paymentRequirements.resource === undefined) {
        paymentRequirements = { ...paymentRequirements, resource: resourceOf(req, paymentRequirements).url };
      }
    } catch (error) {
      settings.logger.error({ method: req.method, path: req.originalUrl, err: messageOf(error) }, "payment requirements unavailable");
      res.status(500).json({ error: SellerError.requirementsUnavailable, details: SellerError.tryLater });
      return;
    }
    const v2Requirements = v2RequirementsOf(paymentRequirements);
    const exchange = new Exchange(req, res, next, settings, paymentRequirements, v2Requirements);
    const signature = req.get(X402V2Header.paymentSignature)?.trim();
    const pay = () => (signature && v2Requirements ? payV2(exchange, signature, v2Requirements) : payCronos(exchange, readHeader));
    // With an OpenTelemetry SDK registered in this process, a span, and `traceparent` on the facilitator's calls.
    const tracer = globalTracer();
    await (tracer ? tracedPayment(tracer, req, res, paymentRequirements, pay) : pay());
  };
}
