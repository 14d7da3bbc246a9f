import { once } from "node:events";
import { connect, createServer, type Server, type Socket } from "node:net";
import { closeAfter, once as onlyOnce } from "./teardown.js";

// Helpers only: importing this file runs nothing.

/** A message the server sent: on which proxied connection (1, 2, …), its type, the how-manieth of that type on that connection. */
export interface ServerMessage {
  connection: number;
  /** The message type: `R` authentication, `Z` ReadyForQuery (the first one ends the start-up), `C` command complete, … */
  type: string;
  count: number;
  /** A ReadyForQuery's transaction status: `I` idle, `T` in a transaction, `E` in a failed transaction. */
  status?: "I" | "T" | "E";
}

/** A TCP proxy in front of a PostgreSQL server that can end connections as a server shutting down does. */
export interface PgFaultProxy {
  /** `url` with the proxy's port. */
  url: string;
  /** Connections opened through the proxy so far. */
  connections(): number;
  /**
   * Arms a fault: the first server message matching `when` is delivered in one write together with the
   * FATAL 57P01 a shutting-down server sends, and that connection is closed. A client reads both in one
   * chunk, as a busy process does with a server that stopped just after answering. Resolves once fired.
   */
  killAfter(when: (message: ServerMessage) => boolean): Promise<ServerMessage>;
  /** Ends every open connection now with FATAL 57P01 (what a fast shutdown does to idle sessions). */
  killAll(): void;
  /**
   * Freezes the database as SIGSTOP does: nothing more is read from either side (what clients send waits
   * in their sockets; a client that resets its connection meanwhile loses what it sent, as a stopped
   * server's kernel drops it), and new connections are taken but not answered, until {@link thaw}.
   */
  freeze(): void;
  /** Lets everything held by {@link freeze} through, in order. */
  thaw(): void;
  close(): Promise<void>;
}

/** The ErrorResponse PostgreSQL sends to its sessions on a fast shutdown. */
export function adminShutdownMessage(): Buffer {
  const field = (code: string, value: string) => Buffer.from(`${code}${value}\0`, "utf8");
  const body = Buffer.concat([
    field("S", "FATAL"),
    field("V", "FATAL"),
    field("C", "57P01"),
    field("M", "terminating connection due to administrator command"),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(5);
  head.write("E", 0, "latin1");
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

/**
 * Starts a proxy to the PostgreSQL at `url`. It frames what the server sends (every server message is a
 * type byte and a length; the kit's clients ask for no TLS), so it can cut a connection right after a
 * chosen message.
 */
export async function startPgFaultProxy(url: string): Promise<PgFaultProxy> {
  const target = new URL(url);
  const traps: Array<{ when: (message: ServerMessage) => boolean; fired: (message: ServerMessage) => void }> = [];
  const open = new Set<{ client: Socket; upstream: Socket }>();
  let opened = 0;

  let frozen = false;
  const held: Array<{ client: Socket; release: () => void }> = [];

  const server: Server = createServer((client) => {
    if (frozen) {
      // A stopped server's kernel completes the handshake; the server answers nothing until it runs again.
      client.pause();
      client.on("error", () => client.destroy());
      held.push({
        client,
        release: () => {
          if (client.destroyed) return;
          proxy(client);
          client.resume();
        },
      });
      return;
    }
    proxy(client);
  });

  const proxy = (client: Socket) => {
    const connection = ++opened;
    const upstream = connect(Number(target.port), target.hostname);
    const pair = { client, upstream };
    open.add(pair);
    if (frozen) upstream.pause();
    let buffered = Buffer.alloc(0);
    const counts = new Map<string, number>();
    let cut = false;
    const end = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("data", (chunk: Buffer) => void (cut || upstream.write(chunk)));
    client.on("error", end);
    client.on("close", end);
    upstream.on("error", end);
    upstream.on("close", end);
    upstream.on("data", (chunk: Buffer) => {
      if (cut) return;
      buffered = Buffer.concat([buffered, chunk]);
      let offset = 0;
      while (buffered.length - offset >= 5) {
        const length = buffered.readInt32BE(offset + 1);
        if (buffered.length - offset < 1 + length) break;
        const type = String.fromCharCode(buffered[offset]!);
        offset += 1 + length;
        counts.set(type, (counts.get(type) ?? 0) + 1);
        const message: ServerMessage = { connection, type, count: counts.get(type)! };
        if (type === "Z") message.status = String.fromCharCode(buffered[offset - 1]!) as ServerMessage["status"];
        const trap = traps.findIndex((t) => t.when(message));
        if (trap === -1) continue;
        const [{ fired }] = traps.splice(trap, 1) as [(typeof traps)[number]];
        // Everything up to this message, then the FATAL, in one write; then the connection is gone.
        cut = true;
        open.delete(pair);
        upstream.destroy();
        client.end(Buffer.concat([buffered.subarray(0, offset), adminShutdownMessage()]));
        fired(message);
        return;
      }
      if (offset > 0) client.write(buffered.subarray(0, offset));
      buffered = buffered.subarray(offset);
    });
  };
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  const proxied = new URL(url);
  proxied.hostname = "127.0.0.1";
  proxied.port = String(port);

  return {
    url: proxied.toString(),
    connections: () => opened,
    killAfter(when) {
      return new Promise((resolve) => traps.push({ when, fired: resolve }));
    },
    freeze() {
      frozen = true;
      for (const pair of open) {
        pair.client.pause();
        pair.upstream.pause();
      }
    },
    thaw() {
      frozen = false;
      for (const pair of open) {
        pair.client.resume();
        pair.upstream.resume();
      }
      for (const { release } of held.splice(0)) release();
    },
    killAll() {
      for (const pair of [...open]) {
        open.delete(pair);
        pair.upstream.destroy();
        pair.client.end(adminShutdownMessage());
      }
    },
    close: closeAfter(
      `PostgreSQL fault proxy on port ${port}`,
      onlyOnce(async () => {
        frozen = false;
        for (const { client } of held.splice(0)) client.destroy();
        for (const pair of [...open]) {
          pair.client.destroy();
          pair.upstream.destroy();
        }
        open.clear();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }),
    ),
  };
}
