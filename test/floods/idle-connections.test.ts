import { once } from "node:events";
import { Agent, request, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { expect } from "chai";
import { connectionCounts, createListener, listenOn } from "../../src/facilitator/http/listen.js";
import { silentLogger } from "../../src/facilitator/logger.js";
import { makePayment, startFacilitatorOnChain } from "../helpers/facilitator.js";
import { metric, scrapeMetric } from "../helpers/metrics.js";
import { waitUntil } from "../helpers/time.js";

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
      expect(after.served).to.equal(100);

      // The bursting pool dropped the connections that gave way and goes on with the others.
      const again = await Promise.all(Array.from({ length: 20 }, () => verify(burst)));
      expect(again).to.deep.equal(Array(20).fill(200));
    } finally {
      burst.destroy();
      next.destroy();
      await running.close(0);
    }
  });

  describe("on a listener of its own (cap 10 per client, CONNECTION_QUEUE_MS 1500)", () => {
    let server: Server;
    let url: string;
    /** Every request the handler was given, by path. */
    const handled: string[] = [];
    const events: string[] = [];

    beforeEach(async () => {
      handled.length = 0;
      events.length = 0;
      server = createListener(
        (req, res) => {
          handled.push(req.url ?? "");
          // The whole body is read before the answer: a request whose body trickles is in progress until then.
          req.resume();
          req.on("end", () => res.writeHead(200, { "Content-Type": "text/plain" }).end("ok"));
        },
        {
          name: "service",
          limits: { requestTimeoutMs: 60_000, headersTimeoutMs: 30_000, maxConnections: 100, maxConnectionsPerClient: 10, connectionQueueMs: 1_500 },
          logger: silentLogger,
          onWaiting: (event) => events.push(event),
          onDropped: (reason) => events.push(`dropped:${reason}`),
        },
      );
      url = await listenOn(server, "127.0.0.1", 0);
    });
    afterEach(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });

    /** A raw connection from `localAddress`: everything it reads, whether the server ended its side or closed it. */
    const open = async (localAddress: string) => {
      const { hostname, port } = new URL(url);
      // Half-open allowed: after the server's FIN the client may still write (a request crossing it).
      const socket: Socket = connect({ host: hostname, port: Number(port), localAddress, allowHalfOpen: true });
      const seen = { socket, text: "", ended: false, closed: false };
      socket.on("error", () => {});
      socket.on("data", (chunk: Buffer) => (seen.text += chunk.toString()));
      socket.once("end", () => (seen.ended = true));
      socket.once("close", () => (seen.closed = true));
      await once(socket, "connect");
      return seen;
    };
    const answers = (text: string) => text.split("HTTP/1.1 ").length - 1;
    const full = (path: string) => `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi`;

    it("an attacker's connections with requests in progress (a body trickling, a head half sent after an answer) are never closed for its new ones: the cap holds, the new ones wait and are answered 503", async () => {
      const attacker = "127.0.0.9";
      // Ten connections, each answered once and then busy: two send a request whose body never ends, eight half a request head.
      const busy = await Promise.all(Array.from({ length: 10 }, () => open(attacker)));
      for (const held of busy) held.socket.write(full("/first"));
      expect(await waitUntil(async () => busy.every((held) => answers(held.text) === 1), 10_000)).to.equal(true);
      busy.forEach((held, index) =>
        held.socket.write(index < 2 ? "POST /slow-body HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npart" : "POST /slow-head HTTP/1.1\r\nHost: x\r\n"),
      );
      expect(await waitUntil(async () => handled.filter((path) => path === "/slow-body").length === 2, 10_000)).to.equal(true);

      // Five more, each with a whole request: they wait for a place (past the time an idle connection would give way), and none is made.
      const extra = await Promise.all(Array.from({ length: 5 }, () => open(attacker)));
      for (const held of extra) held.socket.write(full("/extra"));
      expect(await waitUntil(async () => extra.every((held) => held.ended), 10_000)).to.equal(true);
      expect(extra.map((held) => held.text.split("\r\n")[0])).to.deep.equal(Array(5).fill("HTTP/1.1 503 Service Unavailable"));
      expect(extra.every((held) => held.text.endsWith('{"error":"Service unavailable: too many connections from this client; retry shortly"}'))).to.equal(true);
      // Answered after their wait: by then the busy ones had long been there, and not one was closed or answered again.
      expect(busy.map((held) => [held.ended, held.closed, answers(held.text)])).to.deep.equal(Array(10).fill([false, false, 1]));
      expect(handled.filter((path) => path === "/extra")).to.deep.equal([]);
      expect([...events].sort()).to.deep.equal([...Array(5).fill("dropped:client"), ...Array(5).fill("expired"), ...Array(5).fill("queued")].sort());
      expect(connectionCounts(server)).to.deep.equal({ served: 10, waiting: 0 });
    });

    it("a request crossing the server's close of an idle connection is read and never run: the connection is closed unanswered", async () => {
      const client = "127.0.0.10";
      // The server's side of each connection, by the client's port.
      const serverSide = new Map<number, Socket>();
      server.on("connection", (socket: Socket) => serverSide.set(socket.remotePort!, socket));
      const idle = await Promise.all(Array.from({ length: 10 }, () => open(client)));
      // A client that sent a request just as the server's FIN came: the request crosses it.
      for (const held of idle) held.socket.once("end", () => held.socket.write(full("/crossing")));
      for (const held of idle) held.socket.write(full("/first"));
      expect(await waitUntil(async () => idle.every((held) => answers(held.text) === 1), 10_000)).to.equal(true);
      // An eleventh: the longest idle gives way to it (the server ends its side: FIN, no reset).
      const newcomer = await open(client);
      newcomer.socket.write(full("/newcomer"));
      expect(await waitUntil(async () => answers(newcomer.text) === 1, 10_000)).to.equal(true);
      const gaveWay = idle.filter((held) => held.ended);
      expect(gaveWay.length).to.equal(1);
      expect(events).to.deep.equal(["queued", "yielded"]);
      // The server read the crossing request and closed the connection without running it or answering.
      const side = serverSide.get(gaveWay[0]!.socket.localPort!)!;
      expect(await waitUntil(async () => side.destroyed && side.bytesRead === Buffer.byteLength(full("/first") + full("/crossing")), 10_000)).to.equal(true);
      expect(answers(gaveWay[0]!.text)).to.equal(1);
      expect(handled.filter((path) => path !== "/first")).to.deep.equal(["/newcomer"]);
    });
  });
});
