import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import express, { type ErrorRequestHandler, type Request, type Response, type Router } from "express";
import { parseUnits } from "viem";
import { z } from "zod";
import { canonicalNetwork } from "../../protocol/networks.js";
import { addressSchema, describeZodError } from "../../protocol/schemas.js";
import type { ApiKeyConfig } from "../config/index.js";
import { apiKeyReader, refuseApiKey } from "../http/api-keys.js";
import { LOCAL_HOSTS, requireHost, requireSameOrigin } from "../http/hosts.js";
import type { FeedRow, OutcomeFeed } from "./feed.js";
import type { ChartsView } from "./minutes.js";
import { FeedStream, type FeedStreamEnd, type FeedStreamLimits } from "./stream.js";
import type { NetworksView } from "./networks.js";
import { TRY_SCENARIOS, type DashboardPlayground } from "./playground.js";

/** Options of {@link dashboardRouter}. */
export interface DashboardRouterOptions {
  feed: OutcomeFeed;
  networks: () => Promise<NetworksView>;
  /** The last hour per minute for the charts, whole (`all`) or as the chain shows it (`settled`). */
  charts?: (scope: ChartsView["scope"]) => ChartsView;
  /** The local stack's extras; absent in production, and then their routes do not exist. */
  playground?: DashboardPlayground;
  /** Most SSE streams open at once; more are answered 503. Default {@link DASHBOARD_STREAM_DEFAULTS}. */
  maxStreams?: number;
  /** Each stream's bounds: how long its client may not read, how long it lives. Default {@link DASHBOARD_STREAM_DEFAULTS}. */
  streamLimits?: Partial<FeedStreamLimits>;
  /** A stream opened (`opened`), was refused (`refused`: too many open, or stopping) or ended, and why (metrics). */
  onStream?: (event: "opened" | "refused" | FeedStreamEnd) => void;
  /**
   * The facilitator's API keys. With any, the feed and its stream show all rows only to a request
   * carrying one (`Authorization: Bearer`); without a key they show the settled rows alone (what the
   * chain shows anyway), and an unknown key is answered 401. Without keys, everyone sees every row.
   */
  apiKeys?: readonly ApiKeyConfig[];
  /**
   * `ALLOWED_HOSTS`. With a playground, the page and every `/dashboard` route answer only a `Host` naming a
   * loopback name or one of these (else 421), and the playground's `pay` only its own `Origin` (else 403).
   */
  allowedHosts?: readonly string[];
}

/** The streams' defaults: 100 at once, a client that reads nothing for 10 s dropped, a stream ended after 10 minutes, a comment after 15 quiet seconds. */
export const DASHBOARD_STREAM_DEFAULTS = { maxStreams: 100, stallMs: 10_000, maxLifetimeMs: 600_000, keepAliveMs: 15_000 } as const;

/** How often open streams are looked at (stalled, too old, quiet). */
const STREAM_TICK_MS = 250;

/** A row anyone may see when API keys guard the rest: a settlement, made on chain. */
export const isPublicRow = (row: FeedRow): boolean => row.ok && row.route === "settle" && row.txHash !== undefined;

/** The dashboard's routes, and a way to end its open streams (so a shutdown need not wait for browsers). */
export interface DashboardRoutes {
  router: Router;
  /** Ends every open stream and refuses new ones. */
  close(): void;
}

// The page and its assets, read once: the page is part of the server, like its code. The charting
// library (uPlot, a dependency) is served from its installed package, so the page needs no other origin.
const PUBLIC = new URL("./public/", import.meta.url);
const JS = "text/javascript; charset=utf-8";
const CSS = "text/css; charset=utf-8";

/** Each asset's path and file (found when a dashboard is made, not when the module is imported). */
function assets(): Record<string, { file: URL | string; type: string }> {
  const installed = createRequire(import.meta.url);
  return {
    "/": { file: new URL("index.html", PUBLIC), type: "text/html; charset=utf-8" },
    "/dashboard/app.js": { file: new URL("app.js", PUBLIC), type: JS },
    "/dashboard/charts.js": { file: new URL("charts.js", PUBLIC), type: JS },
    "/dashboard/style.css": { file: new URL("style.css", PUBLIC), type: CSS },
    "/dashboard/vendor/uplot.js": { file: installed.resolve("uplot/dist/uPlot.iife.min.js"), type: JS },
    "/dashboard/vendor/uplot.css": { file: installed.resolve("uplot/dist/uPlot.min.css"), type: CSS },
  };
}

