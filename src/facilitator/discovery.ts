import express, { type RequestHandler, type Router } from "express";
import { z } from "zod";
import type { DiscoveryEntry, Ledger } from "../ledger/types.js";
import { RequestError } from "../protocol/reasons.js";
import { describeZodError } from "../protocol/schemas.js";
import { X402_V2_VERSION } from "../protocol/x402v2.js";
import { BAZAAR, isValidBazaarDeclaration, isValidRouteTemplate } from "../protocol/bazaar.js";

/** The x402 `bazaar` extension (resource discovery): its key in a payment's `extensions`. */
export { BAZAAR };

/** A declaration larger than this is not cataloged (the catalog is not a store for anyone's blobs). */
const MAX_DECLARATION_BYTES = 16 * 1024;

/** The schema `@x402/extensions` gives a v1 (Cronos-dialect) declaration it catalogs: input and output are objects. */
const V1_DECLARATION_SCHEMA = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: { input: { type: "object" }, output: { type: "object" } },
  required: ["input"],
};

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** The http(s) URL a payment names, or undefined. */
function httpUrl(text: string): URL | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  return url.protocol === "http:" || url.protocol === "https:" ? url : undefined;
}

/**
 * The catalog entry an x402 v2 verify/settle body describes: its `paymentPayload.resource` (an http(s)
 * URL, cataloged by origin and path, or by origin and the declaration's `routeTemplate` when that is a
 * valid one, as `@x402/extensions` does) with a `bazaar` declaration in `paymentPayload.extensions` that
 * the package would accept ({@link isValidBazaarDeclaration}) and of at most 16 KiB. Undefined otherwise:
 * a payment without a declaration, or with one that is not valid, is paid as usual and not cataloged.
 */
export function discoveryEntryOf(body: unknown, now: Date = new Date()): DiscoveryEntry | undefined {
  if (isObject(body) && body.x402Version === 1) return cronosEntryOf(body, now);
  if (!isObject(body) || !isObject(body.paymentPayload) || !isObject(body.paymentRequirements)) return undefined;
  const { paymentPayload, paymentRequirements } = body;
  const extensions = paymentPayload.extensions;
  const resource = paymentPayload.resource;
  if (!isObject(extensions) || !isObject(resource) || typeof resource.url !== "string") return undefined;
  const declaration = extensions[BAZAAR];
  // The size first: the schema check compiles what the payer sent.
  if (declaration === undefined || (JSON.stringify(declaration)?.length ?? 0) > MAX_DECLARATION_BYTES) return undefined;
  if (!isValidBazaarDeclaration(declaration)) return undefined;
  const url = httpUrl(resource.url);
  if (!url) return undefined;
  const path = isValidRouteTemplate(declaration.routeTemplate) ? declaration.routeTemplate : url.pathname;
  return {
    resource: `${url.origin}${path}`,
    type: declaration.info.input.type,
    x402Version: X402_V2_VERSION,
    accepts: [paymentRequirements],
    lastUpdated: now.toISOString(),
    ...(typeof resource.description === "string" ? { description: resource.description } : {}),
    ...(typeof resource.mimeType === "string" ? { mimeType: resource.mimeType } : {}),
    extensions: { [BAZAAR]: declaration },
  };
}

/**
 * The Cronos dialect (x402 v1): requirements with a `resource` and `outputSchema.input.discoverable: true`
 * (what the kit's `requirePayment({discovery})` sends), cataloged in the same shape as a v2 entry, with the
 * schema `@x402/extensions` gives a v1 declaration.
 */
