import type { IncomingMessage, ServerResponse } from "node:http";
import type { Express, Request, RequestHandler, Response } from "express";
import type { PaymentRoute } from "../dialects/index.js";
import { QUIET_REQUEST_CLOCK as QUIET, type RequestClock } from "../metrics/stages.js";
import type { EdgeRefusals } from "./refusals.js";

/**
 * Whether a POST's headers are the plain case that needs none of the JSON middleware's generality:
 * `Content-Type: application/json` (or with `; charset=utf-8`), no `Content-Encoding` or
 * `Transfer-Encoding`, and a `Content-Length` of 1 to `limit` bytes. Anything else (another charset, a
 * compressed or chunked body, no length, too long) goes the general way, which answers it as it always has.
 */
export function plainJsonPost(req: IncomingMessage, limit: number): boolean {
  const type = req.headers["content-type"];
  if (type === undefined) return false;
  if (type !== "application/json") {
    const lower = type.toLowerCase();
    if (lower !== "application/json" && lower !== "application/json; charset=utf-8") return false;
  }
  if (req.headers["content-encoding"] !== undefined || req.headers["transfer-encoding"] !== undefined) return false;
  const declared = req.headers["content-length"];
  if (declared === undefined || declared.length > 10 || !/^[1-9]\d*$/.test(declared)) return false;
  return Number(declared) <= limit;
}

/** A body read whole: its JSON, or `unreadable` when it is not JSON. */
export type ReadBody = { ok: true; json: unknown } | { ok: false };

/**
 * Reads a {@link plainJsonPost}'s body and parses it as the JSON middleware (`strict: false`) would: UTF-8,
 * a leading byte-order mark dropped, an empty text read as `{}`, any JSON value accepted. `done` is called
 * once, with the JSON or `ok: false`, when the body has arrived; never when the client goes away first
 * (the HTTP parser ends the body at its Content-Length, so a complete body is never longer). `clock` times
 * the decode and parse as `bodyParse`.
 */
export function readJsonBody(req: IncomingMessage, done: (body: ReadBody) => void, clock: RequestClock): void {
  const chunks: Buffer[] = [];
  let size = 0;
  req.on("data", (chunk: Buffer) => {
    chunks.push(chunk);
    size += chunk.length;
  });
  // An aborted request errors here: nothing to answer (as the JSON middleware's `request.aborted`).
  req.on("error", () => {});
  req.on("end", () => {
    const since = clock.start();
    const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
    let text = bytes.toString("utf8");
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    let json: unknown;
    try {
      json = text.length === 0 ? {} : JSON.parse(text);
    } catch {
      done({ ok: false });
      return;
    }
    clock.stop("bodyParse", since);
    done({ ok: true, json });
  });
}

/** Options of {@link fastLane}. */
export interface FastLaneOptions {
  /** The app whose request and response prototypes the lane's requests take (as Express's app.handle gives them). */
  app: Express;
  /** The payment routes that no guard stands before, by path (`/v2/x402/verify`). */
  lanes: ReadonlyMap<string, PaymentRoute>;
  bodyLimitBytes: number;
  /** The request id, as every request gets it; `countedByLane`: the lane counts the answer itself. */
  begin(req: Request, res: Response, countedByLane: boolean): void;
  /** Counts one answer of `path` (the lane's own count: no listener per request). */
  answered(path: string, res: Response): void;
  clock: RequestClock;
  handlers: Readonly<Record<PaymentRoute, RequestHandler>>;
  refusals: EdgeRefusals;
  /** The local stack's "busy" quota, standing on the fast lane as the guards' would. */
  closed?: RequestHandler;
}

/**
 * verify and settle on an unguarded route with a plain JSON body, taken in the app's `handle` before Express's own
 * layers: the request id, the body read and parsed, then the route's handler, without the router's walk, the
 * content-type checks and the JSON middleware's streams and decoders. The answers are the same: the JSON middleware
 * would take exactly these bodies, and a body that is not JSON gets the error handler's 400. Answers false for every
 * other request (Express handles it).
 */
export function fastLane(options: FastLaneOptions): (message: IncomingMessage, answer: ServerResponse) => boolean {
  const noop = () => {};
  return (message, answer) => {
    const route = message.method === "POST" ? options.lanes.get(message.url!) : undefined;
    if (route === undefined || !plainJsonPost(message, options.bodyLimitBytes)) return false;
    // What Express's app.handle does before its router: the app's request and response prototypes, the locals.
    const req = Object.setPrototypeOf(message, options.app.request) as Request;
    const res = Object.setPrototypeOf(answer, options.app.response) as Response;
    req.res = res;
    res.req = req;
    res.locals = Object.create(null) as Response["locals"];
    // The verify budget (METRICS_VERIFY_STAGES) times verify only.
    const clock = route === "verify" ? options.clock : QUIET;
    const since = clock.start();
    options.begin(req, res, true);
    clock.stop("edge", since);
    // Every way out of the lane answers, then counts the answer here (its path is the route's label).
    const path = message.url!;
    const read = () =>
      readJsonBody(
        req,
        (body) => {
          if (!body.ok) {
            options.refusals.unreadable(route, res, "body is not valid JSON");
            options.answered(path, res);
            return;
          }
          req.body = body.json;
          Promise.resolve(options.handlers[route](req, res, noop)).then(
            () => options.answered(path, res),
            (error: unknown) => {
              options.refusals.onError(error, req, res, noop);
              options.answered(path, res);
            },
          );
        },
        clock,
      );
    if (!options.closed) read();
    else {
      let open = false;
      options.closed(req, res, () => {
        open = true;
        read();
      });
      if (!open) options.answered(path, res);
    }
    return true;
  };
}
