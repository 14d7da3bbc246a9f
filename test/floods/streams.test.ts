import { connect, type Socket } from "node:net";
import { expect } from "chai";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { MemoryFeedHistory, type FeedRow } from "../../src/facilitator/dashboard/index.js";
import { makePayment, startFacilitatorOnChain } from "../helpers/facilitator.js";
import { openSse, rowOf, type SseStream } from "../helpers/sse.js";
import { scrapeMetric } from "../helpers/metrics.js";
import { waitUntil } from "../helpers/wait.js";

// Issue 29 item 1: the dashboard's event streams hold no memory for a client that does not read, live a
// bounded time, and carry only payments' outcomes (never the requests refused before any check).

type Started = Awaited<ReturnType<typeof startFacilitatorOnChain>>;

/** A verify outcome as the facilitator records it, with a long reason (rows of about 700 bytes). */
const OUTCOME = {
  requestId: "flood",
  route: "verify" as const,
  dialect: "cronos" as const,
  status: 200,
  network: "cronos-testnet",
  payer: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
  payee: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
  amount: "1000",
  outcome: `Invalid signature ${"x".repeat(280)}`,
  code: "invalidSignature",
  durationMs: 1,
};

/** GET /dashboard/events on a raw socket that never reads what it is sent. */
function neverReading(url: string, headers = ""): Socket {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  socket.on("error", () => {});
  socket.pause();
  socket.write(`GET /dashboard/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n${headers}\r\n`);
  return socket;
}

/** Reads a socket to its end: what it held, and the ids of the whole events in it. */
function readToEnd(socket: Socket): Promise<{ bytes: number; ids: string[] }> {
  return new Promise((resolve) => {
    let text = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (text += chunk));
    socket.once("close", () => {
      // Only events whose block ended (a blank line) count: the last one may have been cut.
      const whole = text.slice(0, text.lastIndexOf("\n\n") + 2);
      resolve({ bytes: Buffer.byteLength(text), ids: [...whole.matchAll(/^id: (\S+)$/gm)].map((m) => m[1]!) });
    });
    socket.resume();
  });
}

const revOf = (id: string) => Number(id.split(".")[1]);
const outcomeRevs = (stream: SseStream) => stream.events.filter((e) => e.event === "outcome").map((e) => rowOf(e).rev as number);

