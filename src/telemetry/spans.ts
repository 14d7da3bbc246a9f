// The kit's spans: its tracer's name, the attributes a span may carry, and one way to run work in a span.
// Only @opentelemetry/api: a seller's or buyer's code loads nothing else, and where no SDK is registered
// (tracing off) `globalTracer()` is undefined, so no span object is made and no header written.
import { context, ProxyTracerProvider, SpanStatusCode, trace, type Attributes, type Span, type SpanOptions, type Tracer } from "@opentelemetry/api";

/** The instrumentation scope of every span the kit makes. */
export const KIT_TRACER_NAME = "cronos-x402-facilitator-kit";

/**
 * The attributes of a payment, under `x402.`: what identifies it and where it went. Never a key, a
 * signature, an API key or an RPC URL: nothing else of a payment is ever put on a span.
 */
export const PaymentAttribute = {
  network: "x402.network",
  payer: "x402.payer",
  payee: "x402.payee",
  value: "x402.value",
  nonce: "x402.nonce",
  txHash: "x402.tx_hash",
  /** What the step answered: `valid`, an invalid reason's code, `settled`, a failure code, … */
  outcome: "x402.outcome",
} as const;

/** A payment as the spans show it (each field optional: a request may not carry it, or not yet). */
export interface TracedPayment {
  network?: string;
  payer?: string;
  payee?: string;
  value?: string | bigint;
  nonce?: string;
  txHash?: string;
}

/** The span attributes of `payment` (absent fields left out). */
export function paymentAttributes(payment: TracedPayment): Attributes {
  const attributes: Attributes = {};
  if (payment.network !== undefined) attributes[PaymentAttribute.network] = payment.network;
  if (payment.payer !== undefined) attributes[PaymentAttribute.payer] = payment.payer;
  if (payment.payee !== undefined) attributes[PaymentAttribute.payee] = payment.payee;
  if (payment.value !== undefined) attributes[PaymentAttribute.value] = String(payment.value);
  if (payment.nonce !== undefined) attributes[PaymentAttribute.nonce] = payment.nonce;
  if (payment.txHash !== undefined) attributes[PaymentAttribute.txHash] = payment.txHash;
  return attributes;
}

// The delegate of a ProxyTracerProvider that has none: the API's no-op provider (public API, no internals).
const NOOP_PROVIDER = new ProxyTracerProvider().getDelegate();
let cached: { provider: unknown; tracer: Tracer } | undefined;

/**
 * The kit's tracer from the process's registered OpenTelemetry SDK (the kit's own, started by a facilitator
 * with tracing on, or the application's), or `undefined` when none is registered: then the caller makes no
 * span and propagates nothing. For the seller's middleware and the buyer's fetch, which live in someone
 * else's process; the facilitator is handed its tracer instead (on only when its configuration says so).
 */
export function globalTracer(): Tracer | undefined {
  const provider = trace.getTracerProvider();
  const delegate = provider instanceof ProxyTracerProvider ? provider.getDelegate() : provider;
  if (delegate === NOOP_PROVIDER) return undefined;
  if (cached?.provider !== delegate) cached = { provider: delegate, tracer: provider.getTracer(KIT_TRACER_NAME) };
  return cached.tracer;
}

/**
 * What a failure is called on its span: a kit error's code, else the error's class name. Never its message,
 * which may quote a URL, a body or a database's words.
 */
export function failureName(error: unknown): string {
  if (typeof error === "object" && error !== null) {
    const { code, name } = error as { code?: unknown; name?: unknown };
    if (typeof code === "string" && /^[a-z][a-zA-Z_]*$/.test(code)) return code;
    if (typeof name === "string") return name;
  }
  return typeof error;
}

/**
 * Runs `work` in a new span named `name` (the active span its parent, the span active inside `work`), and
 * ends it when `work` settles: a throw marks it failed with {@link failureName} (or `describe`'s words) and
 * is passed on.
 */
export function inSpan<T>(
  tracer: Tracer,
  name: string,
  options: SpanOptions,
  work: (span: Span) => Promise<T>,
  describe: (error: unknown) => string = failureName,
): Promise<T> {
  return tracer.startActiveSpan(name, options, async (span) => {
    try {
      return await work(span);
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: describe(error) });
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * {@link inSpan} when a span is active (a request's, a settlement's), else `work` alone: the calls made by
 * background work (the state index following the chain, lease renewals, the reconciler's rounds) start no
 * trace of their own, which would bury the payments' traces under polls.
 */
export function inChildSpan<T>(tracer: Tracer, name: string, options: SpanOptions, work: () => Promise<T>, describe?: (error: unknown) => string): Promise<T> {
  return trace.getSpan(context.active()) ? inSpan(tracer, name, options, work, describe) : work();
}

/** The tracer of the facilitator's steps while its tracing is on in this process (set by its SDK's start). */
let stepTracer: Tracer | undefined;

/** Sets (or, `undefined`, clears) the tracer {@link activeTracer} hands out: the facilitator's tracing start and close. */
export function useStepTracer(tracer: Tracer | undefined): void {
  stepTracer = tracer;
}

/**
 * The facilitator's tracer when its tracing is on and a span is active (a traced request's); otherwise
 * `undefined`. With tracing off it reads one variable: no context, no span.
 */
export function activeTracer(): Tracer | undefined {
  const tracer = stepTracer;
  return tracer && trace.getSpan(context.active()) ? tracer : undefined;
}

/**
 * A step of a traced request (settle's simulate, send, wait, decision) in a span of its own, given to
 * `work`; outside a traced request, `work` alone (its span `undefined`).
 */
export function step<T>(name: string, attributes: Attributes, work: (span: Span | undefined) => Promise<T>): Promise<T> {
  const tracer = activeTracer();
  return tracer ? inSpan(tracer, name, { attributes }, work) : work(undefined);
}
