import { expect } from "chai";
import request from "supertest";
import { keccak256, toHex } from "viem";
import { RequestError, SettleError } from "../../src/protocol/reasons.js";
import { settlementStatusSchema } from "../../src/protocol/schemas.js";
import { makePayment, openFacilitator, recordingLogger } from "../helpers/facilitator.js";
import { MIGRATIONS } from "../../src/ledger/schema.js";
import { privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader } from "../../src/buyer/index.js";
import { paymentRequirements } from "../../src/seller/index.js";
import { postJson } from "../helpers/http.js";
import { withoutAutomine } from "../helpers/mining.js";
import { startTestStack, STACK_OPTIONS } from "../helpers/seller.js";
import { waitFor, WAIT_MS } from "../helpers/wait.js";

/** What an instance on the embedded ledger says of it (written out: it is part of the healthcheck's answer). */
const EMBEDDED_NOTE = "settlement ledger: embedded (SQLite), this instance's alone; instances that must not pay twice share one PostgreSQL through DATABASE_URL";

const RELAYER = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720";

describe("settlement status lookups and the ledger's health and metrics", () => {
  it("answers a settled payment by transaction hash and by network, payer and nonce, with every field", async () => {
    const opened = await openFacilitator();
    const payment = await makePayment(opened.chain);
    const settled = await request(opened.app).post("/v2/x402/settle").send(payment.body);
    expect(settled.body.event).to.equal("payment.settled");
    const block = await opened.chain.publicClient.getBlock({ blockNumber: BigInt(settled.body.blockNumber) });
    const expected = {
      status: "settled",
      network: "cronos-testnet",
      from: payment.message.from,
      to: payment.payTo,
      value: "1000000",
      nonce: payment.message.nonce,
      txHash: settled.body.txHash,
      transactions: [settled.body.txHash],
      blockNumber: settled.body.blockNumber,
      timestamp: new Date(Number(block.timestamp) * 1000).toISOString(),
    };
    const byHash = await request(opened.app).get(`/v2/x402/settlements/${settled.body.txHash}`);
    expect([byHash.status, byHash.body]).to.deep.equal([200, expected]);
    expect(settlementStatusSchema.parse(byHash.body)).to.deep.equal(expected);
    const byAuthorization = await request(opened.app)
      .get("/v2/x402/settlements")
      .query({ network: "cronos-testnet", from: payment.message.from.toLowerCase(), nonce: payment.message.nonce });
    expect([byAuthorization.status, byAuthorization.body]).to.deep.equal([200, expected]);
  });

  it("answers the mainnet alias as the caller named it", async () => {
    const opened = await openFacilitator("cronos-mainnet");
    const payment = await makePayment(opened.chain, { network: "cronos" });
    const settled = await request(opened.app).post("/v2/x402/settle").send(payment.body);
    expect(settled.body.event).to.equal("payment.settled");
    const lookup = await request(opened.app).get("/v2/x402/settlements").query({ network: "cronos", from: payment.message.from, nonce: payment.message.nonce });
    expect(lookup.body).to.deep.include({ status: "settled", network: "cronos", txHash: settled.body.txHash });
    const byHash = await request(opened.app).get(`/v2/x402/settlements/${settled.body.txHash}`);
    expect(byHash.body.network).to.equal("cronos-mainnet");
  });

  it("takes every network form verify takes, by authorization and by hash, and answers in the form asked; a form it does not know stays 400", async () => {
    const opened = await openFacilitator("cronos-mainnet");
    const payment = await makePayment(opened.chain, { network: "cronos-mainnet" });
    const settled = await request(opened.app).post("/v2/x402/settle").send(payment.body);
    expect(settled.body.event).to.equal("payment.settled");
    const authorization = { from: payment.message.from, nonce: payment.message.nonce };
    for (const network of ["cronos-mainnet", "cronos", "eip155:25"]) {
      const byAuthorization = await request(opened.app).get("/v2/x402/settlements").query({ network, ...authorization });
      expect([byAuthorization.status, byAuthorization.body.network, byAuthorization.body.txHash], network).to.deep.equal([200, network, settled.body.txHash]);
      const byHash = await request(opened.app).get(`/v2/x402/settlements/${settled.body.txHash}`).query({ network });
      expect([byHash.status, byHash.body], network).to.deep.equal([200, { ...byAuthorization.body }]);
    }
    for (const network of ["eip155:338", "cronos-testnet", "eip155:1", "EIP155:25", "Cronos", "eip155:25 ", "base"]) {
      const invalid = { error: RequestError.invalidRequest(`network ${network} is not served here`) };
      const byAuthorization = await request(opened.app).get("/v2/x402/settlements").query({ network, ...authorization });
      expect([byAuthorization.status, byAuthorization.body], network).to.deep.equal([400, invalid]);
      const byHash = await request(opened.app).get(`/v2/x402/settlements/${settled.body.txHash}`).query({ network });
      expect([byHash.status, byHash.body], network).to.deep.equal([400, invalid]);
    }
    const repeated = await request(opened.app).get(`/v2/x402/settlements/${settled.body.txHash}?network=cronos&network=eip155:25`);
    expect([repeated.status, repeated.body]).to.deep.equal([400, { error: RequestError.invalidRequest("network must be a string") }]);
  });

  it("by hash with a network, answers only a settlement of that network: a testnet payment asked for as mainnet is 404", async () => {
    const stack = await startTestStack({ ...STACK_OPTIONS, buyers: 1 });
    try {
      const info = stack.networks["cronos-testnet"]!;
      const requirements = paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: 1_000n });
      const paymentHeader = await createPaymentHeader({ signer: privateKeyToAccount(info.buyers[0]!.privateKey), requirements });
      const settled = await postJson(`${stack.facilitatorUrl}/v2/x402/settle`, { x402Version: 1, paymentHeader, paymentRequirements: requirements });
      expect(settled.json.event).to.equal("payment.settled");
      const lookup = async (network: string) => {
        const answer = await fetch(`${stack.facilitatorUrl}/v2/x402/settlements/${settled.json.txHash}?network=${encodeURIComponent(network)}`);
        return [answer.status, ((await answer.json()) as { network?: string; error?: string }).network ?? "none"];
      };
      expect(await lookup("eip155:338")).to.deep.equal([200, "eip155:338"]);
      expect(await lookup("cronos-testnet")).to.deep.equal([200, "cronos-testnet"]);
      for (const network of ["eip155:25", "cronos-mainnet", "cronos"]) expect(await lookup(network), network).to.deep.equal([404, "none"]);
    } finally {
      await stack.stop();
    }
  });

  it("shows a settlement pending while its transaction waits for a block, then settled", async () => {
    const opened = await openFacilitator();
    const payment = await makePayment(opened.chain);
    await withoutAutomine(opened.chain.connection.provider, async () => {
      const settling = request(opened.app).post("/v2/x402/settle").send(payment.body).then((r) => r);
      const query = { network: "cronos-testnet", from: payment.message.from, nonce: payment.message.nonce };
      const lookup = await waitFor(
        () => request(opened.app).get("/v2/x402/settlements").query(query),
        (answer) => answer.body.status === "pending" && Boolean(answer.body.txHash),
        "the settlement pending with its transaction",
        WAIT_MS,
        10,
      );
      expect(lookup.body).to.deep.include({ status: "pending", transactions: [lookup.body.txHash] });
      expect(lookup.body).to.not.have.property("blockNumber");
      await opened.chain.networkHelpers.mine();
      expect((await settling).body).to.deep.include({ event: "payment.settled", txHash: lookup.body.txHash });
      expect((await request(opened.app).get("/v2/x402/settlements").query(query)).body.status).to.equal("settled");
    });
  });

  it("shows a settlement refused before sending as failed, with the error and no transaction", async () => {
    const opened = await openFacilitator();
    const payment = await makePayment(opened.chain);
    await opened.chain.contract.write.pause();
    const answer = await request(opened.app).post("/v2/x402/settle").send(payment.body);
    expect(answer.body.error).to.equal(SettleError.failedOnChain);
    const lookup = await request(opened.app).get("/v2/x402/settlements").query({ network: "cronos-testnet", from: payment.message.from, nonce: payment.message.nonce });
    expect(lookup.body).to.deep.include({ status: "failed", error: SettleError.failedOnChain, txHash: null, transactions: [] });
  });

  it("answers 404 JSON for an unknown hash or authorization, 400 JSON for a malformed one", async () => {
    const opened = await openFacilitator();
    const unknown = keccak256(toHex("unknown"));
    const notFound = { error: RequestError.notFound };
    expect((await request(opened.app).get(`/v2/x402/settlements/${unknown}`)).body).to.deep.equal(notFound);
    const absent = await request(opened.app).get("/v2/x402/settlements").query({ network: "cronos-testnet", from: RELAYER, nonce: unknown });
    expect([absent.status, absent.body]).to.deep.equal([404, notFound]);
    const cases: Array<[string, string]> = [
      ["/v2/x402/settlements/0x1234", "txHash must be 0x-prefixed 32 bytes of hex"],
      [`/v2/x402/settlements?network=cronos-testnet&from=${RELAYER}`, "nonce is required"],
      [`/v2/x402/settlements?network=cronos-testnet&from=0x12&nonce=${unknown}`, "from must be a 0x-prefixed 20-byte address"],
      [`/v2/x402/settlements?network=base&from=${RELAYER}&nonce=${unknown}`, "network base is not served here"],
      [`/v2/x402/settlements?network=cronos-mainnet&from=${RELAYER}&nonce=${unknown}`, "network cronos-mainnet is not served here"],
      [`/v2/x402/settlements?network=cronos-testnet&network=cronos-testnet&from=${RELAYER}&nonce=${unknown}`, "network must be a string"],
    ];
    for (const [path, what] of cases) {
      const answer = await request(opened.app).get(path);
      expect([answer.status, answer.headers["content-type"], answer.body], path).to.deep.equal([400, "application/json; charset=utf-8", { error: RequestError.invalidRequest(what) }]);
    }
  });

  it("limits lookups per client like verify, counted apart from verify", async () => {
    const opened = await openFacilitator("cronos-testnet", { RATE_LIMIT_VERIFY_PER_MINUTE: "2" });
    const unknown = keccak256(toHex("unknown"));
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await request(opened.app).get(`/v2/x402/settlements/${unknown}`)).status);
    expect(statuses).to.deep.equal([404, 404, 429]);
    const payment = await makePayment(opened.chain);
    expect((await request(opened.app).post("/v2/x402/verify").send(payment.body)).status).to.equal(200);
  });

  it("reports the embedded ledger (this instance's alone, said in /healthcheck and in one log line, at warn) and this instance's relayer key lease", async () => {
    const log = recordingLogger();
    const opened = await openFacilitator("cronos-testnet", {}, { logger: log.logger });
    const health = await request(opened.app).get("/healthcheck");
    expect(health.status).to.equal(200);
    expect(health.body.results.message).to.equal("OK");
    const { leases, ...ledger } = health.body.results.ledger;
    expect(ledger).to.deep.equal({
      backend: "sqlite",
      state: "up",
      reachable: true,
      migrations: { applied: MIGRATIONS.length, expected: MIGRATIONS.length },
      shared: false,
      note: EMBEDDED_NOTE,
    });
    expect(log.lines.filter((line) => line.message === EMBEDDED_NOTE).map((line) => [line.level, line.fields])).to.deep.equal([
      ["warn", { ledger: "sqlite", location: ":memory:" }],
    ]);
    expect(leases).to.have.length(1);
    expect(leases[0]).to.deep.include({ address: RELAYER, epoch: 1 });
  });

  it("/healthcheck?detail=1 (where the ledger is) needs API keys: 403 without any configured, the location with a key", async () => {
    const plain = await openFacilitator();
    const forbidden = await request(plain.app).get("/healthcheck?detail=1");
    expect([forbidden.status, forbidden.body]).to.deep.equal([
      403,
      { error: "Forbidden: the detailed healthcheck needs API keys configured (API_KEYS) and one of them sent as Authorization: Bearer <key>" },
    ]);
    const keyed = await openFacilitator("cronos-testnet", { API_KEYS: "operator-key-0123456789abcdef" });
    const detailed = await request(keyed.app).get("/healthcheck?detail=1").set("Authorization", "Bearer operator-key-0123456789abcdef");
    expect(detailed.status).to.equal(200);
    expect(detailed.body.results.ledger).to.deep.include({ backend: "sqlite", location: ":memory:", state: "up" });
    const open = await request(keyed.app).get("/healthcheck");
    expect(open.body.results.ledger).not.to.have.property("location");
  });

  it("answers 503 naming the ledger when its database is gone, and settle refuses without sending", async () => {
    const opened = await openFacilitator();
    await opened.facilitator.coordination.ledger.close();
    const health = await request(opened.app).get("/healthcheck");
    expect(health.status).to.equal(503);
    expect(health.body.results.message).to.match(/^ledger: LEDGER_FILE: down \(/);
    expect(health.body.results.ledger).to.deep.include({ state: "down", reachable: false });
    const payment = await makePayment(opened.chain);
    const nonce = await opened.chain.publicClient.getTransactionCount({ address: RELAYER });
    const settle = await request(opened.app).post("/v2/x402/settle").send(payment.body);
    expect(settle.status).to.equal(503);
    expect(settle.body.error).to.match(/^Service unavailable: the settlement ledger is unavailable/);
    expect(await opened.chain.publicClient.getTransactionCount({ address: RELAYER })).to.equal(nonce);
    // verify does not touch the ledger
    expect((await request(opened.app).post("/v2/x402/verify").send(payment.body)).body).to.deep.equal({ isValid: true, invalidReason: null });
  });

  it("exports the ledger's metrics: settlements pending, the oldest's age, lease changes", async () => {
    const opened = await openFacilitator();
    const payment = await makePayment(opened.chain);
    await request(opened.app).post("/v2/x402/settle").send(payment.body);
    const text = await opened.facilitator.metrics.registry.metrics();
    expect(text).to.include("x402_ledger_pending_settlements 0");
    expect(text).to.include("x402_ledger_oldest_pending_seconds 0");
    expect(text).to.include('x402_relayer_lease_changes_total{change="acquired"} 1');
    expect(text).to.include("# TYPE x402_reconciler_actions_total counter");
  });
});