describe("floods: dashboard event streams", function () {
  this.timeout(120_000);

  describe("clients that never read, while a reading client follows 12,000 rows", () => {
    let started: Started;
    before(async () => {
      started = await startFacilitatorOnChain({ DASHBOARD: "true", DASHBOARD_STREAM_STALL_SECONDS: "1", RATE_LIMIT_PUBLIC_PER_MINUTE: "0" });
    });
    after(() => started?.running.close(0));

    it("a stream whose client reads nothing stops being written once its socket is full, is closed after DASHBOARD_STREAM_STALL_SECONDS, and resumes from the bounded history with Last-Event-ID; the reader misses nothing", async () => {
      const { running } = started;
      const feed = running.facilitator.dashboard!.feed;
      const stalled = [neverReading(running.url), neverReading(running.url)];
      const reader = await openSse(`${running.url}/dashboard/events`);
      expect(await waitUntil(async () => (await scrapeMetric(started.running.metricsUrl!, "x402_dashboard_streams_open")) === 3, 5_000), "three streams open").to.equal(true);
      // 12,000 rows of about 700 bytes (8 MB): far beyond what a socket's buffers hold. Published in
      // batches, as requests arrive: the reader reads each batch before the next.
      for (let batch = 1; batch <= 60; batch++) {
        for (let i = 0; i < 200; i++) feed.record(OUTCOME);
        await reader.next((event) => event.event === "outcome" && rowOf(event).rev === batch * 200);
      }
      expect(outcomeRevs(reader)).to.deep.equal(Array.from({ length: 12_000 }, (_, i) => i + 1));

      expect(await waitUntil(async () => (await scrapeMetric(started.running.metricsUrl!, 'x402_dashboard_streams_total{event="stalled"}')) === 2, 10_000), "both silent streams closed as stalled").to.equal(true);
      expect(await scrapeMetric(started.running.metricsUrl!, "x402_dashboard_streams_open")).to.equal(1);
      // What a silent client finds when it reads at last: what the sockets held, then the end; far from 8 MB.
      const cut = await Promise.all(stalled.map(readToEnd));
      for (const seen of cut) {
        expect(seen.ids.length, "events that reached the silent client").to.be.greaterThan(0).and.below(12_000);
        expect(seen.bytes).to.be.below(8_000_000);
      }
      // It reconnects where it stopped and gets what the history (the last 500 rows) still holds after that.
      const lastSeen = cut[0]!.ids.at(-1)!;
      const resumed = await openSse(`${running.url}/dashboard/events`, { "Last-Event-ID": lastSeen });
      await resumed.next((event) => event.event === "outcome" && rowOf(event).rev === 12_000);
      resumed.close();
      const from = Math.max(revOf(lastSeen) + 1, 11_501);
      expect(outcomeRevs(resumed)).to.deep.equal(Array.from({ length: 12_001 - from }, (_, i) => from + i));
      reader.close();
    });
  });

  describe("a bounded lifetime and a bounded number of streams", () => {
    let started: Started;
    before(async () => {
      started = await startFacilitatorOnChain({ DASHBOARD: "true", DASHBOARD_STREAM_MAX_SECONDS: "1", DASHBOARD_MAX_STREAMS: "2", RATE_LIMIT_PUBLIC_PER_MINUTE: "0" });
    });
    after(() => started?.running.close(0));

    it("ends a stream after DASHBOARD_STREAM_MAX_SECONDS; its Last-Event-ID resumes after the last row it got", async () => {
      const { running } = started;
      const feed = running.facilitator.dashboard!.feed;
      const first = await openSse(`${running.url}/dashboard/events`);
      const row = feed.record(OUTCOME);
      const seen = await first.next((event) => event.event === "outcome");
      // Ended by the service, for its lifetime (the counter), not by the client.
      await first.ended;
      expect(await scrapeMetric(started.running.metricsUrl!, 'x402_dashboard_streams_total{event="lifetime"}')).to.equal(1);

      const later = feed.record({ ...OUTCOME, code: "expired" });
      const resumed = await openSse(`${running.url}/dashboard/events`, { "Last-Event-ID": seen.id! });
      const next = await resumed.next((event) => event.event === "outcome");
      resumed.close();
      expect([rowOf(seen).rev, rowOf(next).rev]).to.deep.equal([row.rev, later.rev]);
    });

    it("answers a stream beyond DASHBOARD_MAX_STREAMS 503 and counts it", async () => {
      const { running } = started;
      const open = [await openSse(`${running.url}/dashboard/events`), await openSse(`${running.url}/dashboard/events`)];
      const third = await fetch(`${running.url}/dashboard/events`);
      expect([third.status, await third.json()]).to.deep.equal([503, { error: "Service unavailable: 2 dashboard streams are open" }]);
      expect(await scrapeMetric(started.running.metricsUrl!, 'x402_dashboard_streams_total{event="refused"}')).to.equal(1);
      open.forEach((stream) => stream.close());
    });
  });

  describe("requests refused before any payment check", () => {
    const KEY = "flood-seller-key-0123456789";
    let started: Started;
    before(async () => {
      started = await startFacilitatorOnChain({
        DASHBOARD: "true",
        API_KEYS: KEY,
        BODY_LIMIT_BYTES: "1024",
        // The forged payment and the 150 requests whose body is read (413, 400, 400) are within it; the next is not.
        RATE_LIMIT_KEY_VERIFY_PER_MINUTE: "151",
        RATE_LIMIT_PUBLIC_PER_MINUTE: "0",
      });
    });
    after(() => started?.running.close(0));

    it("are counted in metrics and never reach the feed: 401, 415, 413, a body that is not JSON, not a payment, 429; a payment refused by its checks is shown", async () => {
      const { running, chain } = started;
      const verify = `${running.url}/v2/x402/verify`;
      const auth = { Authorization: `Bearer ${KEY}` };
      const stream = await openSse(`${running.url}/dashboard/events`, auth);
      // A payment whose signature is not the payer's: refused by verify's checks, a payment's outcome.
      const forged = await makePayment(chain, { signer: privateKeyToAccount(generatePrivateKey()) });
      expect((await fetch(verify, { method: "POST", headers: { ...auth, "Content-Type": "application/json" }, body: JSON.stringify(forged.body) })).status).to.equal(200);
      const shown = await stream.next((event) => event.event === "outcome");

      const refusals: Array<[number, RequestInit]> = [
        [401, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" }],
        [415, { method: "POST", headers: { ...auth, "Content-Type": "text/plain" }, body: "{}" }],
        [413, { method: "POST", headers: { ...auth, "Content-Type": "application/json" }, body: JSON.stringify({ pad: "x".repeat(2_000) }) }],
        [400, { method: "POST", headers: { ...auth, "Content-Type": "application/json" }, body: "{not json" }],
        [400, { method: "POST", headers: { ...auth, "Content-Type": "application/json" }, body: JSON.stringify({ x402Version: 1 }) }],
      ];
      for (const [status, init] of refusals) {
        const answers = await Promise.all(Array.from({ length: 50 }, () => fetch(verify, init).then((r) => r.status)));
        expect(new Set(answers), JSON.stringify(init)).to.deep.equal(new Set([status]));
      }
      // The key's quota ran out on the bodies read above (401 and 415 are refused before it counts): 429 now.
      expect((await fetch(verify, { method: "POST", headers: { ...auth, "Content-Type": "application/json" }, body: JSON.stringify(forged.body) })).status).to.equal(429);

      // A later payment's outcome arrives, and nothing came in between: each refusal's outcome was recorded as
      // its answer was written, before the client read it; the marker is a later row on the same stream.
      running.facilitator.dashboard!.feed.record({ ...OUTCOME, code: "marker" });
      await stream.next((event) => event.event === "outcome" && rowOf(event).code === "marker");
      stream.close();
      const codes = stream.events.filter((e) => e.event === "outcome").map((e) => rowOf(e).code);
      expect(codes).to.deep.equal([rowOf(shown).code, "marker"]);
      expect(rowOf(shown).code).to.equal("signature");
      expect((await running.facilitator.dashboard!.feed.rows()).map((row: FeedRow) => row.code)).to.deep.equal(["signature", "marker"]);
      // Counted all the same.
      expect(await scrapeMetric(started.running.metricsUrl!, 'x402_outcomes_total{route="verify",network="other",outcome="unauthorized",dialect="unknown"}')).to.equal(50);
      expect(await scrapeMetric(started.running.metricsUrl!, 'x402_outcomes_total{route="verify",network="other",outcome="unsupported_media_type",dialect="unknown"}')).to.equal(50);
      expect(await scrapeMetric(started.running.metricsUrl!, 'x402_outcomes_total{route="verify",network="other",outcome="payload_too_large",dialect="unknown"}')).to.equal(50);
      expect(await scrapeMetric(started.running.metricsUrl!, 'x402_rate_limited_total{route="verify",by="key"}')).to.equal(1);
    });
  });

  describe("the feed's history (src/facilitator/dashboard/feed.ts)", () => {
    it("keeps at most its byte budget of rows (their JSON), dropping the oldest first", async () => {
      const history = new MemoryFeedHistory(500, 16 * 1024);
      const row = (id: number): FeedRow => ({ ...OUTCOME, id, rev: id, time: "2026-01-01T00:00:00.000Z", ok: false });
      for (let id = 1; id <= 200; id++) history.keep(row(id));
      const size = Buffer.byteLength(JSON.stringify(row(1)));
      const kept = await history.since();
      expect(history.bytes).to.be.at.most(16 * 1024);
      expect(kept.length).to.equal(Math.floor((16 * 1024) / size));
      expect(kept.at(-1)!.id).to.equal(200);
      expect(kept[0]!.id).to.equal(201 - kept.length);
      expect(history.bytes).to.equal(kept.reduce((sum, r) => sum + Buffer.byteLength(JSON.stringify(r)), 0));
    });
  });
});
