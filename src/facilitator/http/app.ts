import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import express, { type Express, type Request, type Response, type Router } from "express";
import type { CatalogStore, DiscoveryBounds, LedgerLifecycle } from "../../ledger/types.js";
import type { SupportedResponse } from "../../protocol/schemas.js";
import { RequestError } from "../../protocol/reasons.js";
import type { SettlementDeps } from "../../settlement/deps.js";
import type { ApiKeyConfig, RateLimitsConfig } from "../config/index.js";
import type { PaymentRoute } from "../dialects/index.js";
import { discoveryRoutes } from "../discovery.js";
import { publicHealth, type HealthReport } from "../health.js";
import { NO_HOOKS, type HookRunner } from "../hooks.js";
import type { Logger } from "../logger.js";
import { QUIET_REQUEST_CLOCK, type RequestClock } from "../metrics/stages.js";
import type { OutcomeRecord } from "../outcome-record.js";
import { apiKeyReader, refuseApiKey } from "./api-keys.js";
import { closedQuota, edgeGuards, type QuotaHolder } from "./edge.js";
import { fastLane } from "./fast-lane.js";
import { LOCAL_HOSTS, requireHost } from "./hosts.js";
import { PayerQuota } from "./payer-quota.js";
import type { RouteContext } from "./payment-request.js";
import { boundedStores, type LimiterName, type RateLimitStores, type StoreFallback } from "./rate-limit.js";
import { edgeRefusals } from "./refusals.js";
import { settleRoute } from "./routes/settle.js";
import { verifyRoute } from "./routes/verify.js";
import { settlementRoutes, type SettlementRoutesOptions } from "./settlements.js";

export type { OutcomeRecord } from "../outcome-record.js";

/** Options of {@link createApp}. */
export interface AppOptions {
  /** Settlement's one dependencies object: what verify and settle run on. */
  context: SettlementDeps<Logger>;
  supported: () => SupportedResponse;
  health: () => Promise<HealthReport>;
  rateLimits: RateLimitsConfig;
  trustProxy: false | number | string[];
  /** `ALLOWED_HOSTS`: with any, every route answers only a `Host` naming one of them or a loopback name (else 421). */
  allowedHosts?: readonly string[];
  bodyLimitBytes: number;
  /** Seller API keys; with any, verify and settle require one (401 otherwise) and quotas are per key. */
  apiKeys?: readonly ApiKeyConfig[];
  /** Shared rate-limit stores when several instances run, one per limiter; default in-memory. */
  rateLimitStores?: RateLimitStores;
  /** How long a request waits for a shared store's count (default 50 ms); past it, or when the store fails, this instance's own count judges it. */
  rateLimitStoreWaitMs?: number;
  /** A shared store's count was not used for a request (metrics, logs). */
  onRateLimitStoreFallback?: (limiter: LimiterName, reason: StoreFallback) => void;
  /** The settlement status lookups (`GET /v2/x402/settlements…`), rate-limited like verify. */
  statusLookup?: Omit<SettlementRoutesOptions, "guards">;
  /** Times verify's stages (`METRICS_VERIFY_STAGES`); default the clock that times nothing. */
  clock?: RequestClock;
  /** Called once per verify/settle answer, refusals at the edge included (logging, metrics). */
  onOutcome?: (outcome: OutcomeRecord) => void;
  onRateLimited?: (route: PaymentRoute | "status" | "public", by: QuotaHolder) => void;
  /** Called once per HTTP answer with the route (or "other") and status. */
  onResponse?: (route: string, status: number) => void;
  /** The dashboard's routes (the page at `/`, its API and live feed), when it is on. */
  dashboard?: Router;
  /**
   * The discovery catalog (x402 `bazaar`): a settled payment that declares its resource is recorded there
   * under the payTo it paid (never a verify), and `GET /v2/x402/discovery/{resources,search}` read it
   * (guarded as the status lookups are).
   */
  discovery?: { ledger: Omit<CatalogStore, "removeDiscoveryResource"> & Pick<LedgerLifecycle, "backend">; bounds: DiscoveryBounds };
  /** The operator's lifecycle hooks around verify and settle (default none). */
  hooks?: HookRunner;
  /** Seconds until verify, settle and the status lookups take requests again; `undefined` while they do (the local stack's "busy" fault). */
  closedFor?: () => number | undefined;
}

const ROUTES = new Set(["/healthcheck", "/v2/x402/supported", "/v2/x402/verify", "/v2/x402/settle", "/v2/x402/settlements", "/v2/x402/discovery/resources", "/v2/x402/discovery/search"]);
/** The route label of a path (bounded for metrics: a lookup's hash is not a label). */
const routeOf = (path: string) => (path.startsWith("/v2/x402/settlements/") ? "/v2/x402/settlements" : ROUTES.has(path) ? path : "other");
const REQUEST_ID = /^[\w.:-]{1,64}$/;

/**
 * Builds the facilitator's HTTP app: `/healthcheck`, `/v2/x402/supported`, `/v2/x402/verify`, `/v2/x402/settle`,
 * the status lookups, the discovery catalog and the dashboard. Every answer is JSON, with the statuses of the
 * project's decisions. Does not listen.
 */
