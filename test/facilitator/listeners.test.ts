import { once } from "node:events";
import { get, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { connect, type Socket } from "node:net";
import { expect } from "chai";
import { custom } from "viem";
import { clientOf } from "../../src/facilitator/http/client-key.js";
import { StartupError } from "../../src/facilitator/startup-error.js";
import { makePayment, recordingLogger, startFacilitatorOnChain } from "../helpers/facilitator.js";
import { occupyPort } from "../helpers/http.js";
import { metric } from "../helpers/metrics.js";
import { withoutAutomine } from "../helpers/mining.js";
import { rejection } from "../helpers/reject.js";
import { eventually, waitUntil } from "../helpers/wait.js";

type Started = Awaited<ReturnType<typeof startFacilitatorOnChain>>;

/** What a raw TCP client saw until the server closed the connection (or `giveUpMs` passed: then it saw no close). */
interface RawExchange {
  text: string;
}

/** Connects to `url`'s host and port, lets `drive` write (slowly, say), and collects all until close. */
async function rawExchange(url: string, drive: (socket: Socket) => void, giveUpMs = 30_000): Promise<RawExchange> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  // A connection the server drops may fail before or after "connect": what counts is what arrived.
  socket.on("error", () => {});
  let text = "";
  socket.on("data", (chunk: Buffer) => (text += chunk.toString()));
  // Not events.once: it rejects on "error".
  const closed = new Promise((resolve) => socket.once("close", resolve));
  socket.once("connect", () => drive(socket));
  // A deadline, not a wait: a server that never closes leaves `text` without its answer, which fails the test.
  const giveUp = setTimeout(() => socket.destroy(), giveUpMs);
  await closed;
  clearTimeout(giveUp);
  return { text };
}

/** Bytes a {@link trickle} wrote, of how many. */
interface Trickled {
  sent: number;
  of: number;
}

/** Writes `bytes` one at a time, one every `everyMs` (a slow client: the delay is the fault), until the socket closes. */
function trickle(socket: Socket, bytes: string, everyMs: number, trickled: Trickled = { sent: 0, of: 0 }): Trickled {
  trickled.of = bytes.length;
  const timer = setInterval(() => {
    if (trickled.sent >= bytes.length || socket.destroyed) clearInterval(timer);
    else socket.write(bytes[trickled.sent++]!);
  }, everyMs);
  socket.on("close", () => clearInterval(timer));
  return trickled;
}

/** GET over a connection of its own, closed after the answer (fetch would keep it open). */
function getOnce(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    get(url, { agent: false }, (res) => {
      let body = "";
      res.on("data", (chunk: Buffer) => (body += chunk.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    }).on("error", reject);
  });
}

/** One request on its own connection from `localAddress` (any 127.x.y.z is this machine on Linux): another client. */
function requestFrom(localAddress: string, url: string, body?: unknown): Promise<{ status: number; body: string; headers: IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url,
      { agent: false, localAddress, method: body === undefined ? "GET" : "POST", headers: body === undefined ? {} : { "Content-Type": "application/json" } },
      (res) => {
        let text = "";
        res.on("data", (chunk: Buffer) => (text += chunk.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }));
      },
    );
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** A keep-alive connection from `localAddress` that asks `path` once and stays open; `answered` once a full answer arrived, `closed` when the server closed it. */
interface HeldSocket {
  socket: Socket;
  /** Everything it read. */
  text: string;
  answered: boolean;
  closed: boolean;
  settled: Promise<void>;
}

