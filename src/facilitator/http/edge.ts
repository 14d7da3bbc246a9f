import express, { type Request, type RequestHandler, type Response } from "express";
import type { ApiKeyConfig, RateLimitsConfig } from "../config/index.js";
import type { Logger } from "../logger.js";
import type { RequestClock, VerifyStage } from "../metrics/stages.js";
import { apiKeyOf, requireApiKey } from "./api-keys.js";
import { requireJsonBody } from "./content-type.js";
import { RequestError } from "../../protocol/reasons.js";
import { perMinuteLimit, type RateLimitStores } from "./rate-limit.js";

/** The routes that take a body and cost the relayer: verify and settle. */
export type EdgeRoute = "verify" | "settle";

/** Whose quota a refused request ran out of. */
export type QuotaHolder = "ip" | "key" | "payer";

/** Options of {@link edgeGuards}. */
export interface EdgeGuardsOptions {
  rateLimits: RateLimitsConfig;
  /** Seller API keys; empty = no authentication and per-IP limits. */
  apiKeys: readonly ApiKeyConfig[];
  bodyLimitBytes: number;
  stores?: RateLimitStores;
  /** Gets express-rate-limit's own reports (its validations). */
  logger: Logger;
  /** A request refused before its body was read (401, 415): the answer is sent already. */
  onRefused(route: EdgeRoute, res: Response, text: string): void;
  onRateLimited?(route: EdgeRoute | "status" | "public", by: QuotaHolder): void;
  /**
   * Seconds until the quota opens again, `undefined` while it is open: a quota held at zero from outside
   * (the local stack's "busy" fault). While closed, verify, settle and the status lookups answer 429 with
   * that `Retry-After`, as a limiter whose count ran out does.
   */
  closedFor?: () => number | undefined;
  /** Times verify's guards as stages of its budget (`METRICS_VERIFY_STAGES`). */
  stages?: RequestClock;
}

/**
 * What a verify or settle request passes before its handler, in order: the API key (401), a JSON
 * content type (415), the client's quota (per API key when keys are configured, else per client IP;
 * 429) and the body (413 / 400 through the error handler). The payer's settle quota is not here: it
 * is asked once the signature is proven the payer's ({@link PayerQuota}, in the settle handler).
 * A settlement status lookup (`status`) passes the API key and a quota of verify's size. The public
 * reads (`public`: the healthcheck, `supported`, the dashboard's API) pass a per-IP quota kept in
 * memory, generous enough for monitors, so that no one client can make them its flood.
 */
