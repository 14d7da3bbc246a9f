import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import { isAddressInUse, PortInUseError, type PortRole } from "./errors.js";
import { answer, errorResponse, handle, INTERNAL_ERROR, METHOD_NOT_FOUND, send, type Call } from "./json-rpc.js";
import { bridgeGuard } from "./rpc-bridge-guard.js";

/**
 * The part of an EIP-1193 provider the bridge needs (Hardhat's EDR provider is one). `on` and
 * `removeListener` (the "message" event, `{type: "eth_subscription", data: {subscription, result}}`)
 * carry `eth_subscribe` notifications to WebSocket clients; without them `eth_subscribe` over a
 * WebSocket is refused.
 */
export interface RequestProvider {
  request(args: { method: string; params?: unknown }): Promise<unknown>;
  on?(event: "message", listener: (message: unknown) => void): unknown;
  removeListener?(event: "message", listener: (message: unknown) => void): unknown;
}

/** Options of {@link serveJsonRpc}. */
export interface ServeJsonRpcOptions {
  /** Address to bind; local stacks keep 127.0.0.1. */
  host?: string;
  /** 0 picks a free port. */
  port: number;
  /** Reported in {@link PortInUseError} when the port is taken. */
  role: PortRole;
  /** Largest accepted request body, and WebSocket message. */
  bodyLimitBytes?: number;
}

/** A running JSON-RPC endpoint: HTTP POST and WebSocket on one port. */
export interface JsonRpcBridge {
  /** `http://host:port` */
  url: string;
  /** `ws://host:port`: the same endpoint over WebSocket, with `eth_subscribe`. */
  wsUrl: string;
  port: number;
  /**
   * Stops accepting requests, closes open WebSockets (1001, their subscriptions ended at the
   * provider before this resolves) and drops open connections.
   */
  close(): Promise<void>;
}


/**
 * Serves `provider` as JSON-RPC 2.0 over HTTP POST and over WebSocket on the same port (single
 * requests and batches), the way `hardhat node` does, but in this process so the same provider can
 * also be used directly. Over WebSocket, `eth_subscribe` notifications go to the socket that
 * subscribed, and a socket's subscriptions end when it closes. Web pages are turned away at the door
 * (a foreign `Host` 421, another origin's `Origin` 403: {@link bridgeGuard}).
 */