function holdConnection(url: string, localAddress: string, path: string): HeldSocket {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port), localAddress });
  const held: HeldSocket = { socket, text: "", answered: false, closed: false, settled: Promise.resolve() };
  socket.on("error", () => {});
  held.settled = new Promise((resolve) => {
    socket.on("data", (chunk: Buffer) => {
      held.text += chunk.toString();
      // The body of /v2/x402/supported (or a refusal) ends its JSON object: the whole answer is in.
      if (/\r\n\r\n\{.*\}$/s.test(held.text)) {
        held.answered = true;
        resolve();
      }
    });
    socket.once("close", () => {
      held.closed = true;
      resolve();
    });
  });
  socket.once("connect", () => socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`));
  return held;
}

/** What a connection refused on arrival reads (503 JSON, `Connection: close`), before it is closed. */
const refusedWith = (error: string) => {
  const body = JSON.stringify({ error });
  return `HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${body.length}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n${body}`;
};
const SERVER_FULL = refusedWith("Service unavailable: too many connections; retry shortly");
const CLIENT_FULL = refusedWith("Service unavailable: too many connections from this client; retry shortly");

const TIMED_OUT = 'HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 27\r\nConnection: close\r\n\r\n{"error":"Request timeout"}';

describe("facilitator listeners: slow clients", () => {
  describe("HEADERS_TIMEOUT_MS (500 ms; REQUEST_TIMEOUT_MS 60 s)", () => {
    let started: Started;
    const log = recordingLogger();
    before(async () => {
      started = await startFacilitatorOnChain({ HEADERS_TIMEOUT_MS: "500", REQUEST_TIMEOUT_MS: "60000" }, { logger: log.logger });
    });
    after(() => started.running.close(0));

    it("answers headers trickled one byte every 100 ms with 408 JSON and closes, long before the request time-out", async () => {
      const trickled: Trickled = { sent: 0, of: 0 };
      const exchange = await rawExchange(started.running.url, (socket) => trickle(socket, "POST /v2/x402/verify HTTP/1.1\r\nHost: x\r\nX-Slow: " + "a".repeat(500), 100, trickled));
      expect(exchange.text).to.equal(TIMED_OUT);
      // Cut short: closed while the headers were still coming, by the headers time-out (the log's code).
      expect(trickled.sent).to.be.below(trickled.of);
      expect(log.lines.some((l) => l.message === "request refused before it was read" && l.fields.status === 408 && l.fields.code === "ERR_HTTP_REQUEST_TIMEOUT" && l.fields.listener === "service")).to.equal(true);
    });

    it("closes a connection that sends nothing at all with 408 after the headers time-out", async () => {
      const exchange = await rawExchange(started.running.url, () => {});
      expect(exchange.text).to.equal(TIMED_OUT);
    });
  });

  describe("REQUEST_TIMEOUT_MS (1 s)", () => {
    let started: Started;
    before(async () => {
      started = await startFacilitatorOnChain({ HEADERS_TIMEOUT_MS: "500", REQUEST_TIMEOUT_MS: "1000" });
    });
    after(() => started.running.close(0));

    it("answers a body trickled one byte every 100 ms with 408 JSON and closes within the time-out", async () => {
      const body = JSON.stringify({ x402Version: 1, paymentHeader: "x".repeat(300) });
      const trickled: Trickled = { sent: 0, of: 0 };
      const exchange = await rawExchange(started.running.url, (socket) => {
        socket.write(`POST /v2/x402/verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
        trickle(socket, body, 100, trickled);
      });
      // The headers came whole at once: the 408 is the request time-out's, before the body (33 s of it) was in.
      expect(exchange.text).to.equal(TIMED_OUT);
      expect(trickled.sent).to.be.below(trickled.of);
    });

    it("still answers a settle that waits for its receipt longer than the request time-out", async () => {
      const { chain, running } = started;
      const provider = chain.connection.provider;
      await withoutAutomine(provider, async () => {
        const payment = await makePayment(chain);
        const settling = fetch(`${running.url}/v2/x402/settle`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(payment.body) });
        const pending = async () => ((await provider.request({ method: "eth_getBlockByNumber", params: ["pending", false] })) as { transactions: string[] }).transactions.length;
        await waitUntil("the settlement in the pool", async () => (await pending()) === 1);
        // Node's request time-out is wall-clock time: a request begun after the settle's, whose body never
        // comes, is answered 408 once it has passed; the settle, waiting for a block, has then waited longer.
        const later = await rawExchange(running.url, (socket) => socket.write("POST /v2/x402/verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{"));
        expect(later.text).to.equal(TIMED_OUT);
        expect(await pending(), "the settlement still unmined").to.equal(1);
        await provider.request({ method: "evm_mine", params: [] });
        const answer = await settling;
        expect(answer.status).to.equal(200);
        expect(((await answer.json()) as { event: string }).event).to.equal("payment.settled");
      });
    });
  });

  describe("MAX_CONNECTIONS (2)", () => {
    it("answers a third connection 503 JSON with Connection: close on arrival (never a reset), counts and logs it, and serves again once one closes", async () => {
      const log = recordingLogger();
      const { running } = await startFacilitatorOnChain({ MAX_CONNECTIONS: "2" }, { logger: log.logger });
      const { hostname, port } = new URL(running.url);
      const held = [connect(Number(port), hostname), connect(Number(port), hostname)];
      try {
        await Promise.all(held.map((socket) => once(socket, "connect")));
        const third = await rawExchange(running.url, (socket) => socket.write("GET /v2/x402/supported HTTP/1.1\r\nHost: x\r\n\r\n"), 10_000);
        expect(third.text).to.equal(SERVER_FULL);
        const metrics = await getOnce(running.metricsUrl!);
        expect(metrics.body).to.include('x402_http_connections_dropped_total{listener="service",reason="server"} 1');
        expect(log.lines.filter((l) => l.message === "connections refused on arrival (503): MAX_CONNECTIONS are open").map((l) => l.fields)).to.deep.equal([
          { listener: "service", maxConnections: 2, refused: 1 },
        ]);
        held[0]!.destroy();
        // The server learns of the close asynchronously: ask until it has room again.
        const answer = await eventually(async () => {
          const { status } = await getOnce(`${running.url}/v2/x402/supported`);
          expect(status).to.equal(200);
          return status;
        }, "room for a new connection once one closed");
        expect(answer).to.equal(200);
      } finally {
        held.forEach((socket) => socket.destroy());
        await running.close(0);
      }
    });
  });
});

