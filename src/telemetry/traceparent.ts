// W3C Trace Context's `traceparent` (https://www.w3.org/TR/trace-context/): written on the kit's outgoing
// requests (buyer → seller, seller → facilitator) and read from incoming ones, so one trace runs from the
// buyer to the RPC. `tracestate` is neither read nor written.
import {
  context,
  isSpanContextValid,
  propagation,
  trace,
  TraceFlags,
  type Context,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
} from "@opentelemetry/api";

export const TRACEPARENT = "traceparent";

/** Longer values are not read: a version-00 header is 55 characters; later versions may append fields. */
const MAX_TRACEPARENT_CHARS = 512;
const TRACEPARENT_PATTERN = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** The `traceparent` value of a span context's trace id, span id and flags. */
export function formatTraceparent(traceId: string, spanId: string, traceFlags: number): string {
  return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, "0")}`;
}

/**
 * A `traceparent` value read as the W3C says: version `ff` refused, version `00` exactly four fields, a
 * later version's extra fields ignored, an all-zero trace or parent id refused; `undefined` when unreadable.
 */
export function parseTraceparent(value: string | undefined): { traceId: string; spanId: string; traceFlags: number } | undefined {
  if (value === undefined || value.length > MAX_TRACEPARENT_CHARS) return undefined;
  const match = TRACEPARENT_PATTERN.exec(value.trim());
  if (!match) return undefined;
  const [, version, traceId, spanId, flags, rest] = match as unknown as [string, string, string, string, string, string | undefined];
  if (version === "ff" || (version === "00" && rest !== undefined)) return undefined;
  const parsed = { traceId, spanId, traceFlags: Number.parseInt(flags, 16) & TraceFlags.SAMPLED };
  return isSpanContextValid(parsed) ? parsed : undefined;
}

/** The propagator the kit registers with its SDK: `traceparent` alone. */
export const traceparentPropagator: TextMapPropagator = {
  inject(active: Context, carrier: unknown, setter: TextMapSetter): void {
    const spanContext = trace.getSpanContext(active);
    if (!spanContext || !isSpanContextValid(spanContext)) return;
    setter.set(carrier, TRACEPARENT, formatTraceparent(spanContext.traceId, spanContext.spanId, spanContext.traceFlags));
  },
  extract(active: Context, carrier: unknown, getter: TextMapGetter): Context {
    const raw = getter.get(carrier, TRACEPARENT);
    const parsed = parseTraceparent(Array.isArray(raw) ? (raw.length === 1 ? raw[0] : undefined) : raw);
    return parsed ? trace.setSpanContext(active, { ...parsed, isRemote: true }) : active;
  },
  fields: () => [TRACEPARENT],
};

const headersSetter: TextMapSetter<Headers> = { set: (carrier, key, value) => carrier.set(key, value) };

/** Writes the active context's trace headers (by the registered propagator) into `headers`. */
export function injectTraceHeaders(headers: Headers, active: Context = context.active()): void {
  propagation.inject(active, headers, headersSetter);
}

/** The context an incoming request's headers (Node's, lower-case names) carry, over `base` (default: none). */
export function extractTraceContext(headers: Record<string, string | string[] | undefined>, base: Context = context.active()): Context {
  return propagation.extract(base, headers, {
    get: (carrier, key) => carrier[key],
    keys: (carrier) => Object.keys(carrier),
  });
}