export function edgeGuards(options: EdgeGuardsOptions): Record<EdgeRoute | "status" | "public", RequestHandler[]> {
  const { rateLimits, apiKeys, stores } = options;
  const keyed = apiKeys.length > 0;
  const { stages } = options;
  const jsonOptions = { limit: options.bodyLimitBytes, type: "application/json", strict: false };
  const json = express.json(jsonOptions);
  const closed = options.closedFor ? [closedQuota(options.closedFor)] : [];
  const guards = (route: EdgeRoute): RequestHandler[] => {
    const field = route === "verify" ? "verifyPerMinute" : "settlePerMinute";
    const keyDefault = route === "verify" ? rateLimits.keyVerifyPerMinute : rateLimits.keySettlePerMinute;
    const limitOfKey = (key: ApiKeyConfig | undefined) => key?.[field] ?? keyDefault;
    const client = perMinuteLimit({
      name: route,
      limit: !keyed ? rateLimits[field] : apiKeys.some((key) => limitOfKey(key) > 0) ? (req: Request) => limitOfKey(apiKeyOf(req)) : 0,
      ...(keyed ? { key: (req: Request) => `key:${apiKeyOf(req)!.id}` } : {}),
      store: stores?.[route],
      logger: options.logger,
      onLimited: () => options.onRateLimited?.(route, keyed ? "key" : "ip"),
    });
    const contentType = requireJsonBody((res, text) => options.onRefused(route, res, text));
    if (route === "verify" && stages) {
      return [
        ...(keyed ? [timed(stages, "edge", requireApiKey(apiKeys, (res, text) => options.onRefused(route, res, text)))] : []),
        timed(stages, "edge", contentType),
        ...closed,
        ...(client ? [timed(stages, "rateLimit", client)] : []),
        timedJson(stages, jsonOptions),
      ];
    }
    return [...(keyed ? [requireApiKey(apiKeys, (res, text) => options.onRefused(route, res, text))] : []), contentType, ...closed, ...(client ? [client] : []), json];
  };
  // The settlement status lookups: the API key when keys are configured, and verify's quota, counted apart.
  const lookup = (): RequestHandler[] => {
    const limitOfKey = (key: ApiKeyConfig | undefined) => key?.verifyPerMinute ?? rateLimits.keyVerifyPerMinute;
    const client = perMinuteLimit({
      name: "status",
      limit: !keyed ? rateLimits.verifyPerMinute : apiKeys.some((key) => limitOfKey(key) > 0) ? (req: Request) => limitOfKey(apiKeyOf(req)) : 0,
      ...(keyed ? { key: (req: Request) => `key:${apiKeyOf(req)!.id}` } : {}),
      store: stores?.status,
      logger: options.logger,
      onLimited: () => options.onRateLimited?.("status", keyed ? "key" : "ip"),
    });
    return [...(keyed ? [requireApiKey(apiKeys, () => {})] : []), ...closed, ...(client ? [client] : [])];
  };
  const publicReads = perMinuteLimit({
    name: "public",
    limit: rateLimits.publicPerMinute,
    logger: options.logger,
    onLimited: () => options.onRateLimited?.("public", "ip"),
  });
  return { verify: guards("verify"), settle: guards("settle"), status: lookup(), public: publicReads ? [publicReads] : [] };
}

/** Answers 429 with `Retry-After` while `closedFor` gives seconds: the limiters' answer, for a quota held at zero. */
export function closedQuota(closedFor: () => number | undefined): RequestHandler {
  return (_req, res, next) => {
    const seconds = closedFor();
    if (seconds === undefined) return next();
    const retryAfter = Math.max(1, Math.ceil(seconds));
    res.set("Retry-After", String(retryAfter));
    res.status(429).json({ error: RequestError.tooManyRequests, retryAfter });
  };
}

/**
 * `handler` timed as `stage` from its call until it hands on (or returns, if it answers itself). A
 * limiter on a shared store awaits the database meanwhile: its stage then holds what else ran.
 */
function timed(stages: RequestClock, stage: VerifyStage, handler: RequestHandler): RequestHandler {
  return (req, res, next) => {
    const since = stages.start();
    let open = true;
    const stop = () => {
      if (open) stages.stop(stage, since);
      open = false;
    };
    void handler(req, res, (error?: unknown) => {
      stop();
      next(error);
    });
    if (res.headersSent) stop();
  };
}

const PARSE_STARTED = Symbol("body parse started");

/**
 * The JSON middleware timed as `bodyParse`: its set-up when called, then (the body read) from its `verify`
 * hook, which runs just before `JSON.parse`, until it hands on; the chunks' arrival between is not counted.
 */
function timedJson(stages: RequestClock, options: { limit: number; type: string; strict: boolean }): RequestHandler {
  const json = express.json({
    ...options,
    verify: (req) => {
      (req as Request & { [PARSE_STARTED]?: number })[PARSE_STARTED] = stages.start();
    },
  });
  return (req, res, next) => {
    const since = stages.start();
    let calling = true;
    void json(req, res, (error?: unknown) => {
      const started = (req as Request & { [PARSE_STARTED]?: number })[PARSE_STARTED];
      if (calling) stages.stop("bodyParse", since);
      else if (started !== undefined) stages.stop("bodyParse", started);
      calling = false;
      next(error);
    });
    if (calling) stages.stop("bodyParse", since);
    calling = false;
  };
}
