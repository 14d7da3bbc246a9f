import { once } from "node:events";
import { Agent, request, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { expect } from "chai";
import { connectionCounts, createListener, listenOn } from "../../src/facilitator/http/listen.js";
import { silentLogger } from "../../src/facilitator/logger.js";
import { makePayment, startFacilitatorOnChain } from "../helpers/facilitator.js";
import { metric, scrapeMetric } from "../helpers/metrics.js";
import { closeAfter } from "../helpers/teardown.js";
import { waitUntil } from "../helpers/wait.js";

// Issue 39 item 8: a seller's pool bursting to 128 keep-alive connections held every place of its client
// (MAX_CONNECTIONS_PER_CLIENT 100) idle, and the same client's next connections each waited
// CONNECTION_QUEUE_MS (5 s) to be answered 503. An idle served connection now gives way to a waiting one
// of its client; one with a request in progress (or a request's bytes arriving) never does.

const SERIES = (event: string) => `x402_http_connections_waiting_total{listener="service",event="${event}"}`;

/** One POST through `agent` from `localAddress`; its status. */
function post(url: string, path: string, body: string, agent: Agent, localAddress: string): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path, method: "POST", agent, localAddress, headers: { "Content-Type": "application/json" } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("floods: a client's idle keep-alive connections give way to its new ones (issue 39 item 8)", function () {
  this.timeout(120_000);

  it("after a burst of 128 keep-alive connections (production caps), the same client's next 10 requests from another pool answer 200: none refused, none waited out CONNECTION_QUEUE_MS", async () => {
    const { chain, config, running } = await startFacilitatorOnChain({ MAX_CONNECTIONS_PER_CLIENT: "" });
    const burst = new Agent({ keepAlive: true, maxSockets: Infinity });
    const next = new Agent({ keepAlive: true, maxSockets: Infinity });
    try {
      expect(config.http).to.deep.include({ maxConnections: 1_000, maxConnectionsPerClient: 100, connectionQueueMs: 5_000 });
      const body = JSON.stringify((await makePayment(chain)).body);
      const verify = (agent: Agent) => post(running.url, "/v2/x402/verify", body, agent, "127.0.0.8");
      const scrape = async () => {
        const page = await (await fetch(running.metricsUrl!)).text();
        return {
          served: metric(page, 'x402_http_connections{listener="service",state="served"}'),
          gaveWay: metric(page, 'x402_http_connections{listener="service",state="yielded"}'),
          queued: metric(page, SERIES("queued")),
          yielded: metric(page, SERIES("yielded")),
          retired: metric(page, SERIES("retired")),
          expired: metric(page, SERIES("expired")),
          refused: metric(page, 'x402_http_connections_dropped_total{listener="service",reason="client"}'),
        };
      };

      // The burst: 128 requests at once, 128 sockets; 100 served, 28 waited while 28 served ones closed after their answer.
      const burstAnswers = await Promise.all(Array.from({ length: 128 }, () => verify(burst)));
      expect(burstAnswers.filter((status) => status === 200).length).to.equal(128);
      // Its pool keeps them open and idle: the client holds every one of its places.
      expect(await waitUntil(async () => (await scrape()).served === 100, 10_000)).to.equal(true);
      const before = await scrape();

      // The same client's next requests, from another pool (another worker of the seller): each opens a connection.
      const nextAnswers = await Promise.all(Array.from({ length: 10 }, () => verify(next)));
      const after = await scrape();
      expect(nextAnswers).to.deep.equal(Array(10).fill(200));
      expect(after.queued - before.queued).to.equal(10);
      // None waited out CONNECTION_QUEUE_MS: idle connections of the client gave way (and once answers
      // flowed again, the connections that had answered closed after their answer for the others).
      expect(after.expired - before.expired).to.equal(0);
      expect(after.yielded - before.yielded).to.be.at.least(1);
      expect(after.yielded - before.yielded + (after.retired - before.retired)).to.equal(10);
      expect(after.refused - before.refused).to.equal(0);
      // Served: the client's 100 places; the 10 connections that gave theirs stay open, idle, not counted.
      expect([after.served, after.gaveWay]).to.deep.equal([100, 10]);

      // The bursting pool dropped the connections that gave way and goes on with the others.
      const again = await Promise.all(Array.from({ length: 20 }, () => verify(burst)));
      expect(again).to.deep.equal(Array(20).fill(200));
    } finally {
      burst.destroy();
      next.destroy();
      await running.close(0);
    }
  });

  describe("on a listener of its own (CONNECTION_QUEUE_MS 3000)", () => {
    let server: Server | undefined;
    let url: string;
    /** Every request the handler was given, by path. */
    const handled: string[] = [];
    const events: string[] = [];

    /** Starts the listener with a cap of `perClient` per client. */
    const listen = async (perClient: number) => {
      server = createListener(
        (req, res) => {
          handled.push(req.url ?? "");
          // The whole body is read before the answer: a request whose body trickles is in progress until then.
          req.resume();
          req.on("end", () => res.writeHead(200, { "Content-Type": "text/plain" }).end("ok"));
        },
        {
          name: "service",
          limits: { requestTimeoutMs: 60_000, headersTimeoutMs: 30_000, maxConnections: 100, maxConnectionsPerClient: perClient, connectionQueueMs: 3_000 },
          logger: silentLogger,
          onWaiting: (event) => events.push(event),
          onDropped: (reason) => events.push(`dropped:${reason}`),
          onIdleClosed: () => events.push("idleClosed"),
        },
      );
      url = await listenOn(server, "127.0.0.1", 0);
      return server;
    };
    beforeEach(() => {
      handled.length = 0;
      events.length = 0;
    });
    afterEach(async () => {
      server?.closeAllConnections();
      await new Promise((resolve) => server?.close(resolve));
      server = undefined;
    });

    /** A raw connection from `localAddress`: everything it reads, whether the server ended its side or closed it. */
    const open = async (localAddress: string) => {
      const { hostname, port } = new URL(url);
      // Half-open allowed: after the server's FIN the client may still write (a request crossing it).
      const socket: Socket = connect({ host: hostname, port: Number(port), localAddress, allowHalfOpen: true });
      // Half-open, it stays open after the server's close: ended with the test.
      closeAfter(`raw connection from ${localAddress}`, () => void socket.destroy());
      const seen = { socket, text: "", ended: false, closed: false };
      socket.on("error", () => {});
      socket.on("data", (chunk: Buffer) => (seen.text += chunk.toString()));
      socket.once("end", () => (seen.ended = true));
      socket.once("close", () => (seen.closed = true));
      await once(socket, "connect");
      return seen;
    };
    type Seen = Awaited<ReturnType<typeof open>>;
    const answers = (text: string) => text.split("HTTP/1.1 ").length - 1;
    const full = (path: string) => `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi`;
    /** Sends a whole request on each and waits for its answer. */
    const ask = async (held: Seen[], path: string) => {
      const before = held.map((one) => answers(one.text));
      for (const one of held) one.socket.write(full(path));
      expect(await waitUntil(async () => held.every((one, index) => answers(one.text) === before[index]! + 1), 10_000)).to.equal(true);
    };

    it("an attacker's connections with requests in progress (a body trickling, a head half sent after an answer) never give way to its new ones: the cap holds, the new ones wait and are answered 503", async () => {
      const server = await listen(10);
      const attacker = "127.0.0.9";
      // Ten connections, each answered once and then busy: two send a request whose body never ends, eight half a request head.
      const busy = await Promise.all(Array.from({ length: 10 }, () => open(attacker)));
      await ask(busy, "/first");
      busy.forEach((held, index) =>
        held.socket.write(index < 2 ? "POST /slow-body HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npart" : "POST /slow-head HTTP/1.1\r\nHost: x\r\n"),
      );
      expect(await waitUntil(async () => handled.filter((path) => path === "/slow-body").length === 2, 10_000)).to.equal(true);

      // Five more, each with a whole request: they wait for a place (long past the time an idle connection would give way), and none is made.
      const extra = await Promise.all(Array.from({ length: 5 }, () => open(attacker)));
      for (const held of extra) held.socket.write(full("/extra"));
      expect(await waitUntil(async () => extra.every((held) => held.ended), 10_000)).to.equal(true);
      expect(extra.map((held) => held.text.split("\r\n")[0])).to.deep.equal(Array(5).fill("HTTP/1.1 503 Service Unavailable"));
      expect(extra.every((held) => held.text.endsWith('{"error":"Service unavailable: too many connections from this client; retry shortly"}'))).to.equal(true);
      // Answered after their wait: by then the busy ones had long been there, and not one was closed, answered again or given way.
      expect(busy.map((held) => [held.ended, held.closed, answers(held.text)])).to.deep.equal(Array(10).fill([false, false, 1]));
      expect(handled.filter((path) => path === "/extra")).to.deep.equal([]);
      expect([...events].sort()).to.deep.equal([...Array(5).fill("dropped:client"), ...Array(5).fill("expired"), ...Array(5).fill("queued")].sort());
      expect(connectionCounts(server)).to.deep.equal({ served: 10, yielded: 0, waiting: 0 });
    });

    it("an idle connection gives way without being closed: a request then sent on it waits for a place and is answered once one is free", async () => {
      const server = await listen(10);
      const client = "127.0.0.10";
      const idle = await Promise.all(Array.from({ length: 10 }, () => open(client)));
      await ask(idle, "/first");
      // An eleventh that sends nothing yet, then a twelfth with a request: the two longest idle give way to them.
      const silent = await open(client);
      expect(await waitUntil(async () => connectionCounts(server).waiting === 1, 10_000)).to.equal(true);
      const newcomer = await open(client);
      await ask([newcomer], "/newcomer");
      expect(events).to.deep.equal(["queued", "queued", "yielded", "yielded"]);
      expect([silent.text, connectionCounts(server)]).to.deep.equal(["", { served: 10, yielded: 2, waiting: 0 }]);
      // No connection was closed for it.
      expect(idle.map((held) => held.ended)).to.deep.equal(Array(10).fill(false));

      // Requests on all ten old connections at once: two of them gave their place, and their requests wait
      // for one (an answer closing its connection for them, or idle connections giving way again): every one
      // is answered, at most ten at a time, and a connection closed after its answer said so in it.
      await ask(idle, "/again");
      expect(handled.filter((path) => path === "/again").length).to.equal(10);
      const later = events.slice(4);
      expect([later.filter((event) => event === "queued").length, later.filter((event) => event === "retired" || event === "yielded").length, later.length]).to.deep.equal([2, 2, 4]);
      for (const held of idle.filter((one) => one.ended)) expect(held.text.slice(held.text.lastIndexOf("HTTP/1.1 "))).to.include("Connection: close");
    });

    it("a request on a connection that gave way, while its client's every place holds a request, waits and is answered 503 with Connection: close, never run", async () => {
      const server = await listen(2);
      const client = "127.0.0.11";
      const [first, second] = await Promise.all([open(client), open(client)]);
      await ask([first!, second!], "/first");
      const third = await open(client);
      await ask([third], "/third");
      // The longest idle (first) gave way to the third; second and third now each hold a request whose body never ends.
      expect(events).to.deep.equal(["queued", "yielded"]);
      for (const held of [second!, third]) held.socket.write("POST /slow-body HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npart");
      expect(await waitUntil(async () => handled.filter((path) => path === "/slow-body").length === 2, 10_000)).to.equal(true);
      first!.socket.write(full("/held"));
      expect(await waitUntil(async () => first!.ended, 10_000)).to.equal(true);
      expect(first!.text.slice(first!.text.lastIndexOf("HTTP/1.1 "))).to.match(
        /^HTTP\/1\.1 503 Service Unavailable\r\n[^]*Retry-After: 1\r\nConnection: close\r\n[^]*\{"error":"Service unavailable: too many connections from this client; retry shortly"\}$/,
      );
      expect(handled.filter((path) => path === "/held")).to.deep.equal([]);
      expect(events).to.deep.equal(["queued", "yielded", "queued", "expired", "dropped:client"]);
      // Closed after that answer: the client's two places, each holding a request, remain.
      expect(await waitUntil(async () => connectionCounts(server).served === 2, 10_000)).to.equal(true);
    });

    it("past its cap of connections that gave way, the longest idle of them is closed (FIN); a request crossing that close is read and never run", async () => {
      await listen(2);
      const client = "127.0.0.12";
      // The server's side of each connection, by the client's port.
      const serverSide = new Map<number, Socket>();
      server!.on("connection", (socket: Socket) => serverSide.set(socket.remotePort!, socket));
      const first = await Promise.all([open(client), open(client)]);
      // A client that sends a request just as the server's FIN comes: the request crosses it.
      for (const held of first) held.socket.once("end", () => held.socket.write(full("/crossing")));
      await ask(first, "/first");
      // Two more: both old ones give way (two given way: the cap). A fifth: one of those two gives way too, and
      // the longest idle of the three that gave way is closed.
      const second = await Promise.all([open(client), open(client)]);
      await ask(second, "/second");
      const fifth = await open(client);
      await ask([fifth], "/fifth");
      expect(events).to.deep.equal(["queued", "queued", "yielded", "yielded", "queued", "yielded", "idleClosed"]);
      const closed = first.filter((held) => held.ended);
      expect(closed.length).to.equal(1);
      // The server read the crossing request and closed the connection without running it or answering.
      const side = serverSide.get(closed[0]!.socket.localPort!)!;
      expect(await waitUntil(async () => side.destroyed && side.bytesRead === Buffer.byteLength(full("/first") + full("/crossing")), 10_000)).to.equal(true);
      expect(answers(closed[0]!.text)).to.equal(1);
      expect(handled).to.deep.equal(["/first", "/first", "/second", "/second", "/fifth"]);
    });
  });
});
