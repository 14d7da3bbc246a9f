import { rateLimit, type RateLimitInfo, type Store } from "express-rate-limit";
import type { Request, RequestHandler } from "express";
import { RequestError } from "../../protocol/reasons.js";
import type { Logger } from "../logger.js";

/** The facilitator's limiters: per client IP (or per API key when keys are configured), per payer, the status lookups' and the public reads'. */
export type LimiterName = "verify" | "settle" | "settlePayer" | "status" | "public";

/**
 * One express-rate-limit `Store` per limiter, to share counts between instances (e.g. in PostgreSQL);
 * default in-memory. The library refuses one store instance for two limiters: give each its own.
 */
export type RateLimitStores = Partial<Record<LimiterName, Store>>;

/** Options of {@link perMinuteLimit}. */
export interface PerMinuteLimitOptions {
  /** Which limiter; its policy name in the `RateLimit` headers is {@link POLICY_NAMES}. */
  name: LimiterName;
  /** Requests per minute per key; 0 = no limit for that request. A function: per request (per API key). */
  limit: number | ((req: Request) => number);
  /**
   * Whose quota a request counts against; default the client IP (`req.ip`, i.e. the socket address
   * unless `trust proxy` names the proxies in front). `undefined` = the request is not counted here.
   */
  key?: (req: Request) => string | undefined;
  store?: Store;
  /** Receives what express-rate-limit reports about its configuration (its validations), instead of the console. */
  logger: Logger;
  onLimited?: () => void;
}

/** The policy names the `RateLimit` / `RateLimit-Policy` headers carry. */
export const POLICY_NAMES: Record<LimiterName, string> = { verify: "verify", settle: "settle", settlePayer: "settle-payer", status: "status", public: "public" };

/**
 * A limit over a one-minute window. Answers 429 `{"error":"Too many requests","retryAfter":s}` with
 * `Retry-After` and the standard `RateLimit` / `RateLimit-Policy` headers. The library's own
 * validations stay on (e.g. an `X-Forwarded-For` seen while no proxy is trusted) and report to `logger`.
 */
export function perMinuteLimit(options: PerMinuteLimitOptions): RequestHandler | undefined {
  const { limit, key } = options;
  if (limit === 0) return undefined;
  const limitFor = typeof limit === "number" ? () => limit : limit;
  return rateLimit({
    windowMs: 60_000,
    limit: (req) => limitFor(req),
    // A limit of 0 means "no limit" here (express-rate-limit would refuse every request).
    skip: (req) => limitFor(req) === 0 || (key !== undefined && key(req) === undefined),
    ...(key ? { keyGenerator: (req: Request) => key(req)! } : {}),
    standardHeaders: "draft-8",
    legacyHeaders: false,
    identifier: POLICY_NAMES[options.name],
    // A shared store (the database) that fails lets requests through: an outage must not take verify down.
    ...(options.store ? { store: options.store, passOnStoreError: true } : {}),
    logger: {
      warn: (report: unknown) => options.logger.warn(...libraryReport(options.name, report)),
      error: (report: unknown) => options.logger.error(...libraryReport(options.name, report)),
    },
    handler(req, res) {
      const info = (req as Request & { rateLimit?: RateLimitInfo }).rateLimit;
      const resetTime = info?.resetTime?.getTime() ?? Date.now() + 60_000;
      const retryAfter = Math.max(1, Math.ceil((resetTime - Date.now()) / 1000));
      options.onLimited?.();
      res.set("Retry-After", String(retryAfter));
      res.status(429).json({ error: RequestError.tooManyRequests, retryAfter });
    },
  });
}

/** A report of express-rate-limit (a `ValidationError` with a code) as a log line's fields and message. */
function libraryReport(limiter: LimiterName, report: unknown): [object, string] {
  const code = (report as { code?: unknown } | null)?.code;
  const message = report instanceof Error ? report.message : String(report);
  return [{ limiter, ...(typeof code === "string" ? { code } : {}) }, `express-rate-limit: ${message}`];
}
