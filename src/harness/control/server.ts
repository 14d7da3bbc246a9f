import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import express, { type ErrorRequestHandler, type Request, type RequestHandler, type Response } from "express";
import { LOCAL_HOSTS, requireHost } from "../../facilitator/http/hosts.js";
import type { Address, Hex } from "viem";
import type { LocalHarness } from "./harness.js";
import { harnessSigner, signers } from "./sign.js";
import { advanceSchema, CONTROL_BODY_LIMIT_BYTES, HarnessControlError, stopBlocksSchema } from "./spec.js";
import { describeZodError } from "../../protocol/schemas.js";

/** The path every control lives under. */
export const HARNESS_PATH = "/harness";
/** Connections the control endpoint holds at once (a suite's calls side by side need a few dozen); past it, new ones are reset. */
const MAX_CONNECTIONS = 1_024;

/** The running control endpoint. */
export interface HarnessServer {
  /** `http://127.0.0.1:PORT/harness`: what `HARNESS_URL` holds. */
  url: string;
  port: number;
  close(): Promise<void>;
}

/** Texts of the endpoint's refusals. */
export const HarnessRefusal = {
  notLoopback: "Forbidden: the harness control endpoint answers this machine's loopback only",
  fromPage: "Forbidden: the harness control endpoint takes no requests from web pages (an Origin header was sent)",
  notJson: "Unsupported Media Type: the body must be application/json",
  notObject: "Invalid request: the body must be a JSON object",
  notFound: "Not found: see GET /harness and docs/failures.md (every failure on demand)",
} as const;

/** Whether a socket's peer is this machine's loopback (IPv4 127/8, IPv6 ::1, or IPv4-mapped 127/8). */
function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith("::ffff:") ? address.slice(7) : address;
  return address === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

/**
 * The local stack's control endpoint over `harness`: JSON over HTTP on 127.0.0.1 only, for test suites
 * in any language (`curl`, the CLI's `fault` and `time`, {@link connectHarness}). It answers only a
 * loopback peer (403), a loopback `Host` (421: a web page on a name resolved to 127.0.0.1 still sends its
 * own), no `Origin` (403: browsers send one with every cross-site call; curl and HTTP clients do not)
 * and, with a body, `application/json` (415) of at most {@link CONTROL_BODY_LIMIT_BYTES}. `POST /sign` signs
 * payments for `buyers` (the stack's own, named by address; never a key from the body).
 */