// Everything comes from this origin: no fonts, scripts or styles from elsewhere (the page works offline).
const PAGE_HEADERS = {
  "Content-Security-Policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-cache",
};

const payBodySchema = z.object({
  network: z.string({ error: "is required" }),
  buyer: addressSchema,
  amount: z
    .string({ error: "is required" })
    .regex(/^\d{1,12}(\.\d{1,6})?$/, { error: "must be USDC.e as a decimal with up to 6 decimals, e.g. 0.25", abort: true })
    .refine((value) => parseUnits(value, 6) > 0n, { error: "must be more than 0" }),
  scenario: z.enum(TRY_SCENARIOS, { error: `must be one of ${TRY_SCENARIOS.join(", ")}` }),
});

/**
 * One SSE event carrying a feed row. The event id is `<epoch>.<rev>`: a browser that reconnects
 * resumes after the last row it saw, or gets the whole feed again from a restarted facilitator.
 */
export function sseEvent(epoch: string, row: FeedRow): string {
  return `id: ${epoch}.${row.rev}\nevent: outcome\ndata: ${JSON.stringify(row)}\n\n`;
}

/** The `rev` to resume after, from a `Last-Event-ID` of this feed's epoch; undefined = from the start. */
function resumeAfter(lastEventId: string | undefined, epoch: string): number | undefined {
  const match = /^([0-9a-z]+)\.(\d{1,15})$/.exec(lastEventId?.trim() ?? "");
  return match && match[1] === epoch ? Number(match[2]) : undefined;
}

/**
 * The dashboard: the page at `/` and its assets, `GET /dashboard/api/networks`, `GET /dashboard/api/feed`,
 * the live feed as server-sent events at `GET /dashboard/events`, and with a playground
 * `GET /dashboard/api/local/buyers` and `POST /dashboard/api/local/pay`.
 */
