import { randomUUID } from "node:crypto";
import express, { type ErrorRequestHandler, type Express, type Request, type Response } from "express";
import { RequestError } from "../../protocol/reasons.js";
import { FacilitatorFault, PayerQuotaExceeded } from "../../settlement/faults.js";
import { verifyRequest } from "../../settlement/verify.js";
import { settlePayment, type SettledPayment } from "../../settlement/settle.js";
import { cronosDialect, dialectOf } from "../dialects/index.js";
import { faultText, isSettleErrorCode, settleErrorText } from "../dialects/codec.js";
import { publicHealth } from "../health.js";
import { apiKeyOf, apiKeyReader, refuseApiKey } from "./api-keys.js";
import { closedQuota, edgeGuards } from "./edge.js";
import { LOCAL_HOSTS, requireHost } from "./hosts.js";
import { PayerQuota } from "./payer-quota.js";
import { boundedStores } from "./rate-limit.js";
import { settlementRoutes } from "./settlements.js";
import { plainJsonPost, readJsonBody } from "./fast-lane.js";
import { catalogPaymentOf, discoveryRoutes } from "../discovery.js";
import type { Payment } from "../../protocol/payment.js";
import { canonicalNetwork } from "../../protocol/networks.js";

export type { AppOptions, OutcomeRecord, ValidPayment } from "./app-types.js";
import type { AppOptions, Route } from "./app-types.js";


const ROUTES = new Set([
  "/healthcheck",
  "/v2/x402/supported",
  "/v2/x402/verify",
  "/v2/x402/settle",
  "/v2/x402/settlements",
  "/v2/x402/discovery/resources",
  "/v2/x402/discovery/search",
]);
/** The route label of a path (bounded for metrics: a lookup's hash is not a label). */
const routeOf = (path: string) => (path.startsWith("/v2/x402/settlements/") ? "/v2/x402/settlements" : ROUTES.has(path) ? path : "other");
const REQUEST_ID = /^[\w.:-]{1,64}$/;
/** How long a settle's answer waits for its catalog entry to be written (a slow ledger then writes it after the answer). */
const CATALOG_WAIT_MS = 1_000;
/** The `Retry-After` of a settle answered 503 (a fault: nothing sent, or no verdict yet). */
const SETTLE_RETRY_AFTER_SECONDS = 2;

/** The endpoint's own shape for a request refused before its dialect is known (Cronos, the default). */
function refusal(route: Route, network: string, text: string): object {
  return cronosDialect.refusal(route, "invalid", text, { network });
}

/**
 * Builds the facilitator's HTTP app: `/healthcheck`, `/v2/x402/supported`, `/v2/x402/verify`,
 * `/v2/x402/settle`. Every answer is JSON, with the statuses of the project's decisions.
 * Does not listen.
 */
