import { createServer, type RequestListener, type Server } from "node:http";
import { isIPv4, isIPv6, type AddressInfo, type Socket } from "node:net";
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
  /**
   * Whether a connection's peer is a proxy the service trusts (`TRUST_PROXY`): its connections carry
   * many clients, so the per-client cap does not apply to it. Default: none is.
   */
  isTrustedProxy?: (address: string) => boolean;
  /** A connection was closed on arrival: `maxConnections` were open (`server`), or its client held its cap (`client`). */
  onDropped?: (reason: DropReason) => void;
  /** An idle keep-alive connection was closed to make room for a new one. */
  onIdleClosed?: () => void;
}

/** Why a connection was closed on arrival. */
export type DropReason = "server" | "client";

const DROP_LOG_INTERVAL_MS = 60_000;

/**
 * An HTTP server bounded against slow and greedy clients: receiving the headers may take
 * `headersTimeoutMs` (a connection that sends nothing is closed then too), the whole request
 * `requestTimeoutMs` (the answer may take longer: a settle waits for its receipt), at most
 * `maxConnections` are open at once and at most `maxConnectionsPerClient` from one client
 * ({@link ConnectionBook}). What Node refuses before Express sees a request (time-outs, malformed HTTP)
 * is answered in JSON.
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
  // Not server.maxConnections: Node closes those before any listener sees them, so an idle
  // keep-alive connection could never give way and one client could hold every place.
  const book = new ConnectionBook(limits.maxConnections, limits.maxConnectionsPerClient, options.isTrustedProxy ?? (() => false));
  server.on("connection", (socket: Socket) => {
    const admitted = book.admit(socket);
    if (admitted.closedIdle) options.onIdleClosed?.();
    if (admitted.ok) return;
    socket.destroy();
    dropped(admitted.reason);
  });
  server.on("request", (req, res) => {
    book.busy(req.socket);
    res.once("close", () => book.idle(req.socket));
  });

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
      logger.warn({ listener: options.name, maxConnections: limits.maxConnections, dropped: tally.count }, "connections closed on arrival: MAX_CONNECTIONS are open");
    } else {
      logger.warn(
        { listener: options.name, maxConnectionsPerClient: limits.maxConnectionsPerClient, dropped: tally.count },
        "connections closed on arrival: their client holds MAX_CONNECTIONS_PER_CLIENT",
      );
    }
    tally.count = 0;
  };
  return server;
}

/** What {@link ConnectionBook.admit} decided. */
export type Admission = { ok: true; closedIdle: boolean } | { ok: false; reason: DropReason; closedIdle: boolean };

interface Held {
  /** The client it counts against; undefined for a trusted proxy's connection. */
  client: string | undefined;
  /** Requests in progress on it. */
  active: number;
  /** Requests answered on it: a connection that answered one and has none in progress is an idle keep-alive one. */
  answered: number;
}

/**
 * The open connections of one listener, by client. A new connection is admitted unless the server
 * holds `maxConnections` or its client `perClient` (0 = no per-client cap); in either case an idle
 * keep-alive connection (one that has answered a request and has none in progress) is closed first to
 * make room: the client's own when it is at its cap, else one of the client holding the most. From
 * nine tenths of `maxConnections` on, each new connection also closes one idle connection, so room is
 * made before the cap is reached. A connection that has not yet sent a request is never closed here
 * (the headers time-out bounds it). A client is an IPv4 address or an IPv6 /56 (what one subscriber is
 * usually given), so rotating addresses within one's own prefix gains nothing.
 */
export class ConnectionBook {
  readonly #held = new Map<Socket, Held>();
  readonly #byClient = new Map<string, Set<Socket>>();
  readonly #max: number;
  readonly #perClient: number;
  readonly #nearCap: number;
  readonly #isTrustedProxy: (address: string) => boolean;

