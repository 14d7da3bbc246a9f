// The seller's span: one paid request's way through the middleware, in the trace the buyer's `traceparent`
// started (or the application's own server span), with the facilitator's calls as its children.
import { context, SpanKind, trace, type Tracer } from "@opentelemetry/api";
import type { Request, Response } from "express";
import type { PaymentRequirements } from "../protocol/schemas.js";
import { inSpan, paymentAttributes } from "../telemetry/spans.js";
import { extractTraceContext } from "../telemetry/traceparent.js";
import { getPayment } from "./exchange.js";

/** The name of the seller's span. */
export const SELLER_SPAN = "x402 seller payment";

/**
 * Runs `pay` in the seller's span: the route's network, payee and price from the start, the payer and the
 * transaction once paid, and the answer's status. Under an application's active span (its HTTP
 * instrumentation's) it is a child of that one; otherwise of the request's `traceparent`, when it has one.
 */
export function tracedPayment(tracer: Tracer, req: Request, res: Response, requirements: PaymentRequirements, pay: () => Promise<void>): Promise<void> {
  const underApplication = trace.getSpan(context.active()) !== undefined;
  const parent = underApplication ? context.active() : extractTraceContext(req.headers);
  const attributes = paymentAttributes({ network: requirements.network, payee: requirements.payTo, value: requirements.maxAmountRequired });
  return context.with(parent, () =>
    inSpan(tracer, SELLER_SPAN, { kind: underApplication ? SpanKind.INTERNAL : SpanKind.SERVER, attributes }, async (span) => {
      await pay();
      const payment = getPayment(req);
      if (payment) span.setAttributes(paymentAttributes({ payer: payment.receipt.from, txHash: payment.receipt.txHash }));
      span.setAttribute("http.response.status_code", res.statusCode);
    }),
  );
}