export function createApp(options: AppOptions): Express {
  const { context: deps } = options;
  const clock = options.clock ?? QUIET_REQUEST_CLOCK;
  const record = (outcome: OutcomeRecord) => options.onOutcome?.(outcome);
  // A shared store (the database) that is slow or frozen never holds an answer back for longer than the wait.
  const stores = boundedStores(options.rateLimitStores, options.rateLimitStoreWaitMs ?? 50, options.onRateLimitStoreFallback);
  const payerQuota = new PayerQuota({ perMinute: options.rateLimits.payerSettlePerMinute, store: stores?.settlePayer });
  const keyed = (options.apiKeys?.length ?? 0) > 0;
  const app = express();
  app.disable("x-powered-by");
  app.set("trust proxy", options.trustProxy);
  app.set("etag", false);

  const context: RouteContext = { deps, clock, record, hooks: options.hooks ?? NO_HOOKS };
  const handlers = {
    verify: verifyRoute(context),
    settle: settleRoute(context, {
      admit: (payer, authorization) => payerQuota.admit(payer, authorization),
      ...(options.onRateLimited ? { onRateLimited: options.onRateLimited } : {}),
      ...(options.discovery ? { catalog: { ...options.discovery, keyed } } : {}),
    }),
  };
  const refusals = edgeRefusals({ bodyLimitBytes: options.bodyLimitBytes, logger: deps.logger, record });
  const closed = options.closedFor ? closedQuota(options.closedFor) : undefined;

  // A request id per request (the caller's X-Request-Id when sane), echoed back and put in logs.
  const begin = (req: Request, res: Response, countedByLane = false) => {
    const given = req.headers["x-request-id"];
    const id = typeof given === "string" && REQUEST_ID.test(given) ? given : randomUUID();
    res.locals.requestId = id;
    res.setHeader("X-Request-Id", id);
    // The fast lane counts its answers itself (no listener per request); the others once written.
    if (options.onResponse && !countedByLane) res.on("finish", () => answered(routeOf(req.path), res));
  };
  /** One HTTP answer, counted (`route`: its bounded label). */
  const answered = (route: string, res: Response) => {
    if (!options.onResponse) return;
    const since = clock.start();
    options.onResponse(route, res.statusCode);
    clock.stop("metrics", since);
  };
  // The payment routes that no guard stands before (no API keys, no Host check, their limit off) take a fast lane,
  // before Express's own layers (its router's walk to the first middleware), in its app.handle.
  const unguarded = (route: PaymentRoute) => !keyed && !options.allowedHosts?.length && options.rateLimits[route === "verify" ? "verifyPerMinute" : "settlePerMinute"] === 0;
  const lanes = new Map((["verify", "settle"] as const).filter(unguarded).map((route) => [`/v2/x402/${route}`, route]));
  if (lanes.size > 0) {
    const lane = fastLane({ app, lanes, bodyLimitBytes: options.bodyLimitBytes, begin, answered, clock, handlers, refusals, ...(closed ? { closed } : {}) });
    const handled = app as unknown as { handle(req: IncomingMessage, res: ServerResponse, callback?: unknown): void };
    const general = handled.handle.bind(app);
    handled.handle = (req, res, callback) => {
      if (!lane(req, res)) general(req, res, callback);
    };
  }
  app.use((req, res, next) => {
    const since = clock.start();
    begin(req, res);
    clock.stop("edge", since);
    next();
  });
  // Before anything reads the request: a name this service was not given is a DNS rebinding, or a mistake.
  if (options.allowedHosts?.length) app.use(requireHost([...LOCAL_HOSTS, ...options.allowedHosts]));

  const guards = edgeGuards({
    ...(options.clock ? { stages: options.clock } : {}),
    rateLimits: options.rateLimits,
    apiKeys: options.apiKeys ?? [],
    bodyLimitBytes: options.bodyLimitBytes,
    stores,
    logger: deps.logger,
    onRefused: (route, res, text) => refusals.refused(route, res, res.statusCode, text, res.statusCode === 401 ? "unauthorized" : "unsupported_media_type"),
    onRateLimited: options.onRateLimited,
    ...(options.closedFor ? { closedFor: options.closedFor } : {}),
  });
  // The detailed view (where the ledger is, the driver's own error) is for the operator: it needs an API key.
  const keyOf = apiKeyReader(options.apiKeys ?? []);
  app.get("/healthcheck", ...guards.public, async (req, res) => {
    const detailed = req.query.detail === "1" || req.query.detail === "true";
    if (detailed && !keyed) return void res.status(403).json({ error: RequestError.detailNeedsApiKeys });
    if (detailed && !keyOf(req)) return refuseApiKey(req, res);
    const report = await options.health();
    res.status(report.status === "success" ? 200 : 503).json(detailed ? report : publicHealth(report));
  });
  app.get("/v2/x402/supported", ...guards.public, (_req, res) => void res.json(options.supported()));
  app.post("/v2/x402/verify", ...guards.verify, handlers.verify);
  app.post("/v2/x402/settle", ...guards.settle, handlers.settle);
  if (options.statusLookup) app.use(settlementRoutes({ ...options.statusLookup, guards: guards.status }));
  if (options.discovery) app.use(discoveryRoutes({ ledger: options.discovery.ledger, guards: guards.status }));
  if (options.dashboard) {
    if (guards.public.length > 0) app.use(["/dashboard/api", "/dashboard/events"], ...guards.public);
    app.use(options.dashboard);
  }
  app.use((_req, res) => void res.status(404).json({ error: RequestError.notFound }));
  app.use(refusals.onError);
  return app;
}
