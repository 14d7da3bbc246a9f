import { expect } from "chai";
import request from "supertest";
import { custom, numberToHex, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { ConfigError, loadConfig } from "../../src/facilitator/config/index.js";
import { MemoryFeedHistory, OutcomeFeed, type FeedRow } from "../../src/facilitator/dashboard/index.js";
import type { Facilitator } from "../../src/facilitator/server.js";
import { VerifyReason } from "../../src/protocol/reasons.js";
import { openProxiedChain } from "../helpers/proxied-chain.js";
import { createTestFacilitator, HARDHAT_KEYS, makePayment, openFacilitator, startTestFacilitator, type Chain } from "../helpers/facilitator.js";
import { listen } from "../helpers/http.js";
import { openSse, rowOf } from "../helpers/sse.js";
import { ISO_TIME } from "../helpers/time.js";
import { openChain } from "../helpers/token.js";

const EXPECTED_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const ASSETS = ["/", "/dashboard/app.js", "/dashboard/charts.js", "/dashboard/style.css"];

/** A row as the feed writes it, for deep-equal checks: the volatile fields replaced by their kind. */
function shape(row: Record<string, unknown>): Record<string, unknown> {
  expect(row.time).to.match(ISO_TIME);
  expect(row.durationMs).to.be.a("number");
  const { time: _time, durationMs: _duration, ...rest } = row;
  return rest;
}

describe("dashboard: off unless DASHBOARD=true", () => {
  it("serves no page and none of its routes by default (404 JSON, as any unknown route)", async () => {
    const { app, config } = await openFacilitator();
    expect(config.dashboard).to.equal(false);
    for (const path of [...ASSETS, "/dashboard/vendor/uplot.js", "/dashboard/api/networks", "/dashboard/api/feed", "/dashboard/api/charts", "/dashboard/events", "/dashboard/api/local/buyers"]) {
      const response = await request(app).get(path);
      expect(response.status, path).to.equal(404);
      expect(response.body, path).to.deep.equal({ error: "Not found" });
    }
  });

  it("reads DASHBOARD as true or false and refuses anything else, naming the variable", () => {
    const base = { RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer };
    expect(loadConfig({ ...base, DASHBOARD: "true" }, { embedded: ["cronos-testnet"] }).dashboard).to.equal(true);
    expect(loadConfig({ ...base, DASHBOARD: "false" }, { embedded: ["cronos-testnet"] }).dashboard).to.equal(false);
    expect(() => loadConfig({ ...base, DASHBOARD: "yes" }, { embedded: ["cronos-testnet"] })).to.throw(ConfigError, 'DASHBOARD: must be "true" or "false"');
  });
});

describe("dashboard on a facilitator pointed at a configured RPC (DASHBOARD=true, as in production)", function () {
  // A key that is not one of Hardhat's public ones, and an RPC URL whose path carries an API key.
  const relayerKey: Hex = generatePrivateKey();
  const relayer = privateKeyToAccount(relayerKey).address;
  const RPC_SECRET = "v3/3f1d0c9e8b7a6f5e4d3c2b1a0f9e8d7c";
  let chain: Chain;
  let facilitator: Facilitator;
  let rpcPort: number;

  before(async () => {
    const proxied = await openProxiedChain();
    chain = proxied.chain;
    await chain.connection.provider.request({ method: "hardhat_setBalance", params: [relayer, numberToHex(10n ** 20n)] });
    rpcPort = proxied.proxies[0]!.port;
    const config = loadConfig({
      CRONOS_TESTNET_RPC_URL: `${proxied.rpcUrls}/${RPC_SECRET}`,
      RELAYER_PRIVATE_KEY: relayerKey,
      DASHBOARD: "true",
      RATE_LIMIT_VERIFY_PER_MINUTE: "0",
      RATE_LIMIT_SETTLE_PER_MINUTE: "0",
      POLLING_INTERVAL_MS: "20",
      HEAD_CACHE_MS: "0",
      HEALTH_CACHE_MS: "0",
    });
    facilitator = await createTestFacilitator(config);
  });

  it("serves the page, its script and its stylesheet from this origin only, under a strict CSP", async () => {
    const types = ["text/html; charset=utf-8", "text/javascript; charset=utf-8", "text/javascript; charset=utf-8", "text/css; charset=utf-8"];
    for (const [index, path] of ASSETS.entries()) {
      const response = await request(facilitator.app).get(path);
      expect(response.status, path).to.equal(200);
      expect(response.headers["content-type"], path).to.equal(types[index]);
      expect(response.headers["content-security-policy"], path).to.equal(EXPECTED_CSP);
      expect(response.headers["x-content-type-options"], path).to.equal("nosniff");
      // Works offline: nothing in the page names another origin.
      expect(response.text, path).not.to.match(/(https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}/i);
    }
    const page = await request(facilitator.app).get("/");
    expect(page.text).to.include('<script type="module" src="dashboard/app.js"></script>');
    expect(page.text).to.include('<link rel="stylesheet" href="dashboard/style.css">');
  });

  it("shows each network: chain id, the RPC by host only, token, EIP-712 domain, latest block and age, relayer gas", async () => {
    const response = await request(facilitator.app).get("/dashboard/api/networks");
    expect(response.status).to.equal(200);
    const block = await chain.publicClient.getBlock();
    const balance = await chain.publicClient.getBalance({ address: relayer });
    expect(response.body.checkedAt).to.be.a("number");
    expect(response.body.networks[0].blockAgeSeconds).to.be.a("number");
    const { checkedAt: _checkedAt, ...body } = response.body;
    const { blockAgeSeconds: _age, ...network } = body.networks[0];
    expect({ ...body, networks: [network] }).to.deep.equal({
      local: false,
      feed: "all",
      networks: [
        {
          network: "cronos-testnet",
          chainId: 338,
          rpc: `127.0.0.1:${rpcPort}`,
          token: chain.token,
          domain: { name: "Bridged USDC (Stargate)", version: "1" },
          ok: true,
          blockNumber: Number(block.number),
          relayers: [{ address: relayer, balanceWei: balance.toString() }],
          problems: [],
        },
      ],
    });
  });

  it("has no local routes (buyers, keys, try-it) and shows no secret in the page, its API or its feed", async () => {
    for (const path of ["/dashboard/api/local/buyers", "/dashboard/api/local/pay"]) {
      expect((await request(facilitator.app).get(path)).status, path).to.equal(404);
      expect((await request(facilitator.app).post(path).send({})).status, path).to.equal(404);
    }
    const { body } = await makePayment(chain);
    expect((await request(facilitator.app).post("/v2/x402/verify").send(body)).body.isValid).to.equal(true);
    const settle = await request(facilitator.app).post("/v2/x402/settle").send(body);
    expect(settle.body.event).to.equal("payment.settled");
    const refused = (await makePayment(chain, { validBefore: 1n })).body;
    expect((await request(facilitator.app).post("/v2/x402/verify").send(refused)).body.invalidReason).to.equal(VerifyReason.expired);

    const served = await listen(facilitator.app);
    try {
      const stream = await openSse(`${served.url}/dashboard/events`);
      // The settled row, enriched from its receipt: the whole feed has been written.
      await stream.next((event) => event.event === "outcome" && rowOf(event).block !== undefined);
      stream.close();
      const outputs = [stream.text()];
      for (const path of [...ASSETS, "/dashboard/api/networks", "/dashboard/api/feed", "/dashboard/api/charts"]) outputs.push((await request(facilitator.app).get(path)).text);
      const everything = outputs.join("\n").toLowerCase();
      expect(everything).to.include(relayer.toLowerCase());
      expect(everything).to.include(settle.body.txHash.toLowerCase());
      for (const secret of [relayerKey.slice(2), RPC_SECRET, "3f1d0c9e8b7a6f5e", HARDHAT_KEYS.buyer.slice(2)]) {
        expect(everything, secret).not.to.include(secret.toLowerCase());
      }
    } finally {
      await served.close();
    }
  });
});

describe("dashboard live feed (server-sent events)", function () {
  let opened: Awaited<ReturnType<typeof openFacilitator>>;
  let served: Awaited<ReturnType<typeof listen>>;
  before(async () => {
    opened = await openFacilitator("cronos-testnet", { DASHBOARD: "true" });
    served = await listen(opened.app);
  });
  after(async () => {
    await served?.close();
  });

  it("streams each outcome as `id: <epoch>.<rev>`, `event: outcome`, JSON data; a settled row is written again with block, gas and payee from its receipt", async () => {
    const stream = await openSse(`${served.url}/dashboard/events`);
    expect(stream.status).to.equal(200);
    expect(stream.headers["content-type"]).to.equal("text/event-stream; charset=utf-8");
    expect(stream.headers["cache-control"]).to.equal("no-cache, no-transform");
    const payment = await makePayment(opened.chain, { amount: 1_250_000n });
    await request(opened.app).post("/v2/x402/verify").send(payment.body);
    const settle = await request(opened.app).post("/v2/x402/settle").send(payment.body);
    const enriched = await stream.next((event) => event.event === "outcome" && rowOf(event).block !== undefined);
    stream.close();

    const epoch = opened.facilitator.dashboard!.feed.epoch;
    expect(stream.text().startsWith("retry: 2000\n\n")).to.equal(true);
    expect(stream.events.slice(1).map((event) => [event.id, event.event])).to.deep.equal([
      [`${epoch}.1`, "outcome"],
      [`${epoch}.2`, "outcome"],
      [`${epoch}.3`, "outcome"],
    ]);
    const receipt = await opened.chain.publicClient.getTransactionReceipt({ hash: settle.body.txHash });
    const common = { dialect: "cronos", network: "cronos-testnet", status: 200, ok: true, payer: opened.buyer.address, payee: opened.seller.address, amount: "1.25" };
    expect(stream.events.slice(1).map((event) => shape(rowOf(event)))).to.deep.equal([
      { id: 1, rev: 1, route: "verify", ...common, outcome: "valid", code: "valid" },
      { id: 2, rev: 2, route: "settle", ...common, outcome: "settled", code: "settled", txHash: settle.body.txHash },
      {
        id: 2,
        rev: 3,
        route: "settle",
        ...common,
        outcome: "settled",
        code: "settled",
        txHash: settle.body.txHash,
        block: Number(receipt.blockNumber),
        gasUsed: receipt.gasUsed.toString(),
      },
    ]);
    expect(enriched.id).to.equal(`${epoch}.3`);
    // Each event is one `data:` line of JSON: nothing in a row breaks the framing.
    expect(stream.text()).to.include(`id: ${epoch}.3\nevent: outcome\ndata: {"id":2,"rev":3,`);
  });

  it("sends the kept rows to a new stream (a reload), and only later ones after a Last-Event-ID of this feed", async () => {
    const epoch = opened.facilitator.dashboard!.feed.epoch;
    const kept = (await opened.facilitator.dashboard!.feed.rows()).map((row) => row.rev);
    const reload = await openSse(`${served.url}/dashboard/events`);
    await reload.next((event) => event.id === `${epoch}.${kept.at(-1)}`);
    reload.close();
    expect(reload.events.slice(1).map((event) => event.id)).to.deep.equal(kept.map((rev) => `${epoch}.${rev}`));

    const last = kept.at(-1)!;
    const resumed = await openSse(`${served.url}/dashboard/events`, { "Last-Event-ID": `${epoch}.${last}` });
    const refused = (await makePayment(opened.chain, { amount: 7n, validBefore: 1n })).body;
    await request(opened.app).post("/v2/x402/verify").send(refused);
    const next = await resumed.next((event) => event.event === "outcome");
    resumed.close();
    expect(next.id).to.equal(`${epoch}.${last + 1}`);
    expect(shape(rowOf(next))).to.deep.equal({
      id: kept.length + 1,
      rev: last + 1,
      route: "verify",
      dialect: "cronos",
      network: "cronos-testnet",
      status: 200,
      ok: false,
      payer: opened.buyer.address,
      payee: opened.seller.address,
      amount: "0.000007",
      outcome: VerifyReason.expired,
      code: "expired",
    });

    // A Last-Event-ID of another feed (a restarted facilitator) gets everything again.
    const restarted = await openSse(`${served.url}/dashboard/events`, { "Last-Event-ID": `zz.${last}` });
    const first = await restarted.next((event) => event.event === "outcome");
    restarted.close();
    expect(rowOf(first).rev).to.equal(1);
  });

  it("ends open streams when the facilitator closes, so stopping does not wait out the grace period", async () => {
    const chain = await openChain("cronos-testnet");
    const config = loadConfig(
      { RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, DASHBOARD: "true", PORT: "0", METRICS_PORT: "0" },
      { embedded: ["cronos-testnet"] },
    );
    const running = await startTestFacilitator(config, { transports: { "cronos-testnet": custom(chain.connection.provider) } });
    const stream = await openSse(`${running.url}/dashboard/events`);
    expect(stream.status).to.equal(200);
    // A grace far beyond the test's time-out: only ending the stream lets close() finish.
    await Promise.all([running.close(600_000), stream.ended]);
  });
});

describe("dashboard with API keys configured: the feed follows the keys", function () {
  const SELLER_KEY = "seller-a-0123456789abcdef";
  let opened: Awaited<ReturnType<typeof openFacilitator>>;
  let served: Awaited<ReturnType<typeof listen>>;
  let settledTx: Hex;
  before(async () => {
    opened = await openFacilitator("cronos-testnet", { DASHBOARD: "true", API_KEYS: SELLER_KEY });
    served = await listen(opened.app);
    const auth = { Authorization: `Bearer ${SELLER_KEY}` };
    // A verify-only payment (never on chain), a refused verify, and a settled payment.
    const verifiedOnly = await makePayment(opened.chain, { amount: 4_440_000n });
    expect((await request(opened.app).post("/v2/x402/verify").set(auth).send(verifiedOnly.body)).body.isValid).to.equal(true);
    const expired = await makePayment(opened.chain, { amount: 7n, validBefore: 1n });
    expect((await request(opened.app).post("/v2/x402/verify").set(auth).send(expired.body)).body.isValid).to.equal(false);
    const paid = await makePayment(opened.chain, { amount: 1_250_000n });
    const settle = await request(opened.app).post("/v2/x402/settle").set(auth).send(paid.body);
    expect(settle.body.event).to.equal("payment.settled");
    settledTx = settle.body.txHash;
  });
  after(async () => {
    await served?.close();
  });

  it("GET /dashboard/api/feed without a key: the settled on-chain row only; with a key: every row; an unknown key: 401", async () => {
    const anonymous = await request(opened.app).get("/dashboard/api/feed");
    expect(anonymous.status).to.equal(200);
    expect(anonymous.body.rows.map((row: FeedRow) => [row.route, row.outcome, row.amount, row.txHash])).to.deep.equal([["settle", "settled", "1.25", settledTx]]);
    expect(JSON.stringify(anonymous.body)).not.to.include("4.44");

    const keyed = await request(opened.app).get("/dashboard/api/feed").set("Authorization", `Bearer ${SELLER_KEY}`);
    expect(keyed.status).to.equal(200);
    expect(keyed.body.rows.map((row: FeedRow) => [row.route, row.outcome, row.amount])).to.deep.equal([
      ["verify", "valid", "4.44"],
      ["verify", VerifyReason.expired, "0.000007"],
      ["settle", "settled", "1.25"],
    ]);

    // The page learns what its feed shows from the networks view (it sends no key).
    expect((await request(opened.app).get("/dashboard/api/networks")).body.feed).to.equal("settled");
    expect((await request(opened.app).get("/dashboard/api/networks").set("Authorization", `Bearer ${SELLER_KEY}`)).body.feed).to.equal("all");

    const unknown = await request(opened.app).get("/dashboard/api/feed").set("Authorization", "Bearer not-a-key-of-this-facilitator");
    expect(unknown.status).to.equal(401);
    expect(unknown.body).to.deep.equal({ error: "Unauthorized: unknown API key" });
    expect(unknown.headers["www-authenticate"]).to.equal('Bearer realm="x402-facilitator", error="invalid_token"');
  });

  it("GET /dashboard/events without a key streams settled rows only (kept and new); with a key, every row", async () => {
    const anonymous = await openSse(`${served.url}/dashboard/events`);
    const keyed = await openSse(`${served.url}/dashboard/events`, { Authorization: `Bearer ${SELLER_KEY}` });
    expect([anonymous.status, keyed.status]).to.deep.equal([200, 200]);
    // A new verify-only payment and a new settlement, while both streams are open.
    const auth = { Authorization: `Bearer ${SELLER_KEY}` };
    const verifiedOnly = await makePayment(opened.chain, { amount: 3_330_000n });
    await request(opened.app).post("/v2/x402/verify").set(auth).send(verifiedOnly.body);
    const paid = await makePayment(opened.chain, { amount: 2_000_000n });
    const settle = await request(opened.app).post("/v2/x402/settle").set(auth).send(paid.body);
    const isNewSettle = (event: { event?: string; data?: string }) => event.event === "outcome" && rowOf(event).txHash === settle.body.txHash;
    await Promise.all([anonymous.next(isNewSettle), keyed.next(isNewSettle)]);
    anonymous.close();
    keyed.close();
    const seen = (stream: typeof anonymous) =>
      [...new Set(stream.events.filter((event) => event.event === "outcome").map((event) => `${rowOf(event).route} ${rowOf(event).amount}`))];
    expect(seen(anonymous)).to.deep.equal(["settle 1.25", "settle 2"]);
    expect(seen(keyed)).to.deep.equal(["verify 4.44", "verify 0.000007", "settle 1.25", "verify 3.33", "settle 2"]);
    expect(anonymous.text()).not.to.include("3.33");
  });
});

describe("dashboard feed (src/facilitator/dashboard/feed.ts)", () => {
  const record = { requestId: "r", route: "verify" as const, status: 200, network: "cronos-testnet", outcome: "valid", code: "valid", durationMs: 1.234 };

  it("shows the dialect an outcome record carries, and cronos when it carries none", async () => {
    const feed = new OutcomeFeed({ now: () => "2026-01-01T00:00:00.000Z" });
    feed.record(record);
    feed.record({ ...record, dialect: "x402v2" });
    expect((await feed.rows()).map((row) => row.dialect)).to.deep.equal(["cronos", "x402v2"]);
  });

  it("keeps the last N rows, oldest dropped first; a row written again keeps its place", async () => {
    const history = new MemoryFeedHistory(3);
    const feed = new OutcomeFeed({
      history,
      now: () => "2026-01-01T00:00:00.000Z",
      receipt: async () => ({ block: 7, gasUsed: 50_000n, payee: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" }),
    });
    const seen: FeedRow[] = [];
    const stop = feed.stream(undefined, (row) => seen.push(row));
    feed.record(record);
    feed.record({ ...record, route: "settle", outcome: "settled", code: "settled", txHash: `0x${"ab".repeat(32)}`, amount: "2500000", payer: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC" });
    feed.record({ ...record, outcome: "Authorization expired", code: "expired" });
    await new Promise((resolve) => setImmediate(resolve));
    feed.record({ ...record, outcome: "Authorization already used", code: "used" });
    stop();
    const rows = await feed.rows();
    // Oldest write first; row 1 dropped; row 2 (enriched after row 3) kept its place in the ring.
    expect(rows.map((row) => [row.id, row.rev, row.outcome, row.block ?? null])).to.deep.equal([
      [3, 3, "Authorization expired", null],
      [2, 4, "settled", 7],
      [4, 5, "Authorization already used", null],
    ]);
    expect(seen.map((row) => row.rev)).to.deep.equal([1, 2, 3, 4, 5]);
    expect(rows.find((row) => row.id === 2)).to.deep.include({ amount: "2.5", gasUsed: "50000", payee: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", ok: true });
  });

  it("bounds text from a request body (a network string) before showing it", () => {
    const feed = new OutcomeFeed();
    const row = feed.record({ ...record, network: "x".repeat(5_000), outcome: `Unsupported network: ${"x".repeat(5_000)}`, code: "network" });
    expect(row.network).to.have.length(301);
    expect(row.outcome).to.have.length(301);
    expect(row.ok).to.equal(false);
  });
});
