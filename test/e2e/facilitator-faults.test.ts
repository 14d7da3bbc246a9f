import { expect } from "chai";
import express from "express";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader, wrapFetchWithPayment } from "../../src/buyer/index.js";
import { loadConfig } from "../../src/facilitator/config/index.js";
import { startFacilitator, type RunningFacilitator } from "../../src/facilitator/start.js";
import { localAccount } from "../../src/harness/accounts.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { paymentRequirements, requirePayment } from "../../src/seller/index.js";
import { tokenBalances } from "../helpers/chain.js";
import { closedPortUrl, expectAnswer, listen, type Listening } from "../helpers/http.js";
import { content, PRICE, STACK_OPTIONS, startSeller, startTestStack, type TestSeller } from "../helpers/seller.js";

/** The generic `details` of a seller's 500: the facts are in its log, not in the answer. */
const TRY_LATER = "The payment could not be processed right now; try again later";

/** A seller logger that keeps what it is given. */
function recordingLogger() {
  const entries: Array<{ message?: string; fields: Record<string, unknown> }> = [];
  return { entries, error: (fields: object, message?: string) => void entries.push({ message, fields: fields as Record<string, unknown> }) };
}

describe("e2e: the seller when the facilitator is unreachable or answers garbage (500 {error, details}, the facts logged)", function () {
  const payTo = localAccount(1).address;
  const requirements = paymentRequirements({ network: "cronos-testnet", payTo, amount: PRICE });
  const logger = recordingLogger();
  beforeEach(() => (logger.entries.length = 0));
  /** The one log line of a fault, its facts. */
  const loggedFacts = () => {
    expect(logger.entries).to.have.length(1);
    return logger.entries[0]!.fields;
  };
  /** A well-formed, signed header: it passes the seller's own check, so the facilitator is asked. */
  let header: string;
  before(async () => {
    header = await createPaymentHeader({ signer: privateKeyToAccount(generatePrivateKey()), requirements });
  });

  /** A seller for `facilitatorUrl` on an ephemeral port. */
  async function sellerFor(facilitatorUrl: string): Promise<Listening> {
    const app = express();
    app.get("/paid", requirePayment(requirements, { facilitatorUrl, timeoutMs: 5_000, logger }), (_req, res) => void res.json({ paid: true }));
    return listen(app);
  }

  it("answers 500 Facilitator verify request failed and logs the connection error when nothing listens at the facilitator URL", async () => {
    const facilitatorUrl = await closedPortUrl();
    const seller = await sellerFor(facilitatorUrl);
    try {
      const response = await fetch(`${seller.url}/paid`, { headers: { "X-PAYMENT": header } });
      await expectAnswer(response, 500, { error: "Facilitator verify request failed", details: TRY_LATER });
      expect(loggedFacts()).to.deep.equal({
        operation: "verify",
        method: "GET",
        path: "/paid",
        facilitator: facilitatorUrl,
        code: "unreachable",
        err: `facilitator verify failed: unreachable: fetch failed: connect ECONNREFUSED ${facilitatorUrl.replace("http://", "")}`,
      });
      // Without a header the seller does not need the facilitator: still a plain 402.
      expect((await fetch(`${seller.url}/paid`)).status).to.equal(402);
    } finally {
      await seller.close();
    }
  });

  describe("a garbled facilitator (a tiny server on loopback)", () => {
    type Answer = { status: number; type: string; body: string };
    const answers: Record<string, Answer> = {};
    const calls: string[] = [];
    let garbled: Listening;
    let seller: Listening;

    before(async () => {
      garbled = await listen((req, res) => {
        req.resume();
        req.on("end", () => {
          calls.push(req.url ?? "");
          const answer = answers[req.url ?? ""] ?? { status: 404, type: "text/plain", body: "no" };
          res.writeHead(answer.status, { "content-type": answer.type });
          res.end(answer.body);
        });
      });
      seller = await sellerFor(garbled.url);
    });
    after(async () => {
      await seller?.close();
      await garbled?.close();
    });
    beforeEach(() => {
      calls.length = 0;
      for (const key of Object.keys(answers)) delete answers[key];
    });

    const pay = () => fetch(`${seller.url}/paid`, { headers: { "X-PAYMENT": header } });
    const json = (body: unknown, status = 200): Answer => ({ status, type: "application/json", body: JSON.stringify(body) });

    it("answers 500 when verify's answer is not JSON", async () => {
      answers["/v2/x402/verify"] = { status: 200, type: "text/html", body: "<html><body>Gateway</body></html>" };
      await expectAnswer(await pay(), 500, { error: "Facilitator verify request failed", details: TRY_LATER });
      expect(loggedFacts().err).to.equal("facilitator verify failed: malformed (HTTP 200): answer is not JSON: <html><body>Gateway</body></html>");
      expect(calls).to.deep.equal(["/v2/x402/verify"]);
    });

    it("answers 500 when verify's answer is JSON of the wrong shape", async () => {
      answers["/v2/x402/verify"] = json({ valid: "yes" });
      await expectAnswer(await pay(), 500, { error: "Facilitator verify request failed", details: TRY_LATER });
      expect(loggedFacts().err).to.equal(
        "facilitator verify failed: malformed (HTTP 200): answer does not match the verify response schema: isValid Invalid input: expected boolean, received undefined; invalidReason Invalid input: expected string, received undefined",
      );
      expect(calls).to.deep.equal(["/v2/x402/verify"]);
    });

    it("answers 500 when verify answers an HTTP error", async () => {
      answers["/v2/x402/verify"] = { status: 502, type: "text/plain", body: "Bad Gateway" };
      await expectAnswer(await pay(), 500, { error: "Facilitator verify request failed", details: TRY_LATER });
      expect(loggedFacts()).to.include({ code: "http_status", status: 502, err: "facilitator verify failed: http_status (HTTP 502): HTTP 502: Bad Gateway" });
    });

    it("answers 500 when verify says valid but settle's answer is of the wrong shape (no content is served)", async () => {
      answers["/v2/x402/verify"] = json({ isValid: true, invalidReason: null });
      answers["/v2/x402/settle"] = json({ event: "payment.settled", txHash: "0x1234" });
      const response = await pay();
      const body = (await response.json()) as { error: string; details: string };
      expect(response.status).to.equal(500);
      expect(response.headers.get("X-PAYMENT-RESPONSE")).to.equal(null);
      expect(body).to.deep.equal({ error: "Facilitator settle request failed", details: TRY_LATER });
      expect(loggedFacts().err).to.match(/^facilitator settle failed: malformed \(HTTP 200\): answer does not match the settle response schema: /);
      expect(calls).to.deep.equal(["/v2/x402/verify", "/v2/x402/settle"]);
    });

    it("answers 500 when settle's answer is empty", async () => {
      answers["/v2/x402/verify"] = json({ isValid: true, invalidReason: null });
      answers["/v2/x402/settle"] = { status: 200, type: "application/json", body: "" };
      await expectAnswer(await pay(), 500, { error: "Facilitator settle request failed", details: TRY_LATER });
      expect(loggedFacts().err).to.equal("facilitator settle failed: malformed (HTTP 200): answer is not JSON: (empty body)");
    });
  });
});

