import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";
import { RequestError } from "../../protocol/reasons.js";
import type { HttpLimitsConfig } from "../config/index.js";
import type { Logger } from "../logger.js";
import { ConnectionBook, type DropReason, type WaitingEvent } from "./connection-book.js";

/** Options of {@link createListener}. */
export interface ListenerOptions {
  /** "service" or "metrics": named in logs and metrics. */
  name: string;
  limits: HttpLimitsConfig;
  logger: Logger;
  /**
   * Whether a connection's peer is a proxy the service trusts (`TRUST_PROXY`): its connections carry
   * many clients, so the per-client cap does not apply to it. Default: none is.
   */
  isTrustedProxy?: (address: string) => boolean;
  /** A connection was refused on arrival (answered 503, closed): `maxConnections` were open (`server`), or its client held its cap and its queue (`client`). */
  onDropped?: (reason: DropReason) => void;
  /** An idle keep-alive connection was closed to make room for a new one. */
  onIdleClosed?: () => void;
  /** A connection over its client's cap waits for a place, or what was done to make it one ({@link WaitingEvent}). */
  onWaiting?: (event: WaitingEvent) => void;
}

const books = new WeakMap<Server, ConnectionBook>();

/** A listener's connections now: being served (counted against their client's cap), idle having given their place to another of their client, and waiting for a place. */
export function connectionCounts(server: Server): { served: number; yielded: number; waiting: number } {
  const book = books.get(server);
  if (!book) return { served: 0, yielded: 0, waiting: 0 };
  const yielded = book.gaveWay();
  return { served: book.count() - book.waiting() - yielded, yielded, waiting: book.waiting() };
}

const DROP_LOG_INTERVAL_MS = 60_000;
/** A connection the server ends (refused after its 503, or idle and giving way) is closed when the client closes its side, or this long after. */
const CLOSE_LINGER_MS = 1_000;

/** Closes `socket` once the client has closed its side too, or {@link CLOSE_LINGER_MS} after the server ended its own. */
function linger(socket: Socket): void {
  const timer = setTimeout(() => socket.destroy(), CLOSE_LINGER_MS);
  timer.unref();
  socket.once("close", () => clearTimeout(timer));
}

/** The 503 a refused connection gets, before its request is read, and then `Connection: close`. */
function refusal(text: string): string {
  const body = JSON.stringify({ error: text });
  return `HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n${body}`;
}

/**
 * An HTTP server bounded against slow and greedy clients: receiving the headers may take
 * `headersTimeoutMs` (a connection that sends nothing is closed then too), the whole request
 * `requestTimeoutMs` (the answer may take longer: a settle waits for its receipt), at most
 * `maxConnections` are open at once and at most `maxConnectionsPerClient` from one client
 * ({@link ConnectionBook}): a connection beyond is answered `503` JSON with `Connection: close`, or waits
 * a short while for its client's place; none is reset. What Node refuses before Express sees a request
 * (time-outs, malformed HTTP) is answered in JSON.
 */