export function dashboardRouter(options: DashboardRouterOptions): DashboardRoutes {
  const { feed, playground } = options;
  const maxStreams = options.maxStreams ?? DASHBOARD_STREAM_DEFAULTS.maxStreams;
  const limits: FeedStreamLimits = { ...DASHBOARD_STREAM_DEFAULTS, ...options.streamLimits };
  const streams = new Set<FeedStream>();
  let closed = false;
  // One event text per row, however many streams send it.
  let cached: { rev: number; text: string } | undefined;
  const event = (row: FeedRow) => (cached?.rev === row.rev ? cached.text : (cached = { rev: row.rev, text: sseEvent(feed.epoch, row) }).text);
  // One timer for every stream, running only while one is open.
  let ticker: NodeJS.Timeout | undefined;
  const tick = () => {
    const now = performance.now();
    for (const stream of streams) {
      const ended = stream.tick(limits, now);
      if (ended) {
        streams.delete(stream);
        options.onStream?.(ended);
      }
    }
    if (streams.size === 0) ticker = void clearInterval(ticker);
  };
  const router = express.Router();

  if (playground) {
    // The local stack's page hands out its buyers' keys and spends from them: reachable by local names only,
    // so a page elsewhere cannot reach it through its visitors' browsers by DNS rebinding.
    const localOnly = requireHost([...LOCAL_HOSTS, ...(options.allowedHosts ?? [])]);
    router.get("/", localOnly);
    router.use("/dashboard", localOnly);
  }

  for (const [path, asset] of Object.entries(assets())) {
    const body = readFileSync(asset.file);
    router.get(path, (_req, res) => {
      res.set({ ...PAGE_HEADERS, "Content-Type": asset.type }).send(body);
    });
  }

  const keyOf = apiKeyReader(options.apiKeys ?? []);
  const keyed = (options.apiKeys?.length ?? 0) > 0;
  /** Which rows this request may see; undefined once it was answered 401 (a key that is not one of ours). */
  const viewOf = (req: Request, res: Response): ((row: FeedRow) => boolean) | undefined => {
    if (!keyed || keyOf(req)) return () => true;
    if (req.get("Authorization") === undefined) return isPublicRow;
    refuseApiKey(req, res);
    return undefined;
  };

  router.get("/dashboard/api/networks", async (req, res) => {
    const view = viewOf(req, res);
    if (!view) return;
    // The page says what its feed shows: every outcome, or the settlements alone.
    res.set("Cache-Control", "no-store").json({ ...(await options.networks()), feed: view === isPublicRow ? "settled" : "all" });
  });

  router.get("/dashboard/api/feed", async (req, res) => {
    const view = viewOf(req, res);
    if (!view) return;
    res.set("Cache-Control", "no-store").json({ rows: (await feed.rows()).filter(view) });
  });

  const { charts } = options;
  if (charts) {
    router.get("/dashboard/api/charts", (req, res) => {
      const view = viewOf(req, res);
      if (!view) return;
      // Without a key where keys are configured: the settlements' side only (what the chain shows anyway).
      res.set("Cache-Control", "no-store").json(charts(view === isPublicRow ? "settled" : "all"));
    });
  }

  router.get("/dashboard/events", (req: Request, res: Response) => {
    const view = viewOf(req, res);
    if (!view) return;
    if (closed || streams.size >= maxStreams) {
      options.onStream?.("refused");
      res.status(503).json({ error: closed ? "Service unavailable: stopping" : `Service unavailable: ${maxStreams} dashboard streams are open` });
      return;
    }
    const after = resumeAfter(req.get("Last-Event-ID"), feed.epoch);
    res.status(200).set({ "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no" });
    res.flushHeaders();
    res.write("retry: 2000\n\n");
    const stream = new FeedStream(res, feed, after, view, event);
    streams.add(stream);
    options.onStream?.("opened");
    ticker ??= setInterval(tick, STREAM_TICK_MS).unref();
    res.on("close", () => {
      if (!streams.delete(stream)) return;
      stream.end("client");
      options.onStream?.("client");
    });
  });

  if (playground) {
    router.get("/dashboard/api/local/buyers", async (_req, res) => {
      res.set("Cache-Control", "no-store").json({ buyers: await playground.buyers() });
    });

    router.post("/dashboard/api/local/pay", requireSameOrigin(), express.json({ limit: 4096 }), async (req, res) => {
      const parsed = payBodySchema.safeParse(req.body);
      if (!parsed.success) {
        res.status(400).json({ error: `Invalid request: ${describeZodError(parsed.error)}` });
        return;
      }
      const { buyer, amount, scenario } = parsed.data;
      const network = canonicalNetwork(parsed.data.network);
      const buyers = await playground.buyers();
      if (!network || !buyers.some((b) => b.network === network)) {
        res.status(400).json({ error: `Invalid request: network "${parsed.data.network}" has no local buyers here` });
        return;
      }
      if (!buyers.some((b) => b.network === network && b.address === buyer)) {
        res.status(400).json({ error: `Invalid request: buyer ${buyer} is not a funded buyer of ${network}` });
        return;
      }
      try {
        res.json({ steps: await playground.pay({ network, buyer, amount: parseUnits(amount, 6), scenario }) });
      } catch (error) {
        // The facilitator refused the call itself (a rate limit, an RPC fault): the page says so.
        res.status(502).json({ error: error instanceof Error ? error.message : String(error) });
      }
    });

    const badBody: ErrorRequestHandler = (error, _req, res, next) => {
      const status = (error as { status?: number }).status;
      if (typeof status !== "number" || status >= 500) return next(error);
      res.status(status === 413 ? 413 : 400).json({ error: `Invalid request: ${status === 413 ? "body too large" : "body is not valid JSON"}` });
    };
    router.use("/dashboard/api/local", badBody);
  }

  return {
    router,
    close() {
      closed = true;
      for (const stream of streams) {
        stream.end("shutdown");
        options.onStream?.("shutdown");
      }
      streams.clear();
      ticker = void clearInterval(ticker);
    },
  };
}
