import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { expect } from "chai";
import request from "supertest";
import type { Hex } from "viem";
import { CHART_MINUTES, MinuteHistory, type ChartsView, type NetworkSeries } from "../../src/facilitator/dashboard/index.js";
import { LATENCY_BUCKETS, LATENCY_RELATIVE_ERROR, SEEN_TRANSACTIONS, latencyQuantile, latencyBucket } from "../../src/facilitator/dashboard/minutes.js";
import { makePayment, openFacilitator, sendAuthorization } from "../helpers/facilitator.js";
import { waitUntil } from "../helpers/wait.js";

const MINUTE = 60_000;
/** A clock the test moves: 2026-01-01T00:00:30Z, half a minute into a minute. */
function clock() {
  let now = Date.UTC(2026, 0, 1, 0, 0, 30);
  return { now: () => now, advance: (ms: number) => void (now += ms) };
}
const total = (values: ReadonlyArray<number | null>) => values.reduce<number>((sum, value) => sum + (value ?? 0), 0);
const testnet = (view: ChartsView): NetworkSeries => view.networks.find((network) => network.network === "cronos-testnet")!;
const answer = { route: "verify" as const, network: "cronos-testnet", code: "valid", status: 200, durationMs: 10 };
/** The bytes one network's hour takes: the minute, 2 routes × 3 classes of counts, 2 latency histograms, gas, fee, transactions, balance. */
const BYTES_PER_NETWORK = CHART_MINUTES * (8 + 2 * 3 * 4 + 2 * LATENCY_BUCKETS * 4 + 8 + 8 + 4 + 8);

