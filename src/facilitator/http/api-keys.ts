import { createHash } from "node:crypto";
import type { Request, RequestHandler, Response } from "express";
import { RequestError } from "../../protocol/reasons.js";
import type { ApiKeyConfig } from "../config/index.js";

const BEARER = /^Bearer[ \t]+([^\s]+)[ \t]*$/i;
const REALM = 'Bearer realm="x402-facilitator"';

/**
 * Requires `Authorization: Bearer <key>` with one of `keys` (compared by SHA-256, so a lookup reveals
 * nothing about the keys through its timing). A missing or unknown key is answered 401 JSON with a
 * `WWW-Authenticate` challenge (RFC 6750) before the body is read; the key is never echoed.
 * The key found is left in `res.locals.apiKey` for the per-key limits and the logs (its id only).
 */
export function requireApiKey(keys: readonly ApiKeyConfig[], onRefused: (res: Response, text: string) => void): RequestHandler {
  const keyOf = apiKeyReader(keys);
  return (req, res, next) => {
    const key = keyOf(req);
    if (key) {
      res.locals.apiKey = key;
      next();
      return;
    }
    onRefused(res, refuseApiKey(req, res));
  };
}

/** Reads the `Authorization: Bearer` key of a request: the configured key it is, else undefined (none, or not one of `keys`). */
export function apiKeyReader(keys: readonly ApiKeyConfig[]): (req: Request) => ApiKeyConfig | undefined {
  const byHash = new Map(keys.map((key) => [key.sha256, key]));
  return (req) => {
    const header = req.get("Authorization");
    const token = header === undefined ? undefined : BEARER.exec(header)?.[1];
    return token === undefined ? undefined : byHash.get(createHash("sha256").update(token).digest("hex"));
  };
}

/** Answers 401 JSON with the `WWW-Authenticate` challenge for a request without a valid key; returns the text answered. */
export function refuseApiKey(req: Request, res: Response): string {
  const header = req.get("Authorization");
  const text = header === undefined ? RequestError.missingApiKey : RequestError.unknownApiKey;
  res.set("WWW-Authenticate", header === undefined ? REALM : `${REALM}, error="invalid_token"`);
  res.status(401).json({ error: text });
  return text;
}

/** The API key {@link requireApiKey} accepted for this request, if any. */
export function apiKeyOf(req: Request): ApiKeyConfig | undefined {
  return req.res?.locals.apiKey as ApiKeyConfig | undefined;
}