export function createListener(handler: RequestListener, options: ListenerOptions): Server {
  const { limits, logger } = options;
  /** Idle connections the book closed: the server's side is ended, and a request read on one afterwards is not run. */
  const closedIdle = new WeakSet<Socket>();
  const server = createServer(
    {
      requestTimeout: limits.requestTimeoutMs,
      headersTimeout: limits.headersTimeoutMs,
      // Node checks the two time-outs on this period (default 30 s, far coarser than the time-outs).
      connectionsCheckingInterval: Math.min(1_000, Math.max(25, Math.floor(limits.headersTimeoutMs / 4))),
    },
    (req, res) => {
      // A request the client sent as the server's FIN came (it crossed it): it could not be answered, so it
      // is not run either (a settle must not happen unseen); the client sees its connection closed unanswered.
      if (closedIdle.has(req.socket)) return void req.socket.destroy();
      // On a connection that gave its place, it may wait for one (then answered 503 if it waits too long).
      book.request(
        req.socket,
        () => serve(req, res),
        () => {
          dropped("client");
          const body = JSON.stringify({ error: RequestError.tooManyClientConnections });
          res.writeHead(503, { "Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(body), "Retry-After": "1", Connection: "close" }).end(body);
        },
      );
    },
  );
  const serve: RequestListener = (req, res) => {
    book.busy(req.socket);
    // Decided as the answer's head is written (the latest moment): a connection of a client with
    // connections waiting says in this very answer that it closes after it.
    const writeHead = res.writeHead;
    res.writeHead = function (this: typeof res, ...args: Parameters<typeof res.writeHead>) {
      if (!this.headersSent && book.retire(req.socket)) this.setHeader("Connection", "close");
      return writeHead.apply(this, args);
    } as typeof res.writeHead;
    res.once("close", () => book.idle(req.socket));
    handler(req, res);
  };
  server.keepAliveTimeout = 65_000;
  // Not server.maxConnections: Node closes those before any listener sees them, so an idle
  // keep-alive connection could never give way and one client could hold every place. A connection is
  // handed to Node's HTTP handling only once admitted; until then it reads nothing (a waiting one's
  // request stays in the kernel).
  (server as unknown as { pauseOnConnect: boolean }).pauseOnConnect = true;
  const [http] = server.listeners("connection") as Array<(this: Server, socket: Socket) => void>;
  server.removeAllListeners("connection");
  const book = new ConnectionBook({
    max: limits.maxConnections,
    perClient: limits.maxConnectionsPerClient,
    queueMs: limits.connectionQueueMs,
    isTrustedProxy: options.isTrustedProxy ?? (() => false),
    accept(socket) {
      http!.call(server, socket);
      socket.resume();
    },
    refuse(socket, reason) {
      dropped(reason);
      socket.on("error", () => {});
      // What the client sends meanwhile is read and dropped: a closed socket with unread data would be reset.
      socket.on("data", () => {});
      socket.resume();
      socket.end(refusal(reason === "server" ? RequestError.tooManyConnections : RequestError.tooManyClientConnections));
      linger(socket);
    },
    close(socket) {
      // Half-closed (FIN), not destroyed: a request already on its way would otherwise meet a reset.
      closedIdle.add(socket);
      socket.end();
      linger(socket);
    },
    onIdleClosed: () => options.onIdleClosed?.(),
    onWaiting: (event) => options.onWaiting?.(event),
  });
  books.set(server, book);
  server.on("connection", (socket: Socket) => book.arrive(socket));
  // Waiting connections are not Node's yet: closing the server ends them as well.
  const close = server.close.bind(server);
  server.close = (callback?: (error?: Error) => void) => {
    book.shutdown();
    return close(callback);
  };

  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
    const response = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (error.code === "ECONNRESET" || !socket.writable || response?.headersSent) {
      socket.destroy();
      return;
    }
    const [status, reason, text] =
      error.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? [408, "Request Timeout", RequestError.requestTimeout]
        : error.code === "HPE_HEADER_OVERFLOW"
          ? [431, "Request Header Fields Too Large", RequestError.badRequest]
          : [400, "Bad Request", RequestError.badRequest];
    const remoteAddress = (socket as { remoteAddress?: string }).remoteAddress;
    logger.info({ listener: options.name, status, code: error.code, remoteAddress }, "request refused before it was read");
    const body = JSON.stringify({ error: text });
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });

  // One line a minute at most per reason: a flood of connections must not become a flood of log lines.
  const drops = { server: { count: 0, loggedAt: -Infinity }, client: { count: 0, loggedAt: -Infinity } };
  const dropped = (reason: DropReason) => {
    options.onDropped?.(reason);
    const tally = drops[reason];
    tally.count++;
    if (performance.now() - tally.loggedAt < DROP_LOG_INTERVAL_MS) return;
    tally.loggedAt = performance.now();
    if (reason === "server") {
      logger.warn({ listener: options.name, maxConnections: limits.maxConnections, refused: tally.count }, "connections refused on arrival (503): MAX_CONNECTIONS are open");
    } else {
      logger.warn(
        { listener: options.name, maxConnectionsPerClient: limits.maxConnectionsPerClient, refused: tally.count },
        "connections refused on arrival (503): their client holds MAX_CONNECTIONS_PER_CLIENT and four times as many waiting",
      );
    }
    tally.count = 0;
  };
  return server;
}

/** Listens on `host:port` (0 = any free port) and resolves with the URL; rejects with the listen error. */
export async function listenOn(server: Server, host: string, port: number): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  return `http://${host.includes(":") ? `[${host}]` : host}:${address.port}`;
}
