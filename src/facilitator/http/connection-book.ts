// A listener's connections by client: admitted, waiting for their client's place, or refused; idle ones give way.
import type { Socket } from "node:net";
import { clientOf } from "./client-key.js";

/** Why a connection was refused on arrival. */
export type DropReason = "server" | "client";

/**
 * What happened to a connection over its client's cap: it (or a request on a connection that gave way)
 * waits for a place (`queued`); a served one of its client was asked to close after its answer
 * (`retired`) or, idle, gave way to make one (`yielded`); or it waited `queueMs` and was refused (`expired`).
 */
export type WaitingEvent = "queued" | "retired" | "yielded" | "expired";

/** A client may have this many times its cap of connections waiting for a place (a pool churning through `Connection: close` opens more than it has requests in flight). */
const WAITING_PER_PLACE = 4;
/** How often waiting connections are looked at (a place freed, an idle connection to give way, a wait over). */
const QUEUE_TICK_MS = 50;
/**
 * A client's idle connections give way to its waiting ones once none of its connections has ended an
 * answer for this long: while answers are being written, each closes its connection for a waiting one
 * anyway, and a busy pool sends its next request on a connection moments after the answer.
 */
const GIVE_WAY_MS = 250;

/** Options of {@link ConnectionBook}. */
export interface ConnectionBookOptions {
  /** Connections held at once, waiting ones included (`MAX_CONNECTIONS`). */
  max: number;
  /** Connections one client may have served at once (`MAX_CONNECTIONS_PER_CLIENT`); 0 = no per-client cap. */
  perClient: number;
  /** How long a connection over its client's cap may wait for a place (`CONNECTION_QUEUE_MS`); 0 = refused at once. */
  queueMs: number;
  isTrustedProxy: (address: string) => boolean;
  /** Hands an admitted connection to the HTTP server. */
  accept(socket: Socket): void;
  /** Answers a connection that gets no place 503 and closes it. */
  refuse(socket: Socket, reason: DropReason): void;
  /** Closes an idle served connection gracefully: its side ended (never reset), no request read on it afterwards run. */
  close(socket: Socket): void;
  onIdleClosed?: () => void;
  onWaiting?: (event: WaitingEvent) => void;
}

/** A request that arrived on a connection that had given way: run once its client has a place, or refused. */
interface HeldRequest {
  start(): void;
  /** Answers it 503 (`Connection: close`): its wait is over, or the listener closes. */
  refuse(): void;
}

interface Held {
  /** The client it counts against; undefined for a trusted proxy's connection. */
  client: string | undefined;
  /** Requests in progress on it. */
  active: number;
  /** Requests answered on it: a connection that answered one and has none in progress is an idle keep-alive one. */
  answered: number;
  /** When its last answer ended (`performance.now()`). */
  idleSince: number;
  /** Bytes read from it by then: more read since is another request arriving, and it is no longer idle. */
  readAtIdle: number;
  /** Asked to close after its current answer (`Connection: close`): its client has connections waiting. */
  retiring: boolean;
  /** Idle, it gave its place to a waiting connection of its client: a request on it waits for a place. */
  lent: boolean;
}

/** A connection waiting for a place, not yet the HTTP server's; or a request held on one that gave way (`request`). */
interface Waiting {
  socket: Socket;
  /** When it arrived. */
  since: number;
  request?: HeldRequest;
}

interface Client {
  /** Its connections being served (admitted to the HTTP server), counted against its cap. */
  served: Set<Socket>;
  /** Its connections that gave their place: open, idle or holding a request that waits, not counted. */
  lent: Set<Socket>;
  /** Its connections and held requests waiting for a place, oldest first. */
  waiting: Waiting[];
  /** Of `served`, those asked to close after their current answer. */
  retiring: number;
  /** When an answer last ended on one of its connections (`performance.now()`). */
  answeredAt: number;
}

