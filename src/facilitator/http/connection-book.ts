// A listener's connections by client: admitted, waiting for their client's place, or refused; idle ones closed to make room.
import { isIPv4, isIPv6, type Socket } from "node:net";

/** Why a connection was refused on arrival. */
export type DropReason = "server" | "client";

/** A client may have this many times its cap of connections waiting for a place (a pool churning through `Connection: close` opens more than it has requests in flight). */
const WAITING_PER_PLACE = 4;
/** How often waiting connections are looked at (a place freed, an idle connection to close, a wait over). */
const QUEUE_TICK_MS = 50;
/**
 * A connection of a client at its cap that has waited this long, while none of the client's connections
 * has ended an answer for as long, is given the place of one of its idle connections. Not sooner: a pool
 * sends its next request on a connection moments after the answer (a loaded one, hundreds of
 * milliseconds after), and a bursting pool sends on the connections it holds as it opens new ones (those
 * requests may reach this process after the new connections): a connection closed in that gap would fail
 * that request. While answers are being written, each closes its connection for a waiting one anyway.
 */
const GIVE_WAY_MS = 500;

/**
 * What happened to a connection over its client's cap: it waits for a place (`queued`), a served one of
 * its client was asked to close after its answer (`retired`) or, idle, was closed to make its place
 * (`yielded`), or it waited `queueMs` and was refused (`expired`).
 */
export type WaitingEvent = "queued" | "retired" | "yielded" | "expired";

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
}

interface Client {
  /** Its connections being served (admitted to the HTTP server). */
  served: Set<Socket>;
  /** Its connections waiting for a place, oldest first, with when they arrived. */
  waiting: Array<{ socket: Socket; since: number }>;
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
 * turn). When no answer has ended on the client's connections for {@link GIVE_WAY_MS}, its idle connections
 * give way: for each connection waiting as long that its connections in use (a request in progress or
 * arriving, or closing after its answer) will not make room for, its connection idle the longest is
 * closed and the waiting one takes its place, so a client never waits behind its own idle connections. A connection is
 * admitted as soon as its client has a place; one that waited `queueMs` is answered 503. Only a connection
 * with no request in progress, its answer written and not a byte of another request read since is ever
 * closed to make room, gracefully ({@link ConnectionBookOptions.close}); none is reset, and one that has
 * not sent a request is never closed (the headers time-out bounds it), so connections that each hold a
 * request keep their client at its cap. A client is an IPv4 address or an IPv6 /56 (what one subscriber
 * is usually given), so rotating addresses within one's own prefix gains nothing.
 */