function cronosEntryOf(body: Record<string, unknown>, now: Date): DiscoveryEntry | undefined {
  const requirements = body.paymentRequirements;
  if (!isObject(requirements) || typeof requirements.resource !== "string" || !isObject(requirements.outputSchema)) return undefined;
  const { input, output } = requirements.outputSchema;
  if (!isObject(input) || input.discoverable !== true || (input.type !== undefined && input.type !== "http")) return undefined;
  if (output !== undefined && !isObject(output)) return undefined;
  const { discoverable: _discoverable, ...declared } = input;
  // v1 names the method in any case (the package upper-cases it there); v2's rules take it upper case.
  if (typeof declared.method === "string") declared.method = declared.method.toUpperCase();
  const declaration = { info: { input: { ...declared, type: "http" }, ...(output ? { output } : {}) }, schema: V1_DECLARATION_SCHEMA };
  if (JSON.stringify(declaration).length > MAX_DECLARATION_BYTES || !isValidBazaarDeclaration(declaration)) return undefined;
  const url = httpUrl(requirements.resource);
  if (!url) return undefined;
  return {
    resource: `${url.origin}${url.pathname}`,
    type: "http",
    x402Version: 1,
    accepts: [requirements],
    lastUpdated: now.toISOString(),
    ...(typeof requirements.description === "string" ? { description: requirements.description } : {}),
    ...(typeof requirements.mimeType === "string" ? { mimeType: requirements.mimeType } : {}),
    extensions: { [BAZAAR]: declaration },
  };
}