describe("e2e: the facilitator's settle rate limit, seen through a seller", function () {
  let stack: LocalStack;
  let limited: RunningFacilitator;
  let seller: TestSeller;
  const logger = recordingLogger();

  before(async () => {
    stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"] });
    // A second facilitator, standalone over the testnet's HTTP JSON-RPC, with the limit switched on.
    limited = await startFacilitator(
      loadConfig({
        FACILITATOR_NETWORKS: "cronos-testnet",
        CRONOS_TESTNET_RPC_URL: stack.networks["cronos-testnet"]!.rpcUrl,
        // Hardhat account #8 (0x23618e81…21E8f): a PUBLIC test key, LOCAL-ONLY; funded with native gas by
        // the local chain and used by nothing else here, so its nonces are its own.
        RELAYER_PRIVATE_KEY: localAccount(8).privateKey,
        HOST: "127.0.0.1",
        PORT: "0",
        RATE_LIMIT_VERIFY_PER_MINUTE: "0",
        RATE_LIMIT_SETTLE_PER_MINUTE: "5",
        POLLING_INTERVAL_MS: "20",
        METRICS_PORT: "0",
      }),
    );
    seller = await startSeller(limited.url, stack.seller, { logger });
  });
  after(async () => {
    await seller?.close();
    await limited?.close(1_000);
    await stack?.stop();
  });

  it("pays five requests, then answers the sixth 503 Payment service busy with the facilitator's Retry-After, logs the 429, and moves nothing for it", async () => {
    const info = stack.networks["cronos-testnet"]!;
    const buyer = privateKeyToAccount(info.buyers[0]!.privateKey);
    const paidFetch = wrapFetchWithPayment(fetch, { signer: buyer, maxAmount: PRICE });
    const url = `${seller.url}${seller.routes.testnet}`;
    const before = await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller]);

    for (let i = 0; i < 5; i++) {
      const response = await paidFetch(url);
      expect(response.status, `payment ${i + 1}`).to.equal(200);
      expect(await response.json()).to.deep.include(content(seller.routes.testnet));
    }
    const afterFive = await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller]);
    expect(afterFive).to.deep.equal([before[0]! - 5n * PRICE, before[1]! + 5n * PRICE]);

    // The buyer's paying fetch hands the seller's 503 over as it is (it does not retry by itself).
    const sixth = await paidFetch(url);
    const retryAfter = sixth.headers.get("retry-after");
    await expectAnswer(sixth, 503, { error: "Payment service busy", details: TRY_LATER });
    // The buyer is not handed the facilitator's 429 body; the seller's log has it, and its wait is passed on.
    expect(logger.entries).to.have.length(1);
    const facts = logger.entries[0]!.fields as { status: number; err: string };
    expect(facts.status).to.equal(429);
    const match = facts.err.match(/^facilitator settle failed: http_status \(HTTP 429\): HTTP 429: (\{.*\})$/);
    expect(match, facts.err).to.not.equal(null);
    const limitAnswer = JSON.parse(match![1]!) as { error: string; retryAfter: number };
    expect(limitAnswer.error).to.equal("Too many requests");
    expect(limitAnswer.retryAfter).to.be.within(1, 60);
    expect(retryAfter).to.equal(String(limitAnswer.retryAfter));
    expect(await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller])).to.deep.equal(afterFive);
  });
});