describe("dashboard charts: the last hour per minute (src/facilitator/dashboard/minutes.ts)", () => {
  it("counts verifies and settles by outcome class in their minute, with p50/p99; a minute without answers has no latency", () => {
    const time = clock();
    const history = new MinuteHistory({ networks: ["cronos-testnet"], now: time.now });
    history.outcome({ ...answer, durationMs: 4 });
    history.outcome({ ...answer, code: "expired", durationMs: 2 });
    history.outcome({ ...answer, route: "settle", code: "settled", durationMs: 900 });
    history.outcome({ ...answer, route: "settle", code: "alreadyUsed", durationMs: 30 });
    history.outcome({ ...answer, route: "settle", code: "fault", status: 503, durationMs: 5_000 });
    // The "cronos" alias and the CAIP-2 id of v2 requests are the same network; another network is not served here.
    history.outcome({ ...answer, network: "eip155:338" });
    expect(history.outcome({ ...answer, network: "cronos-mainnet" })).to.equal(false);
    time.advance(2 * MINUTE);
    history.outcome({ ...answer, route: "settle", code: "settled", durationMs: 1_200 });

    const view = history.view();
    const start = Math.floor(time.now() / MINUTE) - CHART_MINUTES + 1;
    expect(view.minutes).to.deep.equal(Array.from({ length: CHART_MINUTES }, (_, i) => (start + i) * 60));
    expect(view.networks.map((n) => n.network)).to.deep.equal(["cronos-testnet"]);
    const series = testnet(view);
    const at = (values: ReadonlyArray<number | null>) => [values[57], values[58], values[59]];
    expect(at(series.verify!.ok)).to.deep.equal([2, 0, 0]);
    expect(at(series.verify!.refused!)).to.deep.equal([1, 0, 0]);
    expect(at(series.settle.ok)).to.deep.equal([1, 0, 1]);
    expect(at(series.settle.refused!)).to.deep.equal([1, 0, 0]);
    expect(at(series.settle.fault!)).to.deep.equal([1, 0, 0]);
    expect(total(series.verify!.ok) + total(series.settle.ok)).to.equal(4);
    // Each quantile is its histogram bucket's middle: within 4.5 % of the duration (and 0.1 ms rounding).
    expect(series.settle.p50![57]).to.be.closeTo(900, 900 * LATENCY_RELATIVE_ERROR + 0.05);
    expect(series.settle.p99![57]).to.be.closeTo(5_000, 5_000 * LATENCY_RELATIVE_ERROR + 0.05);
    expect(series.verify!.p50![57]).to.be.closeTo(4, 4 * LATENCY_RELATIVE_ERROR + 0.05);
    expect(at(series.verify!.p50!)[1]).to.equal(null);
    expect(at(series.settle.p99!)[2]).to.be.closeTo(1_200, 1_200 * LATENCY_RELATIVE_ERROR + 0.05);
    expect(series.verify!.p99!.filter((v) => v !== null)).to.have.length(1);
  });

  it("reads p50 and p99 within the histogram's error of the exact (nearest-rank) quantiles", () => {
    let seed = 7;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    for (const spread of [1, 10, 1_000]) {
      const durations = Array.from({ length: 997 }, () => 0.2 + random() * spread * (random() < 0.05 ? 50 : 1));
      const buckets = new Uint32Array(LATENCY_BUCKETS);
      for (const ms of durations) buckets[latencyBucket(ms)]! += 1;
      const sorted = [...durations].sort((a, b) => a - b);
      for (const q of [0.5, 0.99]) {
        const exact = sorted[Math.ceil(q * sorted.length) - 1]!;
        expect(latencyQuantile(buckets, q), `q ${q}, spread ${spread}`).to.be.closeTo(exact, exact * LATENCY_RELATIVE_ERROR + 0.05);
      }
    }
    expect(latencyQuantile(new Uint32Array(LATENCY_BUCKETS), 0.5)).to.equal(null);
  });

  it("keeps only the last hour: a minute an hour later reuses its slot empty, and the window moves with the clock", () => {
    const time = clock();
    const history = new MinuteHistory({ networks: ["cronos-testnet"], now: time.now });
    history.outcome(answer);
    time.advance(30 * MINUTE);
    history.outcome(answer);
    history.outcome(answer);
    expect(testnet(history.view()).verify!.ok.filter((n) => n > 0)).to.deep.equal([1, 2]);
    time.advance(30 * MINUTE);
    // The first minute is 60 minutes old now: out of the window, though its slot was not reused yet.
    expect(testnet(history.view()).verify!.ok.filter((n) => n > 0)).to.deep.equal([2]);
    history.outcome(answer);
    const ok = testnet(history.view()).verify!.ok;
    expect([ok[29], ok[59], total(ok)]).to.deep.equal([2, 1, 3]);
  });

  it("counts a settle transaction's gas and fee once, however often its receipt is read, and only on served networks", () => {
    const time = clock();
    const history = new MinuteHistory({ networks: ["cronos-testnet"], now: time.now });
    const hash = `0x${"ab".repeat(32)}`;
    expect(history.transaction("cronos-testnet", hash, 80_000n, 2_000_000_000_000n)).to.equal(true);
    // The same transaction again (a retried settle answered with its hash), in other letter case: not again.
    expect(history.transaction("cronos-testnet", hash.toUpperCase().replace("0X", "0x"), 80_000n, 2_000_000_000_000n)).to.equal(false);
    expect(history.transaction("cronos-mainnet", `0x${"cd".repeat(32)}`, 90_000n, 1n)).to.equal(false);
    const series = testnet(history.view());
    expect(total(series.gasUsed)).to.equal(80_000);
    expect(total(series.feeCro)).to.equal(0.16);
    expect(series.feePerSettleCro).to.equal(0.16);
  });

  it("carries the balance from its last reading, before the hour too, and gives the runway at the hour's average cost per settle", () => {
    const time = clock();
    const history = new MinuteHistory({ networks: ["cronos-testnet"], now: time.now });
    expect(testnet(history.view()).balanceCro.every((v) => v === null)).to.equal(true);
    history.balance("cronos-testnet", 10n ** 19n); // 10 CRO
    expect(testnet(history.view()).runwaySettles.at(-1)).to.equal(null); // no settle's cost seen yet
    time.advance(10 * MINUTE);
    history.transaction("cronos-testnet", `0x${"01".repeat(32)}`, 100_000n, 10n ** 12n); // 0.1 CRO
    history.transaction("cronos-testnet", `0x${"02".repeat(32)}`, 100_000n, 3n * 10n ** 12n); // 0.3 CRO
    history.balance("cronos-testnet", 96n * 10n ** 17n); // 9.6 CRO
    let series = testnet(history.view());
    expect(series.balanceCro.slice(49)).to.deep.equal([10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 9.6]);
    expect(series.balanceCro.slice(0, 49).every((v) => v === null)).to.equal(true);
    expect(series.feePerSettleCro).to.equal(0.2);
    expect(series.runwaySettles.at(-1)).to.equal(48);
    // An hour later nothing of it is in the window: the balance line starts at its last reading, and the
    // runway uses the latest transaction's cost (0.3 CRO).
    time.advance(75 * MINUTE);
    series = testnet(history.view());
    expect(series.balanceCro.every((v) => v === 9.6)).to.equal(true);
    expect(total(series.gasUsed)).to.equal(0);
    expect(series.feePerSettleCro).to.equal(0.3);
    expect(series.runwaySettles.at(-1)).to.equal(32);
    // The slot reused for a new minute hands its reading on.
    history.outcome(answer);
    time.advance(61 * MINUTE);
    expect(testnet(history.view()).balanceCro.every((v) => v === 9.6)).to.equal(true);
  });

  it("in the settled-only view shows what the chain shows: settles, gas, fee, balance; no verifies, refusals, faults or latency", () => {
    const history = new MinuteHistory({ networks: ["cronos-testnet"], now: clock().now });
    history.outcome(answer);
    history.outcome({ ...answer, route: "settle", code: "settled" });
    history.outcome({ ...answer, route: "settle", code: "expired" });
    const series = testnet(history.view("settled"));
    expect(Object.keys(series).sort()).to.deep.equal(["balanceCro", "feeCro", "feePerSettleCro", "gasUsed", "network", "runwaySettles", "settle"]);
    expect(Object.keys(series.settle)).to.deep.equal(["ok"]);
    expect(total(series.settle.ok)).to.equal(1);
    expect(history.view("settled").scope).to.equal("settled");
  });

  it("is bounded: its arrays are allocated once for the networks served and a flood of any outcomes, networks and transactions over hours leaves them as they were", () => {
    const time = clock();
    const history = new MinuteHistory({ networks: ["cronos-testnet", "cronos-mainnet"], now: time.now });
    expect(history.bytes).to.equal(2 * BYTES_PER_NETWORK);
    expect(BYTES_PER_NETWORK).to.be.below(100 * 1024);
    const networks = ["cronos-testnet", "cronos", "eip155:25", "x".repeat(5_000), "eip155:1", "", "cronos-mainnet"];
    let hashes = 0;
    for (let minute = 0; minute < 180; minute++) {
      for (let i = 0; i < 400; i++) {
        const network = networks[i % networks.length]!;
        history.outcome({ route: i % 2 ? "verify" : "settle", network, code: `code-${i % 37}`, status: i % 11 ? 200 : 503, durationMs: i % 3 ? i * 3.7 : Number.NaN });
        if (i % 5 === 0) history.transaction(network, `0x${(++hashes).toString(16).padStart(64, "0")}`, BigInt(i), BigInt(i));
        if (i % 50 === 0) history.balance(network, BigInt(i) * 10n ** 15n);
      }
      time.advance(MINUTE);
    }
    expect(history.bytes).to.equal(2 * BYTES_PER_NETWORK);
    expect(history.seenTransactions).to.equal(SEEN_TRANSACTIONS);
    const view = history.view();
    expect(view.networks.map((n) => n.network)).to.deep.equal(["cronos-testnet", "cronos-mainnet"]);
    for (const series of view.networks) {
      for (const values of [series.verify!.ok, series.verify!.p99!, series.settle.fault!, series.gasUsed, series.feeCro, series.balanceCro, series.runwaySettles]) {
        expect(values).to.have.length(CHART_MINUTES);
      }
    }
    // The last full minute: 400 answers over 7 network strings, 3 of them a served one's (2 testnet, 1 mainnet… per 7).
    expect(total(view.networks.map((n) => n.verify!.ok[58]! + n.verify!.refused![58]! + n.verify!.fault![58]! + n.settle.ok[58]! + n.settle.refused![58]! + n.settle.fault![58]!))).to.equal(
      Array.from({ length: 400 }, (_, i) => networks[i % networks.length]).filter((n) => ["cronos-testnet", "cronos", "eip155:25", "cronos-mainnet"].includes(n!)).length,
    );
  });

  it("builds a view once per change and minute, however many pages ask", () => {
    const time = clock();
    const history = new MinuteHistory({ networks: ["cronos-testnet"], now: time.now });
    const first = history.view();
    expect(history.view()).to.equal(first);
    history.outcome(answer);
    const second = history.view();
    expect(second).to.not.equal(first);
    expect(history.view()).to.equal(second);
    time.advance(MINUTE);
    expect(history.view()).to.not.equal(second);
  });
});