describe("facilitator listeners: connection fairness", () => {
  it("one client holding 1,000 keep-alive connections gets MAX_CONNECTIONS_PER_CLIENT (default 100) of them served, and at most as many more open that gave their place; another client keeps being served", async function () {
    this.timeout(60_000);
    const log = recordingLogger();
    // Production defaults for the caps (MAX_CONNECTIONS 1000, 100 per client); no quota on the reads, so every held connection is answered 200.
    const { chain, running } = await startFacilitatorOnChain({ MAX_CONNECTIONS_PER_CLIENT: "", RATE_LIMIT_PUBLIC_PER_MINUTE: "0" }, { logger: log.logger });
    const flood: HeldSocket[] = [];
    const connections = async (state: string) => metric((await getOnce(running.metricsUrl!)).body, `x402_http_connections{listener="service",state="${state}"}`);
    try {
      for (let i = 0; i < 1_000; i++) flood.push(holdConnection(running.url, "127.0.0.2", "/v2/x402/supported"));
      await Promise.all(flood.map((held) => held.settled));
      // Whatever the order of arrival, the flooding client ends up with exactly its cap served; those beyond were
      // answered 503, or waited and were served once an idle connection of theirs gave way. A connection that gave
      // its place stays open, uncounted (closing it could lose a request already on the wire), up to the cap more.
      expect(await waitUntil(async () => (await connections("served")) === 100 && (await connections("waiting")) === 0, 10_000)).to.equal(true);
      const yielded = await connections("yielded");
      expect(yielded).to.be.within(0, 100);
      expect(await waitUntil(async () => flood.filter((held) => !held.closed).length === 100 + yielded, 10_000)).to.equal(true);
      const open = flood.filter((held) => !held.closed);
      expect(open.every((held) => held.answered && held.text.startsWith("HTTP/1.1 200 OK"))).to.equal(true);
      const refusedAnswers = flood.filter((held) => held.text.startsWith("HTTP/1.1 503"));
      expect(refusedAnswers.every((held) => held.text === CLIENT_FULL)).to.equal(true);

      // Meanwhile, from another address: the healthcheck and a verify.
      const health = await requestFrom("127.0.0.3", `${running.url}/healthcheck`);
      expect(health.status).to.equal(200);
      const payment = await makePayment(chain);
      const verify = await requestFrom("127.0.0.3", `${running.url}/v2/x402/verify`, payment.body);
      expect([verify.status, JSON.parse(verify.body).isValid]).to.deep.equal([200, true]);
      expect(flood.filter((held) => !held.closed).length).to.equal(100 + yielded);

      // Each of the others was answered 503 or, once served, gave its place to a newer one of the same client (and is still open, or was closed).
      const scrape = (await getOnce(running.metricsUrl!)).body;
      const refused = metric(scrape, 'x402_http_connections_dropped_total{listener="service",reason="client"}');
      const idleClosed = metric(scrape, 'x402_http_idle_connections_closed_total{listener="service"}');
      // Gave its place: asked to close with its answer (Connection: close) while others waited, or, idle, closed as one past the cap of connections that gave theirs.
      const retired = metric(scrape, 'x402_http_connections_waiting_total{listener="service",event="retired"}');
      expect(refused + idleClosed + retired + yielded).to.equal(900);
      expect(refused).to.equal(refusedAnswers.length);
      expect(metric(scrape, 'x402_http_connections_dropped_total{listener="service",reason="server"}')).to.equal(0);
      // Those that arrived while four times the cap were waiting (how many depends on how fast the others were
      // served): logged once, at the first; not at all when none was refused.
      expect(log.lines.filter((l) => l.message === "connections refused on arrival (503): their client holds MAX_CONNECTIONS_PER_CLIENT and four times as many waiting").map((l) => l.fields)).to.deep.equal(
        refused > 0 ? [{ listener: "service", maxConnectionsPerClient: 100, refused: 1 }] : [],
      );
    } finally {
      flood.forEach((held) => held.socket.destroy());
      await running.close(0);
    }
  });

  it("near MAX_CONNECTIONS (9 of 10 open), an idle keep-alive connection is closed to make room for a new client's", async () => {
    const { running } = await startFacilitatorOnChain({ MAX_CONNECTIONS: "10", MAX_CONNECTIONS_PER_CLIENT: "0" });
    const { hostname, port } = new URL(running.url);
    // Nine connections that have each been answered once and stay open, idle.
    const idle = Array.from({ length: 9 }, () => holdConnection(running.url, "127.0.0.2", "/v2/x402/supported"));
    try {
      await Promise.all(idle.map((held) => held.settled));
      expect(idle.filter((held) => held.answered && !held.closed).length).to.equal(9);
      const other = await requestFrom("127.0.0.3", `${running.url}/healthcheck`);
      expect(other.status).to.equal(200);
      // Exactly one idle connection gave way (the server closed it), the others are still open, after a later answer.
      await waitUntil("an idle connection closed", () => idle.some((held) => held.closed));
      const scrape = (await getOnce(running.metricsUrl!)).body;
      expect(metric(scrape, 'x402_http_idle_connections_closed_total{listener="service"}')).to.equal(1);
      expect(idle.filter((held) => held.closed).length).to.equal(1);
      // Connections that have not yet sent a request are never closed to make room: with ten of them, an eleventh is refused.
      idle.forEach((held) => held.socket.destroy());
      const fresh = Array.from({ length: 10 }, () => connect(Number(port), hostname));
      await Promise.all(fresh.map((socket) => once(socket, "connect")));
      // The server holds exactly those ten (the idle ones' closes seen, the new ones admitted).
      await waitUntil(async () => metric((await getOnce(running.metricsUrl!)).body, 'x402_http_connections{listener="service",state="served"}') === 10);
      const eleventh = await rawExchange(running.url, (socket) => socket.write("GET /v2/x402/supported HTTP/1.1\r\nHost: x\r\n\r\n"), 10_000);
      expect(eleventh.text).to.equal(SERVER_FULL);
      fresh.forEach((socket) => socket.destroy());
    } finally {
      idle.forEach((held) => held.socket.destroy());
      await running.close(0);
    }
  });

  it("the connections of a trusted proxy (TRUST_PROXY) are not capped per client", async () => {
    const { running } = await startFacilitatorOnChain({ MAX_CONNECTIONS_PER_CLIENT: "5", TRUST_PROXY: "127.0.0.2" });
    const viaProxy = Array.from({ length: 20 }, () => holdConnection(running.url, "127.0.0.2", "/v2/x402/supported"));
    const direct = Array.from({ length: 20 }, () => holdConnection(running.url, "127.0.0.4", "/v2/x402/supported"));
    try {
      await Promise.all([...viaProxy, ...direct].map((held) => held.settled));
      expect(viaProxy.filter((held) => held.answered && !held.closed).length).to.equal(20);
      expect(await waitUntil(async () => direct.filter((held) => !held.closed).length === 5, 10_000)).to.equal(true);
      expect(viaProxy.filter((held) => held.answered && !held.closed).length).to.equal(20);
    } finally {
      [...viaProxy, ...direct].forEach((held) => held.socket.destroy());
      await running.close(0);
    }
  });

  it("MAX_CONNECTIONS 20, MAX_CONNECTIONS_PER_CLIENT unset (a tenth: 2): one client's 40 silent connections hold 2 places; another client is served", async () => {
    const { config, running } = await startFacilitatorOnChain({ MAX_CONNECTIONS: "20", MAX_CONNECTIONS_PER_CLIENT: "" });
    expect(config.http.maxConnectionsPerClient).to.equal(2);
    const { hostname, port } = new URL(running.url);
    // Connections that never send a request: only the headers time-out (10 s) would close them.
    const silent = Array.from({ length: 40 }, () => connect({ host: hostname, port: Number(port), localAddress: "127.0.0.2" }));
    const closed = new Set<Socket>();
    const read = new Map<Socket, string>();
    for (const socket of silent) {
      socket.on("error", () => {});
      socket.on("data", (chunk: Buffer) => read.set(socket, (read.get(socket) ?? "") + chunk.toString()));
      socket.once("close", () => closed.add(socket));
    }
    try {
      await Promise.all(silent.map((socket) => Promise.race([once(socket, "connect"), once(socket, "close")])));
      // Two are served (waiting for their headers), eight wait for a place (CONNECTION_QUEUE_MS, 5 s), the rest
      // are answered 503; so are the eight once their wait is over.
      expect(await waitUntil(async () => silent.length - closed.size === 2, 10_000)).to.equal(true);
      expect([...closed].map((socket) => read.get(socket))).to.deep.equal(Array(38).fill(CLIENT_FULL));
      const health = await requestFrom("127.0.0.3", `${running.url}/healthcheck`).then(
        (answer) => answer.status,
        (error: unknown) => String(error),
      );
      expect(health).to.equal(200);
    } finally {
      silent.forEach((socket) => socket.destroy());
      await running.close(0);
    }
  });

  it("at MAX_CONNECTIONS, a connection waiting over its client's cap gives way to another client's new one (answered 503 itself)", async () => {
    const { running } = await startFacilitatorOnChain({ MAX_CONNECTIONS: "20", MAX_CONNECTIONS_PER_CLIENT: "2" });
    const { hostname, port } = new URL(running.url);
    const open = (localAddress: string) => {
      const socket = connect({ host: hostname, port: Number(port), localAddress });
      socket.on("error", () => {});
      let text = "";
      socket.on("data", (chunk: Buffer) => (text += chunk.toString()));
      return { socket, read: () => text };
    };
    // Connections that send nothing: five clients hold their two places each, one more holds two and has eight waiting.
    const others = ["127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14", "127.0.0.15"].flatMap((address) => [open(address), open(address)]);
    const greedy = Array.from({ length: 10 }, () => open("127.0.0.2"));
    try {
      await Promise.all([...others, ...greedy].map(({ socket }) => once(socket, "connect")));
      expect(await waitUntil(async () => (await getOnce(running.metricsUrl!)).body.includes('x402_http_connections{listener="service",state="waiting"} 8'), 5_000)).to.equal(true);
      // All 20 places are taken (10 served, 10 of them waiting or served): a new client is still answered.
      const newcomer = await requestFrom("127.0.0.3", `${running.url}/v2/x402/supported`);
      expect(newcomer.status).to.equal(200);
      // The greedy client's newest waiting connection was answered 503 to make that room.
      expect(await waitUntil(async () => greedy.at(-1)!.read() === CLIENT_FULL, 5_000)).to.equal(true);
      expect(greedy.slice(0, -1).every(({ read }) => read() === "")).to.equal(true);
      const scrape = (await getOnce(running.metricsUrl!)).body;
      expect(metric(scrape, 'x402_http_connections_dropped_total{listener="service",reason="client"}')).to.equal(1);
      expect(metric(scrape, 'x402_http_connections_dropped_total{listener="service",reason="server"}')).to.equal(0);
    } finally {
      [...others, ...greedy].forEach(({ socket }) => socket.destroy());
      await running.close(0);
    }
  });

  it("a TRUST_PROXY hop count names no proxy: it exempts nobody from the per-client cap", async () => {
    const { running } = await startFacilitatorOnChain({ MAX_CONNECTIONS: "40", MAX_CONNECTIONS_PER_CLIENT: "5", TRUST_PROXY: "1" });
    const direct = Array.from({ length: 20 }, () => holdConnection(running.url, "127.0.0.4", "/v2/x402/supported"));
    try {
      await Promise.all(direct.map((held) => held.settled));
      expect(await waitUntil(async () => direct.filter((held) => !held.closed).length === 5, 10_000)).to.equal(true);
    } finally {
      direct.forEach((held) => held.socket.destroy());
      await running.close(0);
    }
  });

  it("RATE_LIMIT_PUBLIC_PER_MINUTE (3): the healthcheck and supported share a per-IP quota; past it 429 with Retry-After, other clients unaffected", async () => {
    const { running } = await startFacilitatorOnChain({ RATE_LIMIT_PUBLIC_PER_MINUTE: "3" });
    try {
      const statuses = [];
      for (const path of ["/healthcheck", "/v2/x402/supported", "/healthcheck", "/v2/x402/supported"]) {
        statuses.push((await requestFrom("127.0.0.2", `${running.url}${path}`)).status);
      }
      expect(statuses).to.deep.equal([200, 200, 200, 429]);
      const refused = await requestFrom("127.0.0.2", `${running.url}/healthcheck`);
      expect(refused.status).to.equal(429);
      const { error, retryAfter } = JSON.parse(refused.body);
      expect(error).to.equal("Too many requests");
      expect(retryAfter).to.be.within(1, 60);
      expect(refused.headers["retry-after"]).to.equal(String(retryAfter));
      expect(refused.headers["ratelimit-policy"]).to.match(/^"public"; q=3; w=60;/);
      expect((await requestFrom("127.0.0.3", `${running.url}/healthcheck`)).status).to.equal(200);
    } finally {
      await running.close(0);
    }
  });

  it("counts a client by its IPv4 address, or by the /56 of its IPv6 address", () => {
    expect(clientOf("203.0.113.7")).to.equal("203.0.113.7");
    expect(clientOf("::ffff:203.0.113.7")).to.equal("203.0.113.7");
    expect(clientOf("2001:db8:aa:bbcc:1:2:3:4")).to.equal("2001:db8:aa:bb00::/56");
    expect(clientOf("2001:db8:aa:bbff::9")).to.equal("2001:db8:aa:bb00::/56");
    expect(clientOf("2001:db8:aa:bc00::1")).to.equal("2001:db8:aa:bc00::/56");
    expect(clientOf("::1")).to.equal("0:0:0:0::/56");
    expect(clientOf("fe80::1%eth0")).to.equal("fe80:0:0:0::/56");
    expect(clientOf("64:ff9b::192.0.2.33")).to.equal("64:ff9b:0:0::/56");
  });
});