export function createApp(options: AppOptions): Express {
  const { context } = options;
  // A shared store (the database) that is slow or frozen never holds an answer back for longer than the wait.
  const stores = boundedStores(options.rateLimitStores, options.rateLimitStoreWaitMs ?? 50, options.onRateLimitStoreFallback);
  const payerQuota = new PayerQuota({ perMinute: options.rateLimits.payerSettlePerMinute, store: stores?.settlePayer });
  const admit = (payer: string, authorization: string) => payerQuota.admit(payer, authorization);
  const app = express();
  app.disable("x-powered-by");
  app.set("trust proxy", options.trustProxy);
  app.set("etag", false);

  // A request id per request (the caller's X-Request-Id when sane), echoed back and put in logs.
  const { stages } = context;
  const begin = (req: Request, res: Response) => {
    const given = req.get("X-Request-Id");
    const id = given && REQUEST_ID.test(given) ? given : randomUUID();
    res.locals.requestId = id;
    res.set("X-Request-Id", id);
    if (options.onResponse) {
      const onResponse = options.onResponse;
      res.on("finish", () => {
        const counted = stages ? stages.start() : 0;
        onResponse(routeOf(req.path), res.statusCode);
        if (stages) stages.stop("metrics", counted);
      });
    }
  };
  // The payment routes that no guard stands before (no API keys, no Host check, their limit off), taken
  // before the router when their body is plain JSON: see fastLane below.
  const keyed = (options.apiKeys?.length ?? 0) > 0;
  const unguarded = (route: Route) => !keyed && !options.allowedHosts?.length && options.rateLimits[route === "verify" ? "verifyPerMinute" : "settlePerMinute"] === 0;
  const lanes = new Map<string, Route>((["verify", "settle"] as const).filter(unguarded).map((route) => [`/v2/x402/${route}`, route]));
  if (lanes.size > 0) app.use((req, res, next) => fastLane(req, res, next));
  app.use((req, res, next) => {
    const since = stages ? stages.start() : 0;
    begin(req, res);
    if (stages) stages.stop("edge", since);
    next();
  });
  // Before anything reads the request: a name this service was not given is a DNS rebinding, or a mistake.
  if (options.allowedHosts?.length) app.use(requireHost([...LOCAL_HOSTS, ...options.allowedHosts]));


  /** A verify/settle request answered before its handler ran (401, 413, 415, unreadable body): one outcome record. */
  const refused = (route: Route, res: Response, status: number, text: string, code: string) =>
    options.onOutcome?.({ requestId: String(res.locals.requestId), route, dialect: "unknown", status, network: "unknown", outcome: text, code, durationMs: 0, edge: true });

  /** A verify/settle body that could not be read as JSON: 400 in the endpoint's shape. */
  const unreadable = (route: Route, res: Response, why: string) => {
    const text = RequestError.invalidRequest(why);
    res.status(400).json(refusal(route, "unknown", text));
    refused(route, res, 400, text, "invalid_request");
  };

  /**
   * Records the resource a settlement's seller declares (its payment requirements, never the buyer's payment),
   * under the payTo the settlement paid, with the facts of the settlement (never a verify's, never the
   * request's): once per settlement (a repeat under a payment identifier writes nothing) and, with API keys,
   * only under the key configured for that payTo. Waited for up to CATALOG_WAIT_MS before the answer (so
   * whoever was paid finds it listed at once); a declaration the catalog refuses, a ledger that fails or
   * hangs only costs a log line, never the payment's answer.
   */
  const catalog = async (req: Request, payment: Payment, outcome: SettledPayment) => {
    if (!options.discovery || outcome.repeat) return;
    if (keyed && !apiKeyOf(req)?.payTo?.includes(outcome.to.toLowerCase())) return;
    const body: unknown = req.body;
    const { ledger, bounds } = options.discovery;
    const network = canonicalNetwork(payment.requirements.network);
    const runtime = network && context.networks.get(network);
    if (!network || !runtime) return;
    let written: Promise<unknown>;
    try {
      const entry = catalogPaymentOf(body, { network, asset: runtime.config.token, payer: outcome.from, payTo: outcome.to, value: outcome.value, paidAt: outcome.timestamp });
      if (!entry) return;
      written = ledger
        .recordDiscoveryPayment(entry, bounds)
        .catch((error: unknown) => context.logger.warn({ resource: entry.entry.resource, err: errorSummary(error) }, "discovery catalog: entry not recorded"));
    } catch (error) {
      context.logger.warn({ err: errorSummary(error) }, "discovery catalog: declaration not read");
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([written, new Promise((resolve) => (timer = setTimeout(resolve, CATALOG_WAIT_MS)))]);
    clearTimeout(timer);
  };

  // The dispatch point: the body's dialect reads it into one payment and writes the outcome back.
  const handler = (route: Route) => async (req: Request, res: Response) => {
    const started = performance.now();
    // The verify budget (METRICS_VERIFY_STAGES): off, nothing here asks the clock.
    const clock = route === "verify" ? stages : undefined;
    let since = clock ? clock.start() : 0;
    const requestId = String(res.locals.requestId);
    const codec = dialectOf(req.body);
    const dialect = codec.name;
    if (clock) clock.stop("schema", since);
    const read = codec.read(req.body, req.get("X402-Version"), clock);
    const { echo } = read;
    // Records name the network as the checks saw it (x402 v2's eip155:338 is cronos-testnet); answers echo the caller's.
    const network = read.ok ? read.payment.requirements.network : echo.network;
    if (!read.ok) {
      res.status(400).json(codec.refusal(route, "invalid", read.text, echo));
      options.onOutcome?.({ requestId, route, dialect, status: 400, network, outcome: read.text, code: "invalid_request", durationMs: performance.now() - started, edge: true });
      return;
    }
    const { payment } = read;
    try {
      if (route === "verify") {
        const outcome = await verifyRequest(payment, context);
        if (outcome.isValid && !("repeat" in outcome) && options.afterVerify) {
          await options.afterVerify({ network: outcome.runtime.config.network, authorization: outcome.payload.authorization }).catch((error: unknown) =>
            context.logger.warn({ requestId, err: errorSummary(error) }, "after-verify hook failed; the answer stands"),
          );
        }
        if (clock) since = clock.start();
        const answer = jsonAnswer(res, codec.verifyAnswer(outcome, echo));
        if (clock) {
          clock.stop("answer", since);
          since = clock.start();
        }
        res.end(answer);
        if (clock) {
          clock.stop("write", since);
          clock.verified();
          since = clock.start();
        }
        options.onOutcome?.({
          requestId, route, dialect, status: 200, network,
          payer: outcome.payload?.authorization.from,
          payee: outcome.payload?.authorization.to,
          amount: outcome.payload?.authorization.value,
          outcome: outcome.isValid ? "valid" : codec.verifyText(outcome),
          code: outcome.isValid ? "valid" : outcome.code,
          durationMs: performance.now() - started,
        });
        if (clock) clock.stop("metrics", since);
      } else {
        const outcome = await settlePayment(payment, context, { admit });
        if (outcome.settled) await catalog(req, payment, outcome);
        res.json(codec.settleAnswer(outcome, echo));
        const authorization = payment.payload.ok ? payment.payload.payload.authorization : undefined;
        options.onOutcome?.({
          requestId, route, dialect, status: 200, network,
          ...(outcome.settled
            ? { payer: outcome.from, payee: outcome.to, amount: outcome.value.toString() }
            : authorization ? { payer: authorization.from, payee: authorization.to, amount: authorization.value } : {}),
          outcome: outcome.settled ? "settled" : settleErrorText(outcome, codec.verifyText),
          // A verify refusal settle has no word of its own for (a header, a network, an amount…) counts as `refused`.
          code: outcome.settled ? "settled" : isSettleErrorCode(outcome.code) ? outcome.code : "refused",
          txHash: outcome.txHash,
          durationMs: performance.now() - started,
        });
      }
    } catch (error) {
      if (error instanceof PayerQuotaExceeded) {
        // The payer's own quota (its signature is proven): the edge limiters' 429, counted as theirs are.
        options.onRateLimited?.(route, "payer");
        res.set("Retry-After", String(error.retryAfterSeconds));
        res.status(429).json({ error: RequestError.tooManyRequests, retryAfter: error.retryAfterSeconds });
        return;
      }
      const fault = error instanceof FacilitatorFault ? error : undefined;
      if (fault) context.observer.rpcError(network);
      // decisions.md: a fault is 500 on verify; on settle 503: nothing was sent, or what was sent is not
      // decided yet (a reverted transaction the chain could not tell about) — no verdict either way.
      const status = route === "verify" ? 500 : 503;
      const text = fault ? faultText(fault.facts) : RequestError.internal;
      context.logger.error({ requestId, route, dialect, network, err: errorSummary(error) }, "request fault");
      // The seller (or buyer) may try again shortly: a retry claims afresh, or gets the decided outcome.
      if (status === 503) res.set("Retry-After", String(SETTLE_RETRY_AFTER_SECONDS));
      res.status(status).json(codec.refusal(route, fault ? "unavailable" : "internal", text, echo));
      options.onOutcome?.({ requestId, route, dialect, status, network, outcome: text, code: "fault", durationMs: performance.now() - started });
    }
  };

  /**
   * verify and settle on an unguarded route with a plain JSON body (fast-lane.ts): the request id, the body
   * read and parsed, then the same handler, without the router's walk, the content-type checks and the JSON
   * middleware's streams and decoders. The answers are the same: the JSON middleware would take exactly
   * these bodies, and a body that is not JSON gets the error handler's 400. Every other request passes on.
   */
  const fastLane = (req: Request, res: Response, next: () => void) => {
    const route = req.method === "POST" ? lanes.get(req.url) : undefined;
    if (route === undefined || !plainJsonPost(req, options.bodyLimitBytes)) return next();
    const clock = route === "verify" ? stages : undefined;
    const since = clock ? clock.start() : 0;
    begin(req, res);
    if (clock) clock.stop("edge", since);
    const read = () =>
      readJsonBody(req, (body) => {
        if (!body.ok) {
          unreadable(route, res, "body is not valid JSON");
          return;
        }
        req.body = body.json;
        handlers[route](req, res).catch((error: unknown) => onError(error, req, res, next));
      }, clock);
    // The local stack's "busy" quota stands on the fast lane too, where the guards' would.
    if (closed) return void closed(req, res, read);
    read();
  };
  const closed = options.closedFor ? closedQuota(options.closedFor) : undefined;

  const guards = edgeGuards({
    ...(stages ? { stages } : {}),
    rateLimits: options.rateLimits,
    apiKeys: options.apiKeys ?? [],
    bodyLimitBytes: options.bodyLimitBytes,
    stores,
    logger: context.logger,
    onRefused: (route, res, text) => refused(route, res, res.statusCode, text, res.statusCode === 401 ? "unauthorized" : "unsupported_media_type"),
    onRateLimited: options.onRateLimited,
    ...(options.closedFor ? { closedFor: options.closedFor } : {}),
  });
  // The detailed view (where the ledger is, the driver's own error) is for the operator: it needs an API key.
  const keyOf = apiKeyReader(options.apiKeys ?? []);
  app.get("/healthcheck", ...guards.public, async (req, res) => {
    const detailed = req.query.detail === "1" || req.query.detail === "true";
    if (detailed && (options.apiKeys?.length ?? 0) === 0) {
      res.status(403).json({ error: RequestError.detailNeedsApiKeys });
      return;
    }
    if (detailed && !keyOf(req)) {
      refuseApiKey(req, res);
      return;
    }
    const report = await options.health();
    res.status(report.status === "success" ? 200 : 503).json(detailed ? report : publicHealth(report));
  });

  app.get("/v2/x402/supported", ...guards.public, (_req, res) => {
    res.json(options.supported());
  });

  const handlers = { verify: handler("verify"), settle: handler("settle") };
  app.post("/v2/x402/verify", ...guards.verify, handlers.verify);
  app.post("/v2/x402/settle", ...guards.settle, handlers.settle);

  if (options.statusLookup) app.use(settlementRoutes({ ...options.statusLookup, guards: guards.status }));
  if (options.discovery) app.use(discoveryRoutes({ ledger: options.discovery.ledger, guards: guards.status }));

  if (options.dashboard) {
    if (guards.public.length > 0) app.use(["/dashboard/api", "/dashboard/events"], ...guards.public);
    app.use(options.dashboard);
  }

  app.use((_req, res) => {
    res.status(404).json({ error: RequestError.notFound });
  });

  const onError: ErrorRequestHandler = (error, req, res, _next) => {
    const type = (error as { type?: string }).type;
    const route: Route | undefined = req.path.endsWith("/verify") ? "verify" : req.path.endsWith("/settle") ? "settle" : undefined;
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
    context.logger.error({ path: req.path, err: errorSummary(error) }, "unhandled error");
    if (res.headersSent) return;
    res.status(500).json({ error: RequestError.internal });
  };
  app.use(onError);
  return app;
}

/**
 * The text and headers `res.json` would send (status 200, `application/json; charset=utf-8`, Content-Length),
 * set without Express's generic path; the caller ends the response with the text.
 */
function jsonAnswer(res: Response, body: object): string {
  const text = JSON.stringify(body);
  res.setHeader("Content-Type", "application/json; charset=utf-8");
  res.setHeader("Content-Length", Buffer.byteLength(text));
  return text;
}

function errorSummary(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message.split("\n")[0]}` : "";
    return `${error.name}: ${error.message.split("\n")[0]}${cause}`;
  }
  return String(error);
}
