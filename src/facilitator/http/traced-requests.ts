// The payment requests as server spans: verify, settle and the settlement lookup, each in the trace its
// caller's `traceparent` names (a seller's span) or in a new one. Other routes (the healthcheck a balancer
// polls, the page, discovery) are not traced.
import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import { context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Tracer } from "@opentelemetry/api";
import { extractTraceContext } from "../../telemetry/traceparent.js";

/** The traced routes, by path: the span is named `<method> <path>`. */
const TRACED_PATHS = new Set(["/v2/x402/verify", "/v2/x402/settle", "/v2/x402/settlements"]);

/** The path of a request's URL, without its query. */
function pathOf(req: IncomingMessage): string {
  const url = req.url ?? "";
  const query = url.indexOf("?");
  return query === -1 ? url : url.slice(0, query);
}

/**
 * `handler` with each payment request in a server span, ended when its answer is sent or its connection
 * closes. Only the request's `traceparent` is its parent: nothing else of the caller's context is taken.
 */
export function tracedRequests(handler: RequestListener, tracer: Tracer): RequestListener {
  return (req: IncomingMessage, res: ServerResponse) => {
    const path = pathOf(req);
    if (!TRACED_PATHS.has(path)) {
      handler(req, res);
      return;
    }
    const parent = extractTraceContext(req.headers, ROOT_CONTEXT);
    const method = req.method ?? "GET";
    const span = tracer.startSpan(`${method} ${path}`, { kind: SpanKind.SERVER, attributes: { "http.request.method": method, "url.path": path } }, parent);
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      span.setAttribute("http.response.status_code", res.statusCode);
      if (res.statusCode >= 500 || !res.writableFinished) span.setStatus({ code: SpanStatusCode.ERROR, message: res.writableFinished ? `HTTP ${res.statusCode}` : "connection closed before the answer" });
      span.end();
    };
    res.once("finish", end);
    res.once("close", end);
    const active = trace.setSpan(parent, span);
    // The body's events come from the connection, outside this context: their listeners (the fast lane's
    // reader) are bound to it, so the work they start is in the request's trace.
    context.bind(active, req);
    context.with(active, () => handler(req, res));
  };
}
