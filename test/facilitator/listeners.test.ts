import { once } from "node:events";
import { get } from "node:http";
import { connect, createServer, type Socket } from "node:net";
import { expect } from "chai";
import { custom } from "viem";
import { StartupError } from "../../src/facilitator/server.js";
import { makePayment, recordingLogger, startFacilitatorOnChain } from "../helpers/facilitator.js";

type Started = Awaited<ReturnType<typeof startFacilitatorOnChain>>;

/** What a raw TCP client saw until the server closed the connection (or `giveUpMs` passed). */
interface RawExchange {
  text: string;
  closedAfterMs: number;
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
  const started = performance.now();
  socket.once("connect", () => drive(socket));
  const giveUp = setTimeout(() => socket.destroy(), giveUpMs);
  await closed;
  clearTimeout(giveUp);
  return { text, closedAfterMs: performance.now() - started };
}

/** Writes `bytes` one at a time, one every `everyMs`, until the socket closes. */
function trickle(socket: Socket, bytes: string, everyMs: number): void {
  let index = 0;
  const timer = setInterval(() => {
    if (index >= bytes.length || socket.destroyed) clearInterval(timer);
    else socket.write(bytes[index++]!);
  }, everyMs);
  socket.on("close", () => clearInterval(timer));
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
      const exchange = await rawExchange(started.running.url, (socket) => trickle(socket, "POST /v2/x402/verify HTTP/1.1\r\nHost: x\r\nX-Slow: " + "a".repeat(500), 100));
      expect(exchange.text).to.equal(TIMED_OUT);
      expect(exchange.closedAfterMs).to.be.within(450, 30_000);
      expect(log.lines.some((l) => l.message === "request refused before it was read" && l.fields.status === 408 && l.fields.code === "ERR_HTTP_REQUEST_TIMEOUT" && l.fields.listener === "service")).to.equal(true);
    });

    it("closes a connection that sends nothing at all with 408 after the headers time-out", async () => {
      const exchange = await rawExchange(started.running.url, () => {});
      expect(exchange.text).to.equal(TIMED_OUT);
      expect(exchange.closedAfterMs).to.be.within(450, 30_000);
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
      const exchange = await rawExchange(started.running.url, (socket) => {
        socket.write(`POST /v2/x402/verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
        trickle(socket, body, 100);
      });
      expect(exchange.text).to.equal(TIMED_OUT);
      // Well before the 33 s the body would take, and not before the time-out.
      expect(exchange.closedAfterMs).to.be.within(950, 30_000);
    });

    it("still answers a settle that waits for its receipt longer than the request time-out", async () => {
      const { chain, running } = started;
      const provider = chain.connection.provider;
      await provider.request({ method: "evm_setAutomine", params: [false] });
      try {
        const payment = await makePayment(chain);
        const settling = fetch(`${running.url}/v2/x402/settle`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(payment.body) });
        while (((await provider.request({ method: "eth_getBlockByNumber", params: ["pending", false] })) as { transactions: string[] }).transactions.length === 0) {
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        // Node's request time-out is wall-clock time: let it pass while the settle waits for a block.
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        await provider.request({ method: "evm_mine", params: [] });
        const answer = await settling;
        expect(answer.status).to.equal(200);
        expect(((await answer.json()) as { event: string }).event).to.equal("payment.settled");
      } finally {
        await provider.request({ method: "evm_setAutomine", params: [true] });
      }
    });
  });

  describe("MAX_CONNECTIONS (2)", () => {
    it("closes a third connection on arrival, counts and logs it, and serves again once one closes", async () => {
      const log = recordingLogger();
      const { running } = await startFacilitatorOnChain({ MAX_CONNECTIONS: "2" }, { logger: log.logger });
      const { hostname, port } = new URL(running.url);
      const held = [connect(Number(port), hostname), connect(Number(port), hostname)];
      try {
        await Promise.all(held.map((socket) => once(socket, "connect")));
        const third = await rawExchange(running.url, (socket) => socket.write("GET /v2/x402/supported HTTP/1.1\r\nHost: x\r\n\r\n"), 10_000);
        expect(third.text).to.equal("");
        const metrics = await getOnce(running.metricsUrl!);
        expect(metrics.body).to.include('x402_http_connections_dropped_total{listener="service"} 1');
        expect(log.lines.filter((l) => l.message === "connections closed on arrival: MAX_CONNECTIONS are open").map((l) => l.fields)).to.deep.equal([
          { listener: "service", maxConnections: 2, dropped: 1 },
        ]);
        held[0]!.destroy();
        // The server learns of the close asynchronously: ask until it has room again.
        let answer: { status: number } | undefined;
        for (let attempt = 0; attempt < 100 && answer?.status !== 200; attempt++) {
          answer = await getOnce(`${running.url}/v2/x402/supported`).catch(() => undefined);
        }
        expect(answer?.status).to.equal(200);
      } finally {
        held.forEach((socket) => socket.destroy());
        await running.close(0);
      }
    });
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
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const taken = String((holder.address() as { port: number }).port);
    try {
      // The held port would make a metrics listener fail: starting proves none is opened.
      const off = await startFacilitatorOnChain({ METRICS: "false", METRICS_PORT: taken });
      expect(off.running.metricsUrl).to.equal(undefined);
      expect((await fetch(`${off.running.url}/metrics`)).status).to.equal(404);
      await off.running.close(0);
      let failure: unknown;
      await startFacilitatorOnChain({ METRICS_PORT: taken }).catch((error: unknown) => (failure = error));
      expect(failure).to.be.instanceOf(StartupError);
      expect((failure as Error).message).to.equal(`METRICS_PORT: 127.0.0.1:${taken} is already in use; choose another port (METRICS_PORT=…, or METRICS=false)`);
    } finally {
      holder.close();
    }
  });
});
