// The ledger with each of its calls in a span: a call is one group of statements, atomic on its own
// (a claim, a broadcast's record, a lease renewal), named `ledger <method>`. Only names and the backend
// are recorded: never a row's values, a statement's text or the database's URL.
import { SpanKind, type Tracer } from "@opentelemetry/api";
import { inChildSpan } from "../telemetry/spans.js";
import type { Ledger } from "./types.js";

/** The attributes of a ledger span. */
export const LedgerAttribute = {
  /** `sqlite` or `postgresql`. */
  system: "db.system.name",
  /** The ledger's method: `claim`, `recordBroadcast`, `renewLeases`, … */
  operation: "db.operation.name",
} as const;

/** Calls that are not a statement group: registering a listener answers at once. */
const UNTRACED = new Set<PropertyKey>(["onQueued"]);

/** `ledger` with each method's call within a span (a request's) a span of its own; `ledger` itself is unchanged. */
export function tracedLedger(ledger: Ledger, tracer: Tracer): Ledger {
  const system = ledger.backend === "postgres" ? "postgresql" : ledger.backend;
  const wrapped = new Map<PropertyKey, unknown>();
  return new Proxy(ledger, {
    get(target, property) {
      // Read on the target itself: its getters, too, use private fields.
      const member: unknown = Reflect.get(target, property);
      if (typeof member !== "function") return member;
      let traced = wrapped.get(property);
      if (!traced) {
        const method = member as (...args: unknown[]) => unknown;
        const attributes = { [LedgerAttribute.system]: system, [LedgerAttribute.operation]: String(property) };
        // Called on the target either way: its methods use private fields a proxy does not have.
        traced =
          UNTRACED.has(property) || typeof property !== "string"
            ? method.bind(target)
            : (...args: unknown[]) => inChildSpan(tracer, `ledger ${property}`, { kind: SpanKind.CLIENT, attributes }, async () => method.apply(target, args));
        wrapped.set(property, traced);
      }
      return traced;
    },
  });
}