describe("facilitator listeners: /metrics on its own listener", () => {
  it("serves /metrics on METRICS_HOST:METRICS_PORT only; the public port answers 404 JSON for it", async () => {
    const { running } = await startFacilitatorOnChain({ METRICS_HOST: "127.0.0.2" });
    try {
      expect(running.metricsUrl).to.match(/^http:\/\/127\.0\.0\.2:\d+\/metrics$/);
      const publicAnswer = await fetch(`${running.url}/metrics`);
      expect(publicAnswer.status).to.equal(404);
      expect(await publicAnswer.json()).to.deep.equal({ error: "Not found" });
      const scrape = await getOnce(running.metricsUrl!);
      expect(scrape.status).to.equal(200);
      expect(scrape.body).to.match(/^x402_relayer_balance_wei\{network="cronos-testnet",relayer="0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"\} [\d.e+]+$/m);
      const other = await getOnce(running.metricsUrl!.replace(/\/metrics$/, "/healthcheck"));
      expect(other).to.deep.equal({ status: 404, body: '{"error":"Not found"}' });
    } finally {
      await running.close(0);
    }
  });

  it("reads the relayer gauges once per METRICS_CACHE_MS however many scrapes come (200 scrapes, one balance read)", async () => {
    const counts = new Map<string, number>();
    let nowMs = Date.now();
    const { running } = await startFacilitatorOnChain({ METRICS_CACHE_MS: "60000" }, { now: () => nowMs }, (chain) =>
      custom({
        request: async (args: { method: string; params?: unknown }) => {
          counts.set(args.method, (counts.get(args.method) ?? 0) + 1);
          return chain.connection.provider.request(args as never);
        },
      }),
    );
    try {
      counts.clear();
      await Promise.all(Array.from({ length: 100 }, () => getOnce(running.metricsUrl!)));
      for (let i = 0; i < 100; i++) await getOnce(running.metricsUrl!);
      expect(counts.get("eth_getBalance")).to.equal(1);
      nowMs += 60_000;
      const scrape = await getOnce(running.metricsUrl!);
      expect(scrape.status).to.equal(200);
      expect(counts.get("eth_getBalance")).to.equal(2);
    } finally {
      await running.close(0);
    }
  });

  it("opens no metrics listener with METRICS=false, and names METRICS_PORT when its port is taken", async () => {
    const holder = await occupyPort();
    const taken = String(holder.port);
    try {
      // The held port would make a metrics listener fail: starting proves none is opened.
      const off = await startFacilitatorOnChain({ METRICS: "false", METRICS_PORT: taken });
      expect(off.running.metricsUrl).to.equal(undefined);
      expect((await fetch(`${off.running.url}/metrics`)).status).to.equal(404);
      await off.running.close(0);
      const failure = await rejection(startFacilitatorOnChain({ METRICS_PORT: taken }), StartupError);
      expect(failure.message).to.equal(`METRICS_PORT: 127.0.0.1:${taken} is already in use; choose another port (METRICS_PORT=…, or METRICS=false)`);
    } finally {
      await holder.release();
    }
  });
});
