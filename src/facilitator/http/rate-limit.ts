import { MemoryStore, rateLimit, type IncrementResponse, type Options, type RateLimitInfo, type Store } from "express-rate-limit";
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

/** Why a shared store's count was not used: it did not answer within the wait (`slow`) or failed (`error`). */
export type StoreFallback = "slow" | "error";

/** Options of {@link BoundedStore}. */
export interface BoundedStoreOptions {
  /** How long a request may wait for the shared count (`RATE_LIMIT_STORE_WAIT_MS`). */
  waitMs: number;
  /** Told each time this instance's own count was used instead (metrics, logs). */
  onFallback?: (reason: StoreFallback) => void;
}

/**
 * A shared rate-limit store (the database's counters) that cannot hold an answer back: each hit is
 * also counted in this instance's memory, and when the shared store has not answered within `waitMs`
 * (a slow or frozen database) or fails, the request is judged by this instance's own count. The
 * shared hit still lands when the store answers later, so the service's count stays whole.
 */
export class BoundedStore implements Store {
  readonly localKeys = false;
  readonly prefix?: string;
  readonly #shared: Store;
  readonly #local = new MemoryStore();
  readonly #o: BoundedStoreOptions;

  constructor(shared: Store, options: BoundedStoreOptions) {
    this.#shared = shared;
    this.#o = options;
    if (shared.prefix !== undefined) this.prefix = shared.prefix;
  }

  async init(options: Options): Promise<void> {
    this.#local.init(options);
    await this.#shared.init?.(options);
  }

  async increment(key: string): Promise<IncrementResponse> {
    const local = this.#local.increment(key);
    const shared = await this.#within(Promise.resolve().then(() => this.#shared.increment(key)));
    return shared ?? local;
  }

  async decrement(key: string): Promise<void> {
    this.#local.decrement(key);
    await this.#within(Promise.resolve().then(() => this.#shared.decrement(key)));
  }

  async resetKey(key: string): Promise<void> {
    this.#local.resetKey(key);
    await this.#within(Promise.resolve().then(() => this.#shared.resetKey(key)));
  }

  shutdown(): void {
    this.#local.shutdown();
    void this.#shared.shutdown?.();
  }

  /** The shared store's answer within the wait, else undefined (it goes on, its rejection caught). */
  async #within<T>(call: Promise<T>): Promise<T | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), this.#o.waitMs)));
    try {
      const answer = await Promise.race([call.then((value) => ({ value }), () => "error" as const), late]);
      if (typeof answer === "object") return answer.value;
      this.#o.onFallback?.(answer === "late" ? "slow" : "error");
      if (answer === "late") call.catch(() => undefined);
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Each given store wrapped in a {@link BoundedStore} (its own local counts per limiter). */
export function boundedStores(stores: RateLimitStores | undefined, waitMs: number, onFallback?: (limiter: LimiterName, reason: StoreFallback) => void): RateLimitStores | undefined {
  if (!stores) return undefined;
  return Object.fromEntries(
    Object.entries(stores).map(([name, store]) => [name, new BoundedStore(store, { waitMs, onFallback: (reason) => onFallback?.(name as LimiterName, reason) })]),
  ) as RateLimitStores;
}