export class ConnectionBook {
  readonly #held = new Map<Socket, Held>();
  readonly #clients = new Map<string, Client>();
  readonly #o: ConnectionBookOptions;
  readonly #nearCap: number;
  /** Connections waiting, all clients together. */
  #waiting = 0;
  #ticker: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: ConnectionBookOptions) {
    this.#o = options;
    this.#nearCap = Math.max(1, Math.floor(options.max * 0.9));
  }

  /** Connections held (served and waiting), and of them those being served for `client` (its group key, {@link clientOf}). */
  count(client?: string): number {
    return client === undefined ? this.#held.size + this.#waiting : (this.#clients.get(client)?.served.size ?? 0);
  }

  /** Connections waiting for a place, of `client` or of all. */
  waiting(client?: string): number {
    return client === undefined ? this.#waiting : (this.#clients.get(client)?.waiting.length ?? 0);
  }

  /** A new connection: admitted, made to wait, or refused. */
  arrive(socket: Socket): void {
    if (this.#closed) return this.#o.refuse(socket, "server");
    const address = socket.remoteAddress ?? "";
    const key = this.#o.perClient > 0 && !this.#o.isTrustedProxy(address) ? clientOf(address) : undefined;
    if (this.count() >= this.#nearCap) {
      const idle = this.#longestIdle(this.#greediest()) ?? (this.count() >= this.#o.max ? this.#longestIdle(this.#held.keys()) : undefined);
      if (idle) this.#closeIdle(idle, false);
      // Connections waiting over their client's cap never keep another client out: the newest of the client
      // with the most waiting gives way.
      if (this.count() >= this.#o.max && !this.#yieldWaiting(key)) return this.#o.refuse(socket, "server");
    }
    if (key === undefined) return this.#admit(socket, undefined);
    const client = this.#client(key);
    if (client.served.size < this.#o.perClient) return this.#admit(socket, key);
    // Not an idle connection of its own closed for it at once: its pool may be sending on that one at this
    // very moment (measured: a pool idle a while, then bursting, does), and that request would fail. The
    // queue's tick does it once this one has waited GIVE_WAY_MS.
    if (this.#o.queueMs === 0 || client.waiting.length >= WAITING_PER_PLACE * this.#o.perClient) return this.#o.refuse(socket, "client");
    client.waiting.push({ socket, since: performance.now() });
    this.#waiting++;
    this.#o.onWaiting?.("queued");
    socket.once("close", () => this.#unqueue(key, socket));
    // Looked at after the event loop has read the sockets (setImmediate): bytes of a request that had
    // reached this process by then mark their connection as not idle.
    this.#ticker ??= setInterval(() => setImmediate(() => this.#tick()), QUEUE_TICK_MS).unref();
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

  /** The listener closes: waiting connections are refused, nothing more is admitted. */
  shutdown(): void {
    this.#closed = true;
    clearInterval(this.#ticker);
    this.#ticker = undefined;
    for (const [key, client] of this.#clients) {
      for (const { socket } of client.waiting.splice(0)) {
        this.#waiting--;
        this.#o.refuse(socket, "server");
      }
      if (client.served.size === 0) this.#clients.delete(key);
    }
  }

  #client(key: string): Client {
    let client = this.#clients.get(key);
    if (!client) this.#clients.set(key, (client = { served: new Set(), waiting: [], retiring: 0, answeredAt: 0 }));
    return client;
  }

  #admit(socket: Socket, key: string | undefined): void {
    this.#held.set(socket, { client: key, active: 0, answered: 0, idleSince: 0, readAtIdle: 0, retiring: false });
    if (key !== undefined) this.#client(key).served.add(socket);
    socket.once("close", () => this.#forget(socket));
    this.#o.accept(socket);
  }

  /** A connection is gone; its place goes to its client's oldest waiting connection unless the caller takes it. */
  #forget(socket: Socket, handOn = true): void {
    const entry = this.#held.get(socket);
    if (!entry) return;
    this.#held.delete(socket);
    if (entry.client === undefined) return;
    const client = this.#clients.get(entry.client)!;
    client.served.delete(socket);
    if (entry.retiring) client.retiring--;
    if (handOn) this.#admitWaiting(entry.client, client);
    else this.#drop(entry.client, client);
  }

  #unqueue(key: string, socket: Socket): void {
    const client = this.#clients.get(key);
    const index = client?.waiting.findIndex((waiting) => waiting.socket === socket) ?? -1;
    if (index < 0) return;
    client!.waiting.splice(index, 1);
    this.#waiting--;
    this.#drop(key, client!);
  }

  #admitWaiting(key: string, client: Client): void {
    while (client.served.size < this.#o.perClient && client.waiting.length > 0) {
      const { socket } = client.waiting.shift()!;
      this.#waiting--;
      this.#admit(socket, key);
    }
    this.#drop(key, client);
  }

  /** Forgets a client that has nothing left here. */
  #drop(key: string, client: Client): void {
    if (client.served.size === 0 && client.waiting.length === 0) this.#clients.delete(key);
  }

  /** Waiting connections: admitted where a place is free or an idle connection of their client gives way, refused once their wait is over. */
  #tick(): void {
    if (this.#closed) return;
    const now = performance.now();
    for (const [key, client] of [...this.#clients]) {
      this.#admitWaiting(key, client);
      this.#giveWay(client, now);
      while (client.waiting.length > 0 && now - client.waiting[0]!.since >= this.#o.queueMs) {
        const { socket } = client.waiting.shift()!;
        this.#waiting--;
        this.#o.onWaiting?.("expired");
        this.#o.refuse(socket, "client");
      }
      this.#drop(key, client);
    }
    if (this.#waiting === 0) {
      clearInterval(this.#ticker);
      this.#ticker = undefined;
    }
  }

  /** Refuses the newest waiting connection of the client (other than `except`) with the most waiting; false when none waits. */
  #yieldWaiting(except: string | undefined): boolean {
    let most: [string, Client] | undefined;
    for (const entry of this.#clients) if (entry[0] !== except && entry[1].waiting.length > (most?.[1].waiting.length ?? 0)) most = entry;
    if (!most) return false;
    const { socket } = most[1].waiting.pop()!;
    this.#waiting--;
    this.#o.refuse(socket, "client");
    return true;
  }

  /** The connections of the client holding the most (every connection when no client is counted). */
  #greediest(): Iterable<Socket> {
    let most: Set<Socket> | undefined;
    for (const client of this.#clients.values()) if (!most || client.served.size > most.size) most = client.served;
    return most && most.size > 0 ? most : this.#held.keys();
  }

  /**
   * Closes idle connections of `client`, the longest idle first, for its connections that have waited
   * {@link GIVE_WAY_MS} while none of its connections ended an answer, as many as its connections in use
   * will not make room for (each closes after its answer while connections of its client wait).
   */
  #giveWay(client: Client, now: number): void {
    if (now - client.answeredAt < GIVE_WAY_MS) return;
    let due = 0;
    while (due < client.waiting.length && now - client.waiting[due]!.since >= GIVE_WAY_MS) due++;
    if (due === 0) return;
    const idle: Array<{ socket: Socket; since: number }> = [];
    for (const socket of client.served) {
      const entry = this.#held.get(socket)!;
      if (inUse(socket, entry)) due--;
      else if (entry.answered > 0) idle.push({ socket, since: entry.idleSince });
    }
    idle.sort((a, b) => a.since - b.since);
    for (const { socket } of idle.slice(0, Math.max(0, due))) {
      this.#o.onWaiting?.("yielded");
      this.#closeIdle(socket, true);
    }
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

  /** Closes an idle connection gracefully; its place goes to its client's oldest waiting connection (`handOn`) or to the caller. */
  #closeIdle(socket: Socket, handOn: boolean): void {
    this.#forget(socket, handOn);
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
