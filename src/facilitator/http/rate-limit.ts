import { rateLimit, type RateLimitInfo, type Store } from "express-rate-limit";
import type { Request, RequestHandler } from "express";
import { RequestError } from "../../protocol/reasons.js";

/** Options of {@link perMinuteLimit}. */
export interface PerMinuteLimitOptions {
  /** Policy name in the `RateLimit` header ("verify", "settle"). */
  name: string;
  /** Requests per minute per client IP; 0 switches the limit off. */
  limit: number;
  /** Shared store for several instances; default in-memory. */
  store?: Store;
  onLimited?: (name: string) => void;
}

/**
 * A per-client-IP limit over a one-minute window. The client IP is `req.ip`, i.e. the socket
 * address unless Express's `trust proxy` names the proxies in front, so a forged
 * `X-Forwarded-For` buys no fresh quota. Answers 429 `{"error":"Too many requests","retryAfter":s}`
 * with `Retry-After` and the standard `RateLimit` / `RateLimit-Policy` headers.
 */
export function perMinuteLimit(options: PerMinuteLimitOptions): RequestHandler | undefined {
  if (options.limit === 0) return undefined;
  return rateLimit({
    windowMs: 60_000,
    limit: options.limit,
    standardHeaders: "draft-8",
    legacyHeaders: false,
    identifier: options.name,
    ...(options.store ? { store: options.store } : {}),
    // We read X-Forwarded-For only through `trust proxy`; its presence is expected, not a misconfiguration.
    validate: { xForwardedForHeader: false, trustProxy: false },
    handler(req, res) {
      const info = (req as Request & { rateLimit?: RateLimitInfo }).rateLimit;
      const resetTime = info?.resetTime?.getTime() ?? Date.now() + 60_000;
      const retryAfter = Math.max(1, Math.ceil((resetTime - Date.now()) / 1000));
      options.onLimited?.(options.name);
      res.set("Retry-After", String(retryAfter));
      res.status(429).json({ error: RequestError.tooManyRequests, retryAfter });
    },
  });
}
