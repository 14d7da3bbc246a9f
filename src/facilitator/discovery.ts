import express, { type RequestHandler, type Response, type Router } from "express";
import type { Address } from "viem";
import { z } from "zod";
import {
  DISCOVERY_MAX_QUERY_WORDS,
  DISCOVERY_MAX_WORD_LENGTH,
  DISCOVERY_MAX_WORDS,
  type DiscoveryEntry,
  type DiscoveryFilter,
  type CatalogStore,
  type DiscoveryPayment,
  type LedgerLifecycle,
} from "../ledger/types.js";
import type { NetworkName } from "../protocol/networks.js";
import { EXACT_SCHEME, RequestError } from "../protocol/reasons.js";
import { describeZodError } from "../protocol/schemas.js";
import { caip2OfNetwork, X402_V2_VERSION } from "../protocol/x402v2.js";
import { BAZAAR, isValidBazaarDeclaration, isValidRouteTemplate, nestsWithin, SELLER_DECLARATION } from "../protocol/bazaar.js";

/** The x402 `bazaar` extension (resource discovery): its key in a payment's `extensions`. */
export { BAZAAR };

/** An entry (URL, description, requirements, declaration) larger than this is not cataloged. */
const MAX_ENTRY_BYTES = 24 * 1024;
/**
 * How deep a cataloged payment's body may nest (a declaration's JSON schema of a nested body fits easily).
 * Checked without recursion before anything walks the declaration: deeper is not cataloged.
 */
const MAX_BODY_DEPTH = 64;
/** A page of listing or search answers at most this much JSON (and at least one entry). */
export const MAX_PAGE_BYTES = 1024 * 1024;

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

/** What a payment declares for the catalog: its entry but for the facts of the payment itself. */
export interface DiscoveryListing {
  /** The resource's canonical URL (origin and path, or origin and a valid `routeTemplate`). */
  resource: string;
  type: string;
  x402Version: number;
  /** The payment requirements as the request carried them (the payment's own facts replace theirs). */
  requirements: Record<string, unknown>;
  description?: string;
  mimeType?: string;
  extensions: { [BAZAAR]: unknown };
}

/**
 * The listing a verify/settle body's **seller** declares, from its payment requirements only, never from the
 * buyer's payment (its `resource`, its echoed `extensions`: whatever a payer chose to write). x402 v2: the
 * requirements' `extra.resource` (an http(s) URL, cataloged by origin and path, or by origin and the
 * declaration's `routeTemplate` when that is a valid one, as `@x402/extensions` does) and `extra.bazaar`, a
 * declaration the kit takes ({@link isValidBazaarDeclaration}: fixed checks, at most 16 KiB, its schema never
 * run). The Cronos dialect (x402 v1): the requirements' `resource`, `description`, `mimeType` and
 * `outputSchema`. Undefined otherwise: a payment without a declaration, with one that is not valid, or nested
 * deeper than 64 levels, is paid as usual and not cataloged.
 */