export async function serveJsonRpc(provider: RequestProvider, options: ServeJsonRpcOptions): Promise<JsonRpcBridge> {
  const host = options.host ?? "127.0.0.1";
  const limit = options.bodyLimitBytes ?? 32 * 1024 * 1024;
  const sockets = new Set<Socket>();
  const call: Call = (args) => provider.request(args);
  const guard = bridgeGuard(host);
  const server = createServer((req, res) => {
    if (guard.refusedRequest(req, res)) return;
    handle(call, req, res, limit).catch((error: unknown) => {
      // Only reached if writing the response itself failed; nothing more can be sent.
      if (!res.headersSent) send(res, 500, errorResponse(null, INTERNAL_ERROR, String(error)));
      else res.destroy();
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  const webSockets = new WebSocketServer({ noServer: true, maxPayload: limit });
  const subscriptions = new SubscriptionRouter(provider, limit);
  let closing: Promise<void> | undefined;
  server.on("upgrade", (req, socket, head) => {
    if (closing) {
      socket.destroy();
      return;
    }
    if (guard.refusedUpgrade(req, socket)) return;
    webSockets.handleUpgrade(req, socket, head, (ws) => subscriptions.serve(ws));
  });
  await listen(server, host, options.port, options.role);
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    wsUrl: `ws://${host}:${port}`,
    port,
    close() {
      closing ??= (async () => {
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        await closeWebSockets(webSockets);
        for (const socket of sockets) socket.destroy();
        await subscriptions.settled();
        await stopped;
      })();
      return closing;
    },
  };
}

/** Closes every open WebSocket with 1001 (going away); one that does not finish the handshake within `graceMs` is cut. */
async function closeWebSockets(server: WebSocketServer, graceMs = 1_000): Promise<void> {
  await Promise.all(
    [...server.clients].map(
      (ws) =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(() => ws.terminate(), graceMs);
          ws.once("close", () => {
            clearTimeout(timer);
            resolve();
          });
          ws.close(1001, "JSON-RPC endpoint closing");
        }),
    ),
  );
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** The params of an `eth_subscription` message. */
interface Notification {
  subscription: string;
  result: unknown;
}

/** One WebSocket and its subscriptions. */
interface Session {
  ws: WebSocket;
  closed: boolean;
  /** Subscriptions this socket made (the provider has answered its `eth_subscribe`). */
  owned: Set<string>;
  /** Those whose `eth_subscribe` answer the socket has been sent: only these get notifications. */
  announced: Set<string>;
  /** This socket's `eth_subscribe` calls in flight. */
  subscribing: number;
  /** Notifications that arrived before the answer announcing their subscription was sent. */
  held: Notification[];
}

/**
 * Answers WebSocket messages and routes the provider's subscription events to the socket that
 * subscribed. One provider listener serves every socket, attached only while a subscription
 * exists or is being made, so sockets coming and going leave no listeners behind.
 */
class SubscriptionRouter {
  readonly #provider: RequestProvider;
  readonly #limit: number;
  readonly #owners = new Map<string, Session>();
  readonly #subscribing = new Set<Session>();
  /** `eth_unsubscribe` calls for closed sockets, not yet answered. */
  readonly #ending = new Set<Promise<unknown>>();
  #listening = false;

  constructor(provider: RequestProvider, limit: number) {
    this.#provider = provider;
    this.#limit = limit;
  }

  /** Answers `ws`'s messages as the HTTP side answers bodies; its subscriptions end when it closes. */
  serve(ws: WebSocket): void {
    const session: Session = { ws, closed: false, owned: new Set(), announced: new Set(), subscribing: 0, held: [] };
    // Protocol errors (a frame over maxPayload, bad framing) are followed by "close"; unheard, they would throw.
    ws.on("error", () => {});
    ws.on("message", (data) => {
      const fresh: string[] = [];
      answer((args) => this.#call(session, args, fresh), text(data))
        .then((reply) => {
          if (reply !== undefined) this.#send(session, reply);
        })
        .catch((error: unknown) => this.#send(session, errorResponse(null, INTERNAL_ERROR, String(error))))
        .finally(() => {
          for (const id of fresh) if (session.owned.has(id)) session.announced.add(id);
          this.#flush(session);
        });
    });
    ws.on("close", () => this.#end(session));
  }

  async #call(session: Session, args: { method: string; params: unknown }, fresh: string[]): Promise<unknown> {
    if (args.method === "eth_subscribe") return this.#subscribe(session, args, fresh);
    if (args.method !== "eth_unsubscribe") return this.#provider.request(args);
    const id: unknown = Array.isArray(args.params) ? args.params[0] : undefined;
    // Another socket's subscription is not this one's to end (geth's rule too); malformed ids go to the provider for its error.
    if (typeof id === "string" && !session.owned.has(id)) return false;
    const result = await this.#provider.request(args);
    if (typeof id === "string") this.#forget(session, id);
    return result;
  }

  async #subscribe(session: Session, args: { method: string; params: unknown }, fresh: string[]): Promise<unknown> {
    if (!this.#provider.on || !this.#provider.removeListener) {
      // A subscription nobody can hear would only pile up in the provider.
      throw Object.assign(new Error("eth_subscribe is not available: this endpoint's provider emits no events"), { code: METHOD_NOT_FOUND });
    }
    session.subscribing++;
    this.#subscribing.add(session);
    // Listening before asking: the first event may come before the answer with the id.
    this.#listen();
    try {
      const id = await this.#provider.request(args);
      if (typeof id === "string") {
        if (session.closed) this.#unsubscribe(id);
        else {
          session.owned.add(id);
          this.#owners.set(id, session);
          fresh.push(id);
        }
      }
      return id;
    } finally {
      if (--session.subscribing === 0) this.#subscribing.delete(session);
      this.#unlistenIfIdle();
    }
  }

  readonly #onMessage = (message: unknown): void => {
    const notification = asNotification(message);
    if (!notification) return;
    const owner = this.#owners.get(notification.subscription);
    if (owner) {
      // Clients match notifications to the id in the subscribe answer: none may overtake it.
      if (owner.announced.has(notification.subscription)) this.#notify(owner, notification);
      else owner.held.push(notification);
      return;
    }
    // Perhaps from an eth_subscribe whose answer is still on its way: held by each socket awaiting one.
    for (const session of this.#subscribing) session.held.push(notification);
  };

  /** Sends the held notifications whose subscription is announced; drops those no longer anyone's here. */
  #flush(session: Session): void {
    const keep: Notification[] = [];
    for (const notification of session.held) {
      const id = notification.subscription;
      if (session.announced.has(id)) this.#notify(session, notification);
      else if (session.owned.has(id) || (session.subscribing > 0 && !this.#owners.has(id))) keep.push(notification);
    }
    session.held = keep;
  }

  #forget(session: Session, id: string): void {
    session.owned.delete(id);
    session.announced.delete(id);
    this.#owners.delete(id);
    this.#unlistenIfIdle();
  }

  #end(session: Session): void {
    session.closed = true;
    session.held = [];
    this.#subscribing.delete(session);
    for (const id of session.owned) {
      this.#owners.delete(id);
      this.#unsubscribe(id);
    }
    session.owned.clear();
    session.announced.clear();
    this.#unlistenIfIdle();
  }

  /** Resolves once the subscriptions of every closed socket have been ended at the provider. */
  async settled(): Promise<void> {
    while (this.#ending.size > 0) await Promise.all(this.#ending);
  }

  #unsubscribe(id: string): void {
    // The provider may already be gone (a chain stopping closes its bridge first): nothing left to end.
    const ending = this.#provider.request({ method: "eth_unsubscribe", params: [id] }).catch(() => {});
    this.#ending.add(ending);
    void ending.finally(() => this.#ending.delete(ending));
  }

  #listen(): void {
    if (this.#listening) return;
    this.#provider.on!("message", this.#onMessage);
    this.#listening = true;
  }

  #unlistenIfIdle(): void {
    if (!this.#listening || this.#owners.size > 0 || this.#subscribing.size > 0) return;
    this.#provider.removeListener!("message", this.#onMessage);
    this.#listening = false;
  }

  #notify(session: Session, params: Notification): void {
    this.#send(session, { jsonrpc: "2.0", method: "eth_subscription", params });
  }

  #send(session: Session, body: unknown): void {
    const { ws } = session;
    if (ws.readyState !== ws.OPEN) return;
    // A client that stops reading is cut off rather than buffered for without bound.
    if (ws.bufferedAmount > this.#limit) {
      ws.terminate();
      return;
    }
    ws.send(JSON.stringify(body));
  }
}

/** A provider "message" event as notification params; undefined for anything else. */
function asNotification(message: unknown): Notification | undefined {
  if (typeof message !== "object" || message === null) return undefined;
  const { type, data } = message as { type?: unknown; data?: unknown };
  if (type !== "eth_subscription" || typeof data !== "object" || data === null) return undefined;
  const { subscription, result } = data as { subscription?: unknown; result?: unknown };
  return typeof subscription === "string" ? { subscription, result } : undefined;
}

/** A WebSocket message as text (binary frames too: some clients send JSON that way). */
function text(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString("utf8");
  return (Buffer.isBuffer(data) ? data : Buffer.from(data)).toString("utf8");
}

function listen(server: Server, host: string, port: number, role: PortRole): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => {
      server.off("listening", onListening);
      reject(isAddressInUse(error) ? new PortInUseError(port, role, host, { cause: error }) : error);
    };
    const onListening = () => {
      server.off("error", onError);
      resolve();
    };
    server.once("error", onError);
    server.once("listening", onListening);
    server.listen({ host, port, exclusive: true });
  });
}