/** The words of a text, lower case, for search: runs of letters and digits. */
function words(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** Fields of a declaration's `info` that say how to call it (every entry has them), not what it is. */
const STRUCTURAL_INPUT = new Set(["type", "method", "bodyType", "transport", "inputSchema", "discoverable"]);

/** The values (never the keys) of a JSON value, as text. */
function valuesOf(value: unknown, out: string[] = []): string[] {
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") out.push(String(value));
  else if (Array.isArray(value)) for (const item of value) valuesOf(item, out);
  else if (isObject(value)) for (const item of Object.values(value)) valuesOf(item, out);
  return out;
}

/**
 * What search reads of an entry: its description, its URL's host and path, and the values of its
 * declaration's `info` (example inputs and outputs, a tool's name and description), but no JSON key and
 * none of the fields every entry has (`type: "http"`, the method, `output.type: "json"`, schemas), which
 * would match every entry.
 */
function searchText(entry: DiscoveryEntry): string {
  const info = (entry.extensions?.[BAZAAR] as { info?: unknown } | undefined)?.info;
  const parts = [entry.description ?? ""];
  try {
    const url = new URL(entry.resource);
    parts.push(url.host, decodeURIComponent(url.pathname));
  } catch {
    parts.push(entry.resource);
  }
  if (isObject(info)) {
    const { input, output, ...rest } = info;
    if (isObject(input)) valuesOf(Object.fromEntries(Object.entries(input).filter(([key]) => !STRUCTURAL_INPUT.has(key))), parts);
    if (isObject(output)) valuesOf(Object.fromEntries(Object.entries(output).filter(([key]) => key !== "type")), parts);
    valuesOf(rest, parts);
  }
  return parts.join(" ");
}

/**
 * How well an entry matches the query's words: each query word found among the words of its
 * description, URL and declared values ({@link searchText}) counts once (whole words, case-insensitive).
 */
export function searchScore(entry: DiscoveryEntry, query: readonly string[]): number {
  const haystack = new Set(words(searchText(entry)));
  return query.filter((word) => haystack.has(word)).length;
}

const optionalText = z.string().trim().min(1, { error: "must not be empty" }).max(256, { error: "must be at most 256 characters" }).optional();
const wholeNumber = z.string().regex(/^\d{1,9}$/, { error: "must be a whole number" }).transform(Number);
const count = (max: number) =>
  wholeNumber.refine((n) => n <= max, { error: `must be at most ${max}` }).optional();
const filterSchema = { type: optionalText, payTo: optionalText, scheme: optionalText, network: optionalText, extensions: optionalText };
const listSchema = z.object({ ...filterSchema, limit: count(1_000), offset: count(1_000_000) });
/** Search's `limit` is advisory (`@x402/extensions` says a server may return fewer): more than 100 asks for 100. */
const MAX_SEARCH_LIMIT = 100;
const searchSchema = z.object({
  ...filterSchema,
  query: z.string({ error: "is required" }).trim().min(1, { error: "must not be empty" }).max(512),
  limit: wholeNumber.transform((n) => Math.min(n, MAX_SEARCH_LIMIT)).optional(),
  cursor: count(1_000_000),
});

/** Options of {@link discoveryRoutes}. */
export interface DiscoveryRoutesOptions {
  ledger: Pick<Ledger, "discoveryResources">;
  /** What the lookups pass first: the API key when keys are configured, and a quota. */
  guards: RequestHandler[];
}

/**
 * `GET /v2/x402/discovery/resources` (filters `type`, `payTo`, `scheme`, `network`, `extensions`;
 * `limit` (default 100), `offset`) answering `{x402Version: 2, items, pagination: {limit, offset, total}}`,
 * and `GET /v2/x402/discovery/search?query=…` (the same filters; `limit` (default 20, at most 100: more asks
 * for 100), `cursor`) answering `{x402Version: 2, resources, partialResults?, pagination: {limit, cursor}}`:
 * entries matching more of the query's words first, then the most recently paid; `partialResults: true` when
 * the catalog held more entries than one search looks at. `network` takes either form (`eip155:338`,
 * `cronos-testnet`). Where `@x402/extensions`' `withBazaar` looks, under the v2 base path.
 */
export function discoveryRoutes(options: DiscoveryRoutesOptions): Router {
  const router = express.Router();
  const matching = async (query: z.infer<typeof listSchema>) => {
    const found = await options.ledger.discoveryResources({ type: query.type, payTo: query.payTo, scheme: query.scheme, network: query.network });
    const entries = query.extensions === undefined ? found.entries : found.entries.filter((entry) => entry.extensions?.[query.extensions!] !== undefined);
    return { entries, truncated: found.truncated };
  };

  router.get("/v2/x402/discovery/resources", ...options.guards, async (req, res) => {
    const parsed = listSchema.safeParse(req.query);
    if (!parsed.success) {
      res.status(400).json({ error: RequestError.invalidRequest(describeZodError(parsed.error)) });
      return;
    }
    const limit = parsed.data.limit ?? 100;
    const offset = parsed.data.offset ?? 0;
    const { entries } = await matching(parsed.data);
    res.set("Cache-Control", "no-store").json({ x402Version: X402_V2_VERSION, items: entries.slice(offset, offset + limit), pagination: { limit, offset, total: entries.length } });
  });

  router.get("/v2/x402/discovery/search", ...options.guards, async (req, res) => {
    const parsed = searchSchema.safeParse(req.query);
    if (!parsed.success) {
      res.status(400).json({ error: RequestError.invalidRequest(describeZodError(parsed.error)) });
      return;
    }
    const limit = parsed.data.limit ?? 20;
    const start = parsed.data.cursor ?? 0;
    const query = [...new Set(words(parsed.data.query))];
    const { entries, truncated } = await matching(parsed.data);
    const ranked = entries
      .map((entry, order) => ({ entry, order, score: searchScore(entry, query) }))
      .filter((hit) => hit.score > 0)
      // More of the query's words first; among equals, the most recently paid (the ledger's order).
      .sort((a, b) => b.score - a.score || a.order - b.order);
    const page = ranked.slice(start, start + limit).map((hit) => hit.entry);
    const next = start + limit < ranked.length ? String(start + limit) : null;
    // partialResults: the catalog holds more entries than one search looks at; some matches may be missing.
    res.set("Cache-Control", "no-store").json({ x402Version: X402_V2_VERSION, resources: page, ...(truncated ? { partialResults: true } : {}), pagination: { limit, cursor: next } });
  });
  return router;
}
