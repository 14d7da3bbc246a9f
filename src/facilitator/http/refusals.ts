// Verify and settle requests refused before their handler ran (401, 413, 415, a body that is not JSON), and the app's error handler.
import type { ErrorRequestHandler, Response } from "express";
import { RequestError } from "../../protocol/reasons.js";
import { cronosDialect, type PaymentRoute } from "../dialects/index.js";
import type { Logger } from "../logger.js";
import type { OutcomeRecord } from "../outcome-record.js";
import { errorSummary } from "./payment-request.js";

/** Answers and records the requests refused before their handler ran. */
export interface EdgeRefusals {
  /** A verify/settle request answered before its handler ran (401, 413, 415, unreadable body): one outcome record. */
  refused(route: PaymentRoute, res: Response, status: number, text: string, code: string): void;
  /** A verify/settle body that could not be read as JSON: 400 in the endpoint's shape (Cronos, the default, before its dialect is known). */
  unreadable(route: PaymentRoute, res: Response, why: string): void;
  /** The app's error handler: the body parser's refusals in the endpoint's terms, anything else 500 JSON. */
  onError: ErrorRequestHandler;
}

/** The refusals at the edge, recorded through `record`; `bodyLimitBytes` named in a 413. */
export function edgeRefusals(options: { bodyLimitBytes: number; logger: Logger; record(record: OutcomeRecord): void }): EdgeRefusals {
  const refused: EdgeRefusals["refused"] = (route, res, status, text, code) =>
    options.record({ requestId: String(res.locals.requestId), route, dialect: "unknown", status, network: "unknown", outcome: text, code, durationMs: 0, edge: true });
  const unreadable: EdgeRefusals["unreadable"] = (route, res, why) => {
    const text = RequestError.invalidRequest(why);
    res.status(400).json(cronosDialect.refusal(route, "invalid", text, { network: "unknown" }));
    refused(route, res, 400, text, "invalid_request");
  };
  const onError: ErrorRequestHandler = (error, req, res, _next) => {
    const type = (error as { type?: string }).type;
    const route: PaymentRoute | undefined = req.path.endsWith("/verify") ? "verify" : req.path.endsWith("/settle") ? "settle" : undefined;
    // The client went away mid-body (or was cut off by REQUEST_TIMEOUT_MS, which answered and logged 408).
    if (type === "request.aborted") return;
    if (type === "entity.too.large") {
      const text = `${RequestError.payloadTooLarge}: the limit is ${options.bodyLimitBytes} bytes`;
      res.status(413).json({ error: text });
      if (route) refused(route, res, 413, text, "payload_too_large");
      return;
    }
    if (type === "charset.unsupported" || type === "encoding.unsupported") {
      const text = RequestError.unsupportedCharset;
      res.status(415).json({ error: text });
      if (route) refused(route, res, 415, text, "unsupported_media_type");
      return;
    }
    const status = (error as { status?: number }).status;
    if (route && typeof status === "number" && status >= 400 && status < 500) {
      unreadable(route, res, type === "entity.parse.failed" ? "body is not valid JSON" : "body could not be read");
      return;
    }
    options.logger.error({ path: req.path, err: errorSummary(error) }, "unhandled error");
    if (res.headersSent) return;
    res.status(500).json({ error: RequestError.internal });
  };
  return { refused, unreadable, onError };
}