  constructor(max: number, perClient: number, isTrustedProxy: (address: string) => boolean) {
    this.#max = max;
    this.#perClient = perClient;
    this.#nearCap = Math.max(1, Math.floor(max * 0.9));
    this.#isTrustedProxy = isTrustedProxy;
  }

  /** Open connections, and of them those counted against `client` (its group key, {@link clientOf}). */
  count(client?: string): number {
    return client === undefined ? this.#held.size : (this.#byClient.get(client)?.size ?? 0);
  }

  admit(socket: Socket): Admission {
    const address = socket.remoteAddress ?? "";
    const client = this.#perClient > 0 && !this.#isTrustedProxy(address) ? clientOf(address) : undefined;
    let closedIdle = false;
    if (client !== undefined && this.count(client) >= this.#perClient) {
      closedIdle = this.#closeIdle(this.#byClient.get(client)!);
      if (!closedIdle) return { ok: false, reason: "client", closedIdle };
    }
    if (this.#held.size >= this.#nearCap) {
      const freed = this.#closeIdle(this.#greediest()) || (this.#held.size >= this.#max && this.#closeIdle(this.#held.keys()));
      closedIdle ||= freed;
      if (this.#held.size >= this.#max) return { ok: false, reason: "server", closedIdle };
    }
    this.#held.set(socket, { client, active: 0, answered: 0 });
    if (client !== undefined) {
      let sockets = this.#byClient.get(client);
      if (!sockets) this.#byClient.set(client, (sockets = new Set()));
      sockets.add(socket);
    }
    socket.once("close", () => this.#forget(socket));
    return { ok: true, closedIdle };
  }

  busy(socket: Socket): void {
    const entry = this.#held.get(socket);
    if (entry) entry.active++;
  }

  idle(socket: Socket): void {
    const entry = this.#held.get(socket);
    if (!entry) return;
    entry.active = Math.max(0, entry.active - 1);
    entry.answered++;
  }

  #forget(socket: Socket): void {
    const entry = this.#held.get(socket);
    if (!entry) return;
    this.#held.delete(socket);
    if (entry.client === undefined) return;
    const sockets = this.#byClient.get(entry.client)!;
    sockets.delete(socket);
    if (sockets.size === 0) this.#byClient.delete(entry.client);
  }

  /** The connections of the client holding the most (every connection when no client is counted). */
  #greediest(): Iterable<Socket> {
    let most: Set<Socket> | undefined;
    for (const sockets of this.#byClient.values()) if (!most || sockets.size > most.size) most = sockets;
    return most && most.size > 0 ? most : this.#held.keys();
  }

  /** Closes the longest-held idle keep-alive connection among `sockets`; false when none is idle. */
  #closeIdle(sockets: Iterable<Socket>): boolean {
    for (const socket of sockets) {
      const entry = this.#held.get(socket);
      if (!entry || entry.active > 0 || entry.answered === 0) continue;
      this.#forget(socket);
      socket.destroy();
      return true;
    }
    return false;
  }
}

/**
 * The client a connection counts against: its IPv4 address (an IPv4-mapped IPv6 address is read as
 * IPv4), or the first 56 bits of its IPv6 address (`2001:db8:0:ab00::/56`).
 */
export function clientOf(address: string): string {
  const plain = address.replace(/%.*$/, "");
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(plain);
  if (mapped) return mapped[1]!;
  if (isIPv4(plain) || !isIPv6(plain)) return plain;
  const groups = ipv6Groups(plain);
  return `${groups.slice(0, 3).map((g) => g.toString(16)).join(":")}:${(groups[3]! & 0xff00).toString(16)}::/56`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, an IPv4 tail read as two groups). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const tail = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (tail) {
    const [a, b, c, d] = tail.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, tail.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", rest] = text.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = rest === undefined || rest === "" ? [] : rest.split(":");
  const middle = rest === undefined ? [] : Array<string>(8 - left.length - right.length).fill("0");
  return [...left, ...middle, ...right].map((group) => parseInt(group, 16));
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
