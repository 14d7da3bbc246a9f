import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { RequestError } from "../../protocol/reasons.js";
import type { HttpLimitsConfig } from "../config.js";
import type { Logger } from "../logger.js";

/** Options of {@link createListener}. */
export interface ListenerOptions {
  /** "service" or "metrics": named in logs and metrics. */
  name: string;
  limits: HttpLimitsConfig;
  logger: Logger;
  /** A connection was closed on arrival because `maxConnections` were open. */
  onDropped?: () => void;
}

const DROP_LOG_INTERVAL_MS = 60_000;

/**
 * An HTTP server bounded against slow clients: receiving the headers may take `headersTimeoutMs`
 * (a connection that sends nothing is closed then too), the whole request `requestTimeoutMs` (the
 * answer may take longer: a settle waits for its receipt), and at most `maxConnections` are open at
 * once. What Node refuses before Express sees a request (time-outs, malformed HTTP) is answered in JSON.
 */
export function createListener(handler: RequestListener, options: ListenerOptions): Server {
  const { limits, logger } = options;
  const server = createServer(
    {
      requestTimeout: limits.requestTimeoutMs,
      headersTimeout: limits.headersTimeoutMs,
      // Node checks the two time-outs on this period (default 30 s, far coarser than the time-outs).
      connectionsCheckingInterval: Math.min(1_000, Math.max(25, Math.floor(limits.headersTimeoutMs / 4))),
    },
    handler,
  );
  server.keepAliveTimeout = 65_000;
  server.maxConnections = limits.maxConnections;

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

  let dropped = 0;
  let lastDropLog = -Infinity;
  server.on("drop", () => {
    dropped++;
    options.onDropped?.();
    // One line a minute at most: a flood of connections must not become a flood of log lines.
    if (performance.now() - lastDropLog >= DROP_LOG_INTERVAL_MS) {
      lastDropLog = performance.now();
      logger.warn({ listener: options.name, maxConnections: limits.maxConnections, dropped }, "connections closed on arrival: MAX_CONNECTIONS are open");
      dropped = 0;
    }
  });
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