export function discoveryListingOf(body: unknown): DiscoveryListing | undefined {
  // Before anything walks it: everything below recurses (JSON.stringify overflows near 5,000 levels).
  if (!nestsWithin(body, MAX_BODY_DEPTH)) return undefined;
  if (isObject(body) && body.x402Version === 1) return cronosListingOf(body);
  if (!isObject(body) || !isObject(body.paymentRequirements) || !isObject(body.paymentRequirements.extra)) return undefined;
  const { extra, ...terms } = body.paymentRequirements;
  const { [SELLER_DECLARATION.resource]: resource, [SELLER_DECLARATION.declaration]: declaration, ...domain } = extra;
  if (!isObject(resource) || typeof resource.url !== "string") return undefined;
  if (!isValidBazaarDeclaration(declaration)) return undefined;
  const url = httpUrl(resource.url);
  if (!url) return undefined;
  const path = isValidRouteTemplate(declaration.routeTemplate) ? declaration.routeTemplate : url.pathname;
  return {
    resource: `${url.origin}${path}`,
    type: declaration.info.input.type,
    x402Version: X402_V2_VERSION,
    // The way of paying without the listing's own facts (they are the entry's, not a way to pay).
    requirements: { ...terms, extra: domain },
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
function cronosListingOf(body: Record<string, unknown>): DiscoveryListing | undefined {
  const requirements = body.paymentRequirements;
  if (!isObject(requirements) || typeof requirements.resource !== "string" || !isObject(requirements.outputSchema)) return undefined;
  const { input, output } = requirements.outputSchema;
  if (!isObject(input) || input.discoverable !== true || (input.type !== undefined && input.type !== "http")) return undefined;
  if (output !== undefined && !isObject(output)) return undefined;
  const { discoverable: _discoverable, ...declared } = input;
  // v1 names the method in any case (the package upper-cases it there); v2's rules take it upper case.
  if (typeof declared.method === "string") declared.method = declared.method.toUpperCase();
  const declaration = { info: { input: { ...declared, type: "http" }, ...(output ? { output } : {}) }, schema: V1_DECLARATION_SCHEMA };
  if (!isValidBazaarDeclaration(declaration)) return undefined;
  const url = httpUrl(requirements.resource);
  if (!url) return undefined;
  return {
    resource: `${url.origin}${url.pathname}`,
    type: "http",
    x402Version: 1,
    requirements,
    ...(typeof requirements.description === "string" ? { description: requirements.description } : {}),
    ...(typeof requirements.mimeType === "string" ? { mimeType: requirements.mimeType } : {}),
    extensions: { [BAZAAR]: declaration },
  };
}

/** The facts of a settled payment, from its settlement (the receipt's transfer), never from the request. */
export interface SettledFacts {
  /** The network it was settled on. */
  network: NetworkName;
  /** The token that moved (the network's configured token). */
  asset: Address;
  /** The transfer's sender. */
  payer: Address;
  /** The transfer's recipient: the entry's owner. */
  payTo: Address;
  value: bigint;
  /** The block's time, ISO 8601. */
  paidAt: string;
}

/**
 * The catalog entry a settled payment makes: the listing its body's seller declares ({@link discoveryListingOf}) with
 * the way it paid built from `paid` (payTo, amount, asset and network are the settlement's, whatever the
 * request said) and the block's time. Undefined for no listing, for a payment from its payTo to itself (it
 * shows nobody paying for the resource), and for an entry over 24 KiB.
 */
export function catalogPaymentOf(body: unknown, paid: SettledFacts): DiscoveryPayment | undefined {
  if (paid.payer.toLowerCase() === paid.payTo.toLowerCase()) return undefined;
  const listing = discoveryListingOf(body);
  if (!listing) return undefined;
  const { requirements, ...rest } = listing;
  const way =
    listing.x402Version === 1
      ? { ...requirements, network: paid.network, payTo: paid.payTo, asset: paid.asset, maxAmountRequired: paid.value.toString() }
      : { ...requirements, network: caip2OfNetwork(paid.network) ?? paid.network, payTo: paid.payTo, asset: paid.asset, amount: paid.value.toString() };
  const entry: DiscoveryEntry = { ...rest, accepts: [way], lastUpdated: paid.paidAt };
  if (JSON.stringify(entry).length > MAX_ENTRY_BYTES) return undefined;
  return { entry, payTo: paid.payTo, payer: paid.payer, words: searchWordsOf(entry) };
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
 * The words search finds an entry by: the distinct words of its description, its URL's host and path and
 * its declared values ({@link searchText}), in that order, at most {@link DISCOVERY_MAX_WORDS} of them, none
 * longer than {@link DISCOVERY_MAX_WORD_LENGTH} characters.
 */
export function searchWordsOf(entry: DiscoveryEntry): string[] {
  const found = new Set<string>();
  for (const word of words(searchText(entry))) {
    if (found.size === DISCOVERY_MAX_WORDS) break;
    if (word.length <= DISCOVERY_MAX_WORD_LENGTH) found.add(word);
  }
  return [...found];
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
  query: z
    .string({ error: "is required" })
    .trim()
    .min(1, { error: "must not be empty" })
    .max(512)
    .transform((text) => [...new Set(words(text))])
    .refine((found) => found.length <= DISCOVERY_MAX_QUERY_WORDS, { error: `must have at most ${DISCOVERY_MAX_QUERY_WORDS} distinct words` }),
  limit: wholeNumber.transform((n) => Math.min(n, MAX_SEARCH_LIMIT)).optional(),
  cursor: count(1_000_000),
});

/** Options of {@link discoveryRoutes}. */
export interface DiscoveryRoutesOptions {
  ledger: Pick<CatalogStore, "listDiscoveryResources" | "searchDiscoveryResources"> & { backend?: LedgerLifecycle["backend"] };
  /** What the lookups pass first: the API key when keys are configured, and a quota. */
  guards: RequestHandler[];
}

/**
 * The ledger's filter of a query's filters, or undefined for filters no entry can match. Every entry is a
 * settled payment, so it pays by `exact` (the only scheme settled) and carries the `bazaar` extension (only
 * it): those two filters select all entries or none, and are never asked of the ledger.
 */
function filterOf(query: { type?: string; payTo?: string; scheme?: string; network?: string; extensions?: string }): DiscoveryFilter | undefined {
  if ((query.scheme !== undefined && query.scheme !== EXACT_SCHEME) || (query.extensions !== undefined && query.extensions !== BAZAAR)) return undefined;
  return {
    ...(query.type !== undefined ? { type: query.type } : {}),
    ...(query.payTo !== undefined ? { payTo: query.payTo } : {}),
    ...(query.network !== undefined ? { network: query.network } : {}),
  };
}

/**
 * Catalog reads one instance runs at once: the rest wait their turn, so reads never crowd out verify and settle.
 * The embedded ledger reads on the event loop (one at a time is all it can do); PostgreSQL reads off it, on
 * 4 of the pool's connections at most.
 */
const READS_AT_ONCE = { sqlite: 1, postgres: 4 } as const;
/** Catalog reads that may wait; one more is answered 503 at once (a flood holds no memory). */
const READS_WAITING = 32;

/** Runs tasks at most `running` at once, with at most `waiting` queued; `undefined` when the queue is full. */
class Gate {
  #active = 0;
  readonly #queue: Array<() => void> = [];
  constructor(
    readonly running: number,
    readonly waiting: number,
  ) {}

  async run<T>(task: () => Promise<T>): Promise<T | undefined> {
    if (this.#active >= this.running) {
      if (this.#queue.length >= this.waiting) return undefined;
      await new Promise<void>((resolve) => this.#queue.push(resolve));
    } else {
      this.#active++;
    }
    try {
      return await task();
    } finally {
      // The turn passes to the next waiter (the count stays) after a turn of the event loop, so requests
      // that arrived meanwhile (a /supported, a verify) are served between two reads; or frees a place.
      const next = this.#queue.shift();
      if (next) setImmediate(next);
      else this.#active--;
    }
  }
}

/**
 * Sends a JSON answer whose `key` holds entries kept as JSON text, as they are: a page of up to a megabyte is
 * never parsed and serialized again on the event loop.
 */
function sendPage(res: Response, head: Record<string, unknown>, key: string, items: readonly string[], tail: Record<string, unknown>): void {
  const open = JSON.stringify(head).slice(0, -1);
  const close = JSON.stringify(tail).slice(1);
  res.set("Cache-Control", "no-store").type("application/json").send(`${open},${JSON.stringify(key)}:[${items.join(",")}],${close}`);
}

/**
 * `GET /v2/x402/discovery/resources` (filters `type`, `payTo`, `scheme`, `network`, `extensions`;
 * `limit` (default 100), `offset`) answering `{x402Version: 2, items, pagination: {limit, offset, total}}`,
 * and `GET /v2/x402/discovery/search?query=…` (the same filters; `limit` (default 20, at most 100: more asks
 * for 100), `cursor`) answering `{x402Version: 2, resources, partialResults?, pagination: {limit, cursor}}`:
 * entries matching more of the query's words first, then those more distinct payers paid, then the most
 * recently paid; `partialResults: true` when a word matched more entries than one search reads. `network`
 * takes either form (`eip155:338`, `cronos-testnet`). A page holds at most {@link MAX_PAGE_BYTES} of entries:
 * a listing page cut short says so in its `pagination.limit` (the next page starts at `offset + limit`), a
 * search page in its `cursor`. Where `@x402/extensions`' `withBazaar` looks, under the v2 base path.
 */
export function discoveryRoutes(options: DiscoveryRoutesOptions): Router {
  const router = express.Router();
  const gate = new Gate(READS_AT_ONCE[options.ledger.backend ?? "sqlite"], READS_WAITING);
  /** The read in its turn; a 503 when too many wait already. */
  const read = async <T>(res: Response, task: () => Promise<T>): Promise<T | undefined> => {
    const result = await gate.run(task);
    if (result === undefined) res.status(503).set("Retry-After", "1").json({ error: `${RequestError.unavailable}: too many catalog reads at once`, retryAfter: 1 });
    return result;
  };

  router.get("/v2/x402/discovery/resources", ...options.guards, async (req, res) => {
    const parsed = listSchema.safeParse(req.query);
    if (!parsed.success) {
      res.status(400).json({ error: RequestError.invalidRequest(describeZodError(parsed.error)) });
      return;
    }
    const limit = parsed.data.limit ?? 100;
    const offset = parsed.data.offset ?? 0;
    const head = { x402Version: X402_V2_VERSION };
    const filter = filterOf(parsed.data);
    if (!filter) {
      sendPage(res, head, "items", [], { pagination: { limit, offset, total: 0 } });
      return;
    }
    const page = await read(res, () => options.ledger.listDiscoveryResources({ filter, limit, offset, maxBytes: MAX_PAGE_BYTES }));
    if (!page) return;
    // Cut short by its size: the limit it was served with, so `offset + limit` is where the next page starts.
    const served = page.items.length < limit && offset + page.items.length < page.total ? page.items.length : limit;
    sendPage(res, head, "items", page.items, { pagination: { limit: served, offset, total: page.total } });
  });

  router.get("/v2/x402/discovery/search", ...options.guards, async (req, res) => {
    const parsed = searchSchema.safeParse(req.query);
    if (!parsed.success) {
      res.status(400).json({ error: RequestError.invalidRequest(describeZodError(parsed.error)) });
      return;
    }
    const limit = parsed.data.limit ?? 20;
    const start = parsed.data.cursor ?? 0;
    const head = { x402Version: X402_V2_VERSION };
    const filter = filterOf(parsed.data);
    if (!filter) {
      sendPage(res, head, "resources", [], { pagination: { limit, cursor: null } });
      return;
    }
    const found = await read(res, () => options.ledger.searchDiscoveryResources({ words: parsed.data.query, filter, limit, offset: start, maxBytes: MAX_PAGE_BYTES }));
    if (!found) return;
    const next = found.more ? String(start + found.items.length) : null;
    // partialResults: a word matched more entries than one search reads; some matches may be missing.
    sendPage(res, head, "resources", found.items, { ...(found.partial ? { partialResults: true } : {}), pagination: { limit, cursor: next } });
  });
  return router;
}