describe("dashboard charts over HTTP (GET /dashboard/api/charts, the page's scripts)", function () {
  this.timeout(60_000);
  let opened: Awaited<ReturnType<typeof openFacilitator>> | undefined;
  const open = async (env: Record<string, string>) => (opened = await openFacilitator("cronos-testnet", { DASHBOARD: "true", ...env }));
  afterEach(async () => {
    await opened?.facilitator.close(0);
    opened = undefined;
  });

  it("charts a facilitator's real traffic: counts by outcome, the settle's gas and fee from its receipt, the relayer's balance and runway", async () => {
    const { app, chain, facilitator } = await open({});
    const dashboard = facilitator.dashboard!;
    const payment = await makePayment(chain, { amount: 1_250_000n });
    expect((await request(app).post("/v2/x402/verify").send(payment.body)).body.isValid).to.equal(true);
    const expired = (await makePayment(chain, { validBefore: 1n })).body;
    expect((await request(app).post("/v2/x402/verify").send(expired)).body.isValid).to.equal(false);
    const settle = await request(app).post("/v2/x402/settle").send(payment.body);
    expect(settle.body.event).to.equal("payment.settled");
    // The same settle again: answered with the hash that paid it; its receipt is read again, its gas not counted twice.
    const again = await request(app).post("/v2/x402/settle").send(payment.body);
    expect(again.body.txHash).to.equal(settle.body.txHash);
    const enriched = async () => (await dashboard.feed.rows()).filter((row) => row.route === "settle" && row.block !== undefined).length === 2;
    expect(await waitUntil(enriched, 10_000), "both settle rows read their receipt").to.equal(true);
    // The networks view reads the relayer's balance (the page asks it every 5 s).
    expect((await request(app).get("/dashboard/api/networks")).status).to.equal(200);

    const response = await request(app).get("/dashboard/api/charts");
    expect(response.status).to.equal(200);
    expect(response.headers["cache-control"]).to.equal("no-store");
    const view = response.body as ChartsView;
    expect(view.scope).to.equal("all");
    const series = testnet(view);
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: settle.body.txHash as Hex });
    const balance = await chain.publicClient.getBalance({ address: facilitator.relayers[0]! });
    const fee = receipt.gasUsed * receipt.effectiveGasPrice;
    expect([total(series.verify!.ok), total(series.verify!.refused!), total(series.verify!.fault!)]).to.deep.equal([1, 1, 0]);
    expect([total(series.settle.ok), total(series.settle.refused!), total(series.settle.fault!)]).to.deep.equal([1, 1, 0]);
    expect(total(series.gasUsed)).to.equal(Number(receipt.gasUsed));
    expect(total(series.feeCro)).to.equal(Number(fee) / 1e18);
    expect(series.balanceCro.at(-1)).to.equal(Number(balance) / 1e18);
    expect(series.runwaySettles.at(-1)).to.equal(Math.floor(Number(balance) / Number(fee)));
    expect(series.verify!.p50!.filter((v) => v !== null).length).to.be.within(1, 2);
  });

  it("does not count the gas of a transaction another account sent (the payer's own use of its authorization)", async () => {
    const { app, chain, facilitator } = await open({});
    const payment = await makePayment(chain);
    const theirs = await sendAuthorization(chain, payment);
    await chain.publicClient.waitForTransactionReceipt({ hash: theirs });
    const settle = await request(app).post("/v2/x402/settle").send(payment.body);
    expect(settle.body.txHash).to.equal(theirs);
    const feed = facilitator.dashboard!.feed;
    expect(await waitUntil(async () => (await feed.rows()).some((row) => row.block !== undefined), 10_000), "the row read its receipt").to.equal(true);
    const series = testnet((await request(app).get("/dashboard/api/charts")).body as ChartsView);
    expect(total(series.settle.refused!)).to.equal(1);
    expect(total(series.gasUsed)).to.equal(0);
    expect(series.feePerSettleCro).to.equal(null);
  });

  it("with API keys configured: without a key the settled side only, with one everything, an unknown key 401; a flood of junk networks leaves its size as it was", async () => {
    const KEY = "seller-a-0123456789abcdef";
    const { app, chain, facilitator } = await open({ API_KEYS: KEY });
    const auth = { Authorization: `Bearer ${KEY}` };
    const bytes = facilitator.dashboard!.charts.bytes;
    const payment = await makePayment(chain);
    await request(app).post("/v2/x402/verify").set(auth).send(payment.body);
    for (const network of ["x".repeat(3_000), "eip155:1", "cronos-mainnet"]) {
      const junk = (await makePayment(chain, { network })).body;
      expect((await request(app).post("/v2/x402/verify").set(auth).send(junk)).status).to.be.oneOf([200, 400]);
    }
    expect(facilitator.dashboard!.charts.bytes).to.equal(bytes);

    const anonymous = (await request(app).get("/dashboard/api/charts")).body as ChartsView;
    expect(anonymous.scope).to.equal("settled");
    expect(anonymous.networks.map((n) => n.network)).to.deep.equal(["cronos-testnet"]);
    expect(testnet(anonymous).verify).to.equal(undefined);
    expect(Object.keys(testnet(anonymous).settle)).to.deep.equal(["ok"]);
    const keyed = (await request(app).get("/dashboard/api/charts").set(auth)).body as ChartsView;
    expect(keyed.scope).to.equal("all");
    expect(total(testnet(keyed).verify!.ok)).to.equal(1);
    const unknown = await request(app).get("/dashboard/api/charts").set("Authorization", "Bearer not-a-key-of-this-facilitator");
    expect(unknown.status).to.equal(401);
    expect(unknown.body).to.deep.equal({ error: "Unauthorized: unknown API key" });
  });

  it("serves the charts script and uPlot (its installed package's files, byte for byte) from this origin under the page's CSP", async () => {
    const { app } = await open({});
    const installed = createRequire(import.meta.url);
    const files = {
      "/dashboard/vendor/uplot.js": ["text/javascript; charset=utf-8", installed.resolve("uplot/dist/uPlot.iife.min.js")],
      "/dashboard/vendor/uplot.css": ["text/css; charset=utf-8", installed.resolve("uplot/dist/uPlot.min.css")],
    } as const;
    for (const [path, [type, file]] of Object.entries(files)) {
      const response = await request(app).get(path).buffer(true).parse((res, done) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => done(null, Buffer.concat(chunks)));
      });
      expect(response.status, path).to.equal(200);
      expect(response.headers["content-type"], path).to.equal(type);
      expect(response.headers["content-security-policy"], path).to.match(/^default-src 'none'; script-src 'self'; style-src 'self';/);
      expect(Buffer.compare(response.body as Buffer, readFileSync(file)), path).to.equal(0);
    }
    const page = await request(app).get("/");
    expect(page.text).to.include('<script defer src="dashboard/vendor/uplot.js"></script>');
    expect(page.text).to.include('<link rel="stylesheet" href="dashboard/vendor/uplot.css">');
    const script = await request(app).get("/dashboard/charts.js");
    expect([script.status, script.headers["content-type"]]).to.deep.equal([200, "text/javascript; charset=utf-8"]);
    expect(script.text).to.include('fetch("dashboard/api/charts"');
  });
});