/**
 * The open connections of one listener, by client. A new connection is admitted unless the server
 * holds `max` (waiting ones included) or its client `perClient` (0 = no per-client cap). Near and at
 * `max`, an idle keep-alive connection (one that has answered a request and has none in progress, of the
 * client holding the most) is closed first to make room; from nine tenths of `max` on, each new
 * connection closes one, so room is made before the cap is reached; a new connection still without room
 * is answered 503 (`Connection: close`) and closed. A connection of a client at its cap waits (up to
 * `queueMs`, at most 4 × `perClient` of them, and never when another client needs the place at `max`)
 * while the client's served connections are asked, one per waiting connection, to close after their
 * current answer (`Connection: close`: a keep-alive pool then opens a new connection, which queues in
 * turn). Once no answer has ended on the client's connections for {@link GIVE_WAY_MS}, its idle ones give
 * way, the longest idle first, one per waiting connection that its connections in use (a request in
 * progress or arriving, or closing after its answer) will not make room for: the idle one stays open but
 * no longer counts, the waiting one takes its place. Not closed: its pool may be sending on it at that very
 * moment (measured: a pool idle a while, then bursting, sends on its old connections up to a second after
 * opening new ones on a loaded machine); a request that comes on it waits for a place as a new connection
 * would (503 after `queueMs`), so requests in progress never exceed the cap. Past `perClient` given way,
 * the longest idle of them is closed gracefully ({@link ConnectionBookOptions.close}). No connection is
 * ever reset; one with a request in progress or arriving, or that has not sent one, never gives way. A
 * client is an IPv4 address or an IPv6 /56 (what one subscriber is usually given).
 */
