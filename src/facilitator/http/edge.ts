import express, { type Request, type RequestHandler, type Response } from "express";
import { decodePaymentHeader } from "../../protocol/header.js";
import type { ApiKeyConfig, RateLimitsConfig } from "../config.js";
import type { Logger } from "../logger.js";
import { apiKeyOf, requireApiKey } from "./api-keys.js";
import { requireJsonBody } from "./content-type.js";
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
  onRateLimited?(route: EdgeRoute | "status", by: QuotaHolder): void;
}

/**
 * What a verify or settle request passes before its handler, in order: the API key (401), a JSON
 * content type (415), the client's quota (per API key when keys are configured, else per client IP;
 * 429), the body (413 / 400 through the error handler), and for settle the payer's quota (429).
 * A settlement status lookup (`status`) passes the API key and a quota of verify's size.
 */
export function edgeGuards(options: EdgeGuardsOptions): Record<EdgeRoute | "status", RequestHandler[]> {
  const { rateLimits, apiKeys, stores } = options;
  const keyed = apiKeys.length > 0;
  const json = express.json({ limit: options.bodyLimitBytes, type: "application/json", strict: false });
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
    const payer =
      route === "settle"
        ? perMinuteLimit({
            name: "settlePayer",
            limit: rateLimits.payerSettlePerMinute,
            key: (req) => {
              const address = payerOf(req.body);
              return address === undefined ? undefined : `payer:${address}`;
            },
            store: stores?.settlePayer,
            logger: options.logger,
            onLimited: () => options.onRateLimited?.(route, "payer"),
          })
        : undefined;
    return [
      ...(keyed ? [requireApiKey(apiKeys, (res, text) => options.onRefused(route, res, text))] : []),
      requireJsonBody((res, text) => options.onRefused(route, res, text)),
      ...(client ? [client] : []),
      json,
      ...(payer ? [payer] : []),
    ];
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
    return [...(keyed ? [requireApiKey(apiKeys, () => {})] : []), ...(client ? [client] : [])];
  };
  return { verify: guards("verify"), settle: guards("settle"), status: lookup() };
}

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/**
 * The payer address of a verify/settle body, lower-case, in either dialect: the Cronos `paymentHeader`
 * (either header layout) or an x402 v2 `paymentPayload`. `undefined` when there is none to read (the
 * endpoint then refuses the body itself).
 */
export function payerOf(body: unknown): string | undefined {
  if (body === null || typeof body !== "object") return undefined;
  const { paymentHeader, paymentPayload } = body as { paymentHeader?: unknown; paymentPayload?: unknown };
  let from: unknown;
  if (typeof paymentHeader === "string") {
    const decoded = decodePaymentHeader(paymentHeader);
    from = decoded.ok ? decoded.payload.authorization.from : undefined;
  } else if (paymentPayload !== null && typeof paymentPayload === "object") {
    from = (paymentPayload as { payload?: { authorization?: { from?: unknown } } }).payload?.authorization?.from;
  }
  return typeof from === "string" && ADDRESS.test(from) ? from.toLowerCase() : undefined;
}