export async function serveHarness(
  harness: LocalHarness,
  options: { port?: number; headersTimeoutMs?: number; buyers?: ReadonlyArray<{ address: Address; privateKey: Hex }> } = {},
): Promise<HarnessServer> {
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  app.use((req, res, next) => {
    if (!isLoopback(req.socket.remoteAddress)) return void send(res, 403, { error: HarnessRefusal.notLoopback });
    next();
  });
  app.use(requireHost(LOCAL_HOSTS));
  app.use((req, res, next) => {
    if (req.headers.origin !== undefined) return void send(res, 403, { error: HarnessRefusal.fromPage });
    next();
  });
  const json = express.json({ limit: CONTROL_BODY_LIMIT_BYTES, strict: true, type: () => true });
  const body: RequestHandler = (req, res, next) => {
    // A body-less POST is an empty object; any body must say it is JSON.
    const length = Number(req.headers["content-length"] ?? 0);
    if (length === 0 && req.headers["transfer-encoding"] === undefined) {
      req.body = {};
      return next();
    }
    if (!req.is("application/json")) return void send(res, 415, { error: HarnessRefusal.notJson });
    json(req, res, (error?: unknown) => {
      if (error) return next(error);
      if (typeof req.body !== "object" || req.body === null || Array.isArray(req.body)) return void send(res, 400, { error: HarnessRefusal.notObject });
      next();
    });
  };
  const route = (handler: (req: Request, res: Response) => Promise<void>): RequestHandler => (req, res, next) => void handler(req, res).catch(next);
  const parse = <T>(schema: { safeParse(input: unknown): { success: true; data: T } | { success: false; error: Parameters<typeof describeZodError>[0] } }, input: unknown): T => {
    const parsed = schema.safeParse(input);
    if (!parsed.success) throw new HarnessControlError(400, describeZodError(parsed.error));
    return parsed.data;
  };

  const router = express.Router();
  router.get("/", route(async (_req, res) => void send(res, 200, await harness.status())));
  router.get("/faults", route(async (_req, res) => void send(res, 200, await harness.faults())));
  router.post("/faults", body, route(async (req, res) => void send(res, 201, (await harness.fault(req.body as never)).info)));
  router.delete("/faults", route(async (_req, res) => void send(res, 200, { undone: await harness.reset() })));
  router.get("/faults/:id", route(async (req, res) => void send(res, 200, (await harness.faults()).find((fault) => fault.id === req.params.id) ?? notFound(String(req.params.id)))));
  router.delete("/faults/:id", route(async (req, res) => void send(res, 200, await harness.undo(String(req.params.id)))));
  router.post("/time/advance", body, route(async (req, res) => {
    const { seconds, network } = parse(advanceSchema, req.body);
    send(res, 200, { chainTime: await harness.advanceTime(seconds, network ? { network } : {}) });
  }));
  router.post("/time/stop-blocks", body, route(async (req, res) => void send(res, 201, (await harness.stopBlocks(parse(stopBlocksSchema, req.body))).info)));
  router.post("/time/resume-blocks", body, route(async (req, res) => {
    const { network } = parse(stopBlocksSchema.pick({ network: true }), req.body);
    send(res, 200, { resumed: await harness.resumeBlocks(network ? { network } : {}) });
  }));
  const buyers = options.buyers ?? [];
  const sign = harnessSigner(buyers);
  router.get("/sign", route(async (_req, res) => void send(res, 200, signers(buyers))));
  router.post("/sign", body, route(async (req, res) => void send(res, 200, await sign(req.body as Record<string, unknown>))));
  router.post("/facilitator/restart", body, route(async (_req, res) => {
    await harness.restartFacilitator();
    send(res, 200, { facilitatorUrl: (await harness.status()).facilitator.url });
  }));
  app.use(HARNESS_PATH, router);
  app.use((_req, res) => void send(res, 404, { error: HarnessRefusal.notFound }));
  const onError: ErrorRequestHandler = (error, _req, res, _next) => {
    if (res.headersSent) return;
    if (error instanceof HarnessControlError) return void send(res, error.status, { error: error.message });
    const type = (error as { type?: string }).type;
    if (type === "entity.too.large") return void send(res, 413, { error: `Payload too large: the limit is ${CONTROL_BODY_LIMIT_BYTES} bytes` });
    if (type === "entity.parse.failed") return void send(res, 400, { error: "Invalid request: the body is not valid JSON" });
    const status = (error as { status?: number }).status;
    if (typeof status === "number" && status >= 400 && status < 500) return void send(res, 400, { error: "Invalid request: the body could not be read" });
    send(res, 500, { error: `Internal error: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}` });
  };
  app.use(onError);

  // A client that sends half a request is cut off (checked every second): the endpoint's sockets stay few.
  const server: Server = createServer({ connectionsCheckingInterval: 1_000 }, app);
  server.maxConnections = MAX_CONNECTIONS;
  server.headersTimeout = options.headersTimeoutMs ?? 10_000;
  server.requestTimeout = 120_000;
  const sockets = new Set<Socket>();
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port: options.port ?? 0, exclusive: true }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}${HARNESS_PATH}`,
    port,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      });
      return closing;
    },
  };
}

/** A JSON answer ending in a newline (curl prints it on a line of its own). */
function send(res: Response, status: number, body: unknown): void {
  res.status(status).type("application/json").send(`${JSON.stringify(body)}\n`);
}

function notFound(id: string): never {
  throw new HarnessControlError(404, `no fault "${id.slice(0, 32)}" (armed, in force or recently ended)`);
}