export class ConnectionBook {
  readonly #held = new Map<Socket, Held>();
  readonly #clients = new Map<string, Client>();
  readonly #o: ConnectionBookOptions;
  readonly #nearCap: number;
  /** Connections waiting (not yet the HTTP server's), all clients together. */
  #waiting = 0;
  /** Requests held on connections that gave way, all clients together. */
  #heldRequests = 0;
  #ticker: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: ConnectionBookOptions) {
    this.#o = options;
    this.#nearCap = Math.max(1, Math.floor(options.max * 0.9));
  }

  /** Connections held (served, given way and waiting), and of them those being served for `client` (its group key, {@link clientOf}). */
  count(client?: string): number {
    return client === undefined ? this.#held.size + this.#waiting : (this.#clients.get(client)?.served.size ?? 0);
  }

  /** Connections that gave their place (open, not counted against their client's cap), all clients together. */
  gaveWay(): number {
    return [...this.#clients.values()].reduce((count, client) => count + client.lent.size, 0);
  }

  /** Connections waiting for a place (not yet the HTTP server's), of `client` or of all. */
  waiting(client?: string): number {
    return client === undefined ? this.#waiting : (this.#clients.get(client)?.waiting.filter((waiting) => !waiting.request).length ?? 0);
  }

  /** A new connection: admitted, made to wait, or refused. */
  arrive(socket: Socket): void {
    if (this.#closed) return this.#o.refuse(socket, "server");
    const address = socket.remoteAddress ?? "";
    const key = this.#o.perClient > 0 && !this.#o.isTrustedProxy(address) ? clientOf(address) : undefined;
    if (this.count() >= this.#nearCap) {
      const idle = this.#longestIdle(this.#greediest()) ?? (this.count() >= this.#o.max ? this.#longestIdle(this.#held.keys()) : undefined);
      if (idle) this.#closeIdle(idle);
      // Connections waiting over their client's cap never keep another client out: the newest of the client
      // with the most waiting gives way.
      if (this.count() >= this.#o.max && !this.#yieldWaiting(key)) return this.#o.refuse(socket, "server");
    }
    if (key === undefined) return this.#admit(socket, undefined);
    const client = this.#client(key);
    if (client.served.size < this.#o.perClient) return this.#admit(socket, key);
    if (!this.#queue(client, { socket, since: performance.now() })) return this.#o.refuse(socket, "client");
    socket.once("close", () => this.#unqueue(key, socket));
  }

  /**
   * A request arrived on `socket`: `start` runs it now, unless its connection gave way and its client has
   * no place, when it waits for one (`refuse` answers it 503 if it waits too long or cannot wait).
   */
  request(socket: Socket, start: () => void, refuse: () => void): void {
    const entry = this.#held.get(socket);
    if (!entry?.lent) return start();
    const client = this.#clients.get(entry.client!)!;
    if (client.served.size < this.#o.perClient) {
      this.#takeBack(socket, entry, client);
      return start();
    }
    if (!this.#queue(client, { socket, since: performance.now(), request: { start, refuse } })) refuse();
  }

  /** A request began on `socket`. */
  busy(socket: Socket): void {
    const entry = this.#held.get(socket);
    if (entry) entry.active++;
  }

  /** Whether the answer being written on `socket` must close it: its client has connections waiting for a place. */
  retire(socket: Socket): boolean {
    const entry = this.#held.get(socket);
    if (!entry) return false;
    if (entry.retiring) return true;
    const client = entry.client === undefined ? undefined : this.#clients.get(entry.client);
    if (!client || client.retiring >= client.waiting.length) return false;
    entry.retiring = true;
    client.retiring++;
    this.#o.onWaiting?.("retired");
    return true;
  }

  idle(socket: Socket): void {
    const entry = this.#held.get(socket);
    if (!entry) return;
    entry.active = Math.max(0, entry.active - 1);
    entry.answered++;
    entry.idleSince = performance.now();
    entry.readAtIdle = socket.bytesRead;
    if (entry.client !== undefined) this.#clients.get(entry.client)!.answeredAt = entry.idleSince;
  }

  /** The listener closes: what waits is refused, nothing more is admitted. */
  shutdown(): void {
    this.#closed = true;
    clearInterval(this.#ticker);
    this.#ticker = undefined;
    for (const [key, client] of this.#clients) {
      for (const waiting of client.waiting.splice(0)) this.#refuse(waiting, "server");
      this.#drop(key, client);
    }
  }

  #client(key: string): Client {
    let client = this.#clients.get(key);
    if (!client) this.#clients.set(key, (client = { served: new Set(), lent: new Set(), waiting: [], retiring: 0, answeredAt: 0 }));
    return client;
  }

  /** Puts a connection or a held request on its client's waiting list; false when it may not wait. */
  #queue(client: Client, waiting: Waiting): boolean {
    if (this.#o.queueMs === 0 || client.waiting.length >= WAITING_PER_PLACE * this.#o.perClient) return false;
    client.waiting.push(waiting);
    if (waiting.request) this.#heldRequests++;
    else this.#waiting++;
    this.#o.onWaiting?.("queued");
    // Looked at after the event loop has read the sockets (setImmediate): bytes of a request that had
    // reached this process by then mark their connection as in use.
    this.#ticker ??= setInterval(() => setImmediate(() => this.#tick()), QUEUE_TICK_MS).unref();
    return true;
  }

  /** Takes `waiting` off its client's list (the caller has done so): no longer counted. */
  #leave(waiting: Waiting): Waiting {
    if (waiting.request) this.#heldRequests--;
    else this.#waiting--;
    return waiting;
  }

  #refuse(waiting: Waiting, reason: DropReason): void {
    if (waiting.request) waiting.request.refuse();
    else this.#o.refuse(waiting.socket, reason);
  }

  #admit(socket: Socket, key: string | undefined): void {
    this.#held.set(socket, { client: key, active: 0, answered: 0, idleSince: 0, readAtIdle: 0, retiring: false, lent: false });
    if (key !== undefined) this.#client(key).served.add(socket);
    socket.once("close", () => this.#forget(socket));
    this.#o.accept(socket);
  }

  /** A connection that gave way counts against its client again (a request of its own has the place). */
  #takeBack(socket: Socket, entry: Held, client: Client): void {
    entry.lent = false;
    client.lent.delete(socket);
    client.served.add(socket);
  }

  /** A connection is gone; its place goes to its client's oldest waiting connection unless the caller takes it. */
  #forget(socket: Socket, handOn = true): void {
    const entry = this.#held.get(socket);
    if (!entry) return;
    this.#held.delete(socket);
    if (entry.client === undefined) return;
    const client = this.#clients.get(entry.client)!;
    client.served.delete(socket);
    client.lent.delete(socket);
    if (entry.retiring) client.retiring--;
    // A request held on it is gone with it.
    this.#unqueue(entry.client, socket, false);
    if (handOn) this.#admitWaiting(entry.client, client);
    else this.#drop(entry.client, client);
  }

  #unqueue(key: string, socket: Socket, drop = true): void {
    const client = this.#clients.get(key);
    const index = client?.waiting.findIndex((waiting) => waiting.socket === socket) ?? -1;
    if (index < 0) return;
    this.#leave(client!.waiting.splice(index, 1)[0]!);
    if (drop) this.#drop(key, client!);
  }

  #admitWaiting(key: string, client: Client): void {
    while (client.served.size < this.#o.perClient && client.waiting.length > 0) {
      const { socket, request } = this.#leave(client.waiting.shift()!);
      if (!request) this.#admit(socket, key);
      else {
        this.#takeBack(socket, this.#held.get(socket)!, client);
        request.start();
      }
    }
    this.#drop(key, client);
  }

  /** Forgets a client that has nothing left here. */
  #drop(key: string, client: Client): void {
    if (client.served.size === 0 && client.lent.size === 0 && client.waiting.length === 0) this.#clients.delete(key);
  }

  /** What waits: admitted where a place is free or an idle connection of its client gives way, refused once its wait is over. */
  #tick(): void {
    if (this.#closed) return;
    const now = performance.now();
    for (const [key, client] of [...this.#clients]) {
      this.#admitWaiting(key, client);
      this.#giveWay(key, client, now);
      while (client.waiting.length > 0 && now - client.waiting[0]!.since >= this.#o.queueMs) {
        this.#o.onWaiting?.("expired");
        this.#refuse(this.#leave(client.waiting.shift()!), "client");
      }
      this.#drop(key, client);
    }
    if (this.#waiting + this.#heldRequests === 0) {
      clearInterval(this.#ticker);
      this.#ticker = undefined;
    }
  }

  /**
   * Once none of `client`'s connections has ended an answer for {@link GIVE_WAY_MS}, its idle connections
   * give way, the longest idle first, to what waits, as many as its connections in use will not make room
   * for (each closes after its answer while connections of its client wait).
   */
  #giveWay(key: string, client: Client, now: number): void {
    if (client.waiting.length === 0 || now - client.answeredAt < GIVE_WAY_MS) return;
    let due = client.waiting.length;
    const idle: Array<{ socket: Socket; since: number }> = [];
    for (const socket of client.served) {
      const entry = this.#held.get(socket)!;
      if (inUse(socket, entry)) due--;
      else if (entry.answered > 0) idle.push({ socket, since: entry.idleSince });
    }
    idle.sort((a, b) => a.since - b.since);
    for (const { socket } of idle.slice(0, Math.max(0, due))) {
      this.#o.onWaiting?.("yielded");
      this.#held.get(socket)!.lent = true;
      client.served.delete(socket);
      client.lent.add(socket);
    }
    // At most `perClient` given way: beyond, the longest idle of them is closed.
    while (client.lent.size > this.#o.perClient) {
      const oldest = this.#longestIdle(client.lent);
      if (!oldest) break;
      this.#closeIdle(oldest);
    }
    this.#admitWaiting(key, client);
  }

  /** Refuses the newest waiting connection (not a held request) of the client (other than `except`) with the most waiting; false when none waits. */
  #yieldWaiting(except: string | undefined): boolean {
    let most: [string, Client, number] | undefined;
    for (const [key, client] of this.#clients) {
      if (key === except) continue;
      const connections = client.waiting.filter((waiting) => !waiting.request).length;
      if (connections > (most?.[2] ?? 0)) most = [key, client, connections];
    }
    if (!most) return false;
    const waiting = most[1].waiting;
    const newest = waiting.findLastIndex((entry) => !entry.request);
    this.#refuse(this.#leave(waiting.splice(newest, 1)[0]!), "client");
    return true;
  }

  /** The connections of the client holding the most (every connection when no client is counted). */
  #greediest(): Iterable<Socket> {
    let most: Client | undefined;
    for (const client of this.#clients.values()) if (!most || client.served.size + client.lent.size > most.served.size + most.lent.size) most = client;
    return most && most.served.size + most.lent.size > 0 ? [...most.served, ...most.lent] : this.#held.keys();
  }

  /** The connection among `sockets` idle the longest (one that has answered a request and is not in use); undefined when none is. */
  #longestIdle(sockets: Iterable<Socket>): Socket | undefined {
    let longest: { socket: Socket; since: number } | undefined;
    for (const socket of sockets) {
      const entry = this.#held.get(socket);
      if (entry && entry.answered > 0 && !inUse(socket, entry) && entry.idleSince < (longest?.since ?? Infinity)) longest = { socket, since: entry.idleSince };
    }
    return longest?.socket;
  }

  /** Closes an idle connection gracefully; its place goes to the caller. */
  #closeIdle(socket: Socket): void {
    this.#forget(socket, false);
    this.#o.close(socket);
    this.#o.onIdleClosed?.();
  }
}

/**
 * Whether a connection is in use: a request in progress, asked to close after its answer, or bytes of a
 * request read since its last answer (a silent connection that never sent one is not).
 */
function inUse(socket: Socket, entry: Held): boolean {
  return entry.active > 0 || entry.retiring || socket.bytesRead !== entry.readAtIdle;
}
