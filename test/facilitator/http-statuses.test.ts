import { expect } from "chai";
import request from "supertest";
import { makePayment, openFacilitator, openFlakyFacilitator } from "../helpers/facilitator.js";
import { RELAYER, relayerNonce } from "../helpers/settle.js";
import { withoutTimestamp } from "../helpers/time.js";

type Opened = Awaited<ReturnType<typeof openFacilitator>>;

describe("facilitator HTTP: statuses and bodies of decisions.md", () => {
  let opened: Opened;
  before(async () => {
    opened = await openFacilitator();
  });

  it("GET /v2/x402/supported lists each configured network once per dialect, with the relayers as signers", async () => {
    const response = await request(opened.app).get("/v2/x402/supported");
    expect(response.status).to.equal(200);
    expect(response.body).to.deep.equal({
      kinds: [
        { x402Version: 1, scheme: "exact", network: "cronos-testnet" },
        { x402Version: 2, scheme: "exact", network: "eip155:338" },
      ],
      extensions: ["bazaar", "payment-identifier"],
      signers: { "eip155:*": ["0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"] },
    });
  });

  it("GET /healthcheck answers the documented shape with a real per-network check", async () => {
    const asked = Date.now();
    const response = await request(opened.app).get("/healthcheck");
    const answered = Date.now();
    expect(response.status).to.equal(200);
    expect(response.body.status).to.equal("success");
    expect(response.body.results.message).to.equal("OK");
    expect(response.body.results.uptime).to.be.a("number");
    // Milliseconds (the Cronos docs' example shows a process.hrtime() pair), measured inside the round trip
    // the client saw (whole milliseconds on the client's clock: one more for rounding); the answer's time is
    // between the question and the answer.
    expect(response.body.results.responseTime).to.be.a("number").within(0, answered - asked + 1);
    expect(response.body.results.timestamp).to.be.within(asked, answered);
    const testnet = response.body.results.networks["cronos-testnet"];
    expect(testnet.ok).to.equal(true);
    expect(testnet.chainId).to.equal(338);
    expect(testnet.token).to.deep.equal({ address: opened.chain.token, hasCode: true, name: "Bridged USDC (Stargate)", version: "1" });
    expect(testnet.relayers[0].address).to.equal("0xa0Ee7A142d267C1f36714E4a8F75612F20a79720");
    expect(BigInt(testnet.relayers[0].balanceWei) > 0n).to.equal(true);
    expect(testnet.problems).to.deep.equal([]);
  });

  it("answers 503 with status error when a network is unhealthy (the relayer has no gas)", async () => {
    await opened.chain.networkHelpers.setBalance("0xa0Ee7A142d267C1f36714E4a8F75612F20a79720", 0n);
    try {
      const response = await request(opened.app).get("/healthcheck");
      expect(response.status).to.equal(503);
      expect(response.body.status).to.equal("error");
      expect(response.body.results.message).to.equal(
        "cronos-testnet: RELAYER_PRIVATE_KEY: relayer 0xa0Ee7A142d267C1f36714E4a8F75612F20a79720 holds 0 wei of gas, below RELAYER_MIN_BALANCE_WEI 1",
      );
    } finally {
      await opened.chain.networkHelpers.setBalance("0xa0Ee7A142d267C1f36714E4a8F75612F20a79720", 10n ** 22n);
    }
  });

  it("shares one healthcheck answer between callers for HEALTH_CACHE_MS", async () => {
    const cached = await openFacilitator("cronos-testnet", { HEALTH_CACHE_MS: "60000" });
    const [first, second] = await Promise.all([request(cached.app).get("/healthcheck"), request(cached.app).get("/healthcheck")]);
    await cached.chain.networkHelpers.setBalance("0xa0Ee7A142d267C1f36714E4a8F75612F20a79720", 0n);
    const third = await request(cached.app).get("/healthcheck");
    expect([first.status, second.status, third.status]).to.deep.equal([200, 200, 200]);
    expect(second.body.results.timestamp).to.equal(first.body.results.timestamp);
    expect(third.body.results.timestamp).to.equal(first.body.results.timestamp);
  });

  it("answers 404 JSON for an unknown route", async () => {
    const response = await request(opened.app).get("/v2/x402/nothing");
    expect(response.status).to.equal(404);
    expect(response.headers["content-type"]).to.match(/^application\/json/);
    expect(response.body).to.deep.equal({ error: "Not found" });
  });

  for (const route of ["verify", "settle"] as const) {
    const refusal = (text: string) =>
      route === "verify" ? { isValid: false, invalidReason: text } : { x402Version: 1, event: "payment.failed", network: "cronos-testnet", error: text };
    const unknownRefusal = (text: string) => (route === "verify" ? refusal(text) : { ...refusal(text), network: "unknown" });
    const bodyOf = (response: request.Response) => (route === "verify" ? response.body : withoutTimestamp(response.body));

    describe(`POST /v2/x402/${route}`, () => {
      it("answers 400 Invalid request for a body that is not JSON", async () => {
        const response = await request(opened.app).post(`/v2/x402/${route}`).set("Content-Type", "application/json").send("{not json");
        expect(response.status).to.equal(400);
        expect(bodyOf(response)).to.deep.equal(unknownRefusal("Invalid request: body is not valid JSON"));
      });

      it("answers 400 Invalid request naming missing and mistyped fields", async () => {
        const { body } = await makePayment(opened.chain);
        const missing = await request(opened.app).post(`/v2/x402/${route}`).send({ x402Version: 1, paymentRequirements: body.paymentRequirements });
        expect(missing.status).to.equal(400);
        expect(bodyOf(missing)).to.deep.equal(refusal("Invalid request: paymentHeader is required"));
        const noRequirements = await request(opened.app).post(`/v2/x402/${route}`).send({ x402Version: 1, paymentHeader: body.paymentHeader });
        expect(noRequirements.status).to.equal(400);
        expect(bodyOf(noRequirements)).to.deep.equal(unknownRefusal("Invalid request: paymentRequirements is required"));
        const mistyped = await request(opened.app)
          .post(`/v2/x402/${route}`)
          .send({ ...body, paymentRequirements: { ...body.paymentRequirements, maxAmountRequired: 1000000 } });
        expect(mistyped.status).to.equal(400);
        expect(bodyOf(mistyped)).to.deep.equal(refusal("Invalid request: paymentRequirements.maxAmountRequired must be a decimal string"));
        const decimal = await request(opened.app)
          .post(`/v2/x402/${route}`)
          .send({ ...body, paymentRequirements: { ...body.paymentRequirements, maxAmountRequired: "1.5" } });
        expect(decimal.status).to.equal(400);
        expect(bodyOf(decimal)).to.deep.equal(refusal("Invalid request: paymentRequirements.maxAmountRequired must be a decimal string of digits"));
        const array = await request(opened.app).post(`/v2/x402/${route}`).send([1, 2]);
        expect(array.status).to.equal(400);
        expect(bodyOf(array)).to.deep.equal(unknownRefusal("Invalid request: body must be a JSON object"));
      });

      it("answers 400 Unsupported x402Version for a header or body version other than 1", async () => {
        const { body } = await makePayment(opened.chain);
        const header = await request(opened.app).post(`/v2/x402/${route}`).set("X402-Version", "2").send(body);
        expect(header.status).to.equal(400);
        expect(bodyOf(header)).to.deep.equal(refusal("Unsupported x402Version: 2"));
        const inBody = await request(opened.app).post(`/v2/x402/${route}`).send({ ...body, x402Version: 3 });
        expect(inBody.status).to.equal(400);
        expect(bodyOf(inBody)).to.deep.equal(refusal("Unsupported x402Version: 3"));
      });

      it("answers 413 JSON for a body over 64 KiB", async () => {
        const { body } = await makePayment(opened.chain);
        const response = await request(opened.app)
          .post(`/v2/x402/${route}`)
          .send({ ...body, paymentRequirements: { ...body.paymentRequirements, description: "x".repeat(70 * 1024) } });
        expect(response.status).to.equal(413);
        expect(response.body).to.deep.equal({ error: "Payload too large: the limit is 65536 bytes" });
      });
    });
  }

  it("answers verify 500 and settle 503, in JSON, when the chain cannot be read, and sends nothing", async () => {
    const { body, payer, message } = await makePayment(opened.chain);
    const { app, fail } = await openFlakyFacilitator(opened);
    const nonceBefore = await relayerNonce(opened);
    fail();
    const verify = await request(app).post("/v2/x402/verify").send(body);
    expect(verify.status).to.equal(500);
    expect(verify.body).to.deep.equal({
      isValid: false,
      invalidReason: "Service unavailable: cannot read cronos-testnet state",
      error: "Service unavailable: cannot read cronos-testnet state",
    });
    const settle = await request(app).post("/v2/x402/settle").send(body);
    expect(settle.status).to.equal(503);
    // Not a verdict (no `event`): nothing was sent, and a retry may settle.
    expect(settle.headers["retry-after"]).to.equal("2");
    expect(withoutTimestamp(settle.body)).to.deep.equal({
      x402Version: 1,
      network: "cronos-testnet",
      error: "Service unavailable: cannot read cronos-testnet state",
    });
    // Nothing sent: the relayer's next nonce (pending included) as before, the authorization unused.
    expect(await relayerNonce(opened), `${RELAYER}'s next nonce`).to.equal(nonceBefore);
    expect(await opened.chain.contract.read.authorizationState([payer.address, message.nonce])).to.equal(false);
    const health = await request(app).get("/healthcheck");
    expect(health.status).to.equal(503);
    expect(health.body.status).to.equal("error");
    expect(health.body.results.message).to.match(/^cronos-testnet: CRONOS_TESTNET_RPC_URL: the RPC does not answer/);
  });
});

describe("facilitator rate limits (per client IP, per minute)", () => {
  it("answers the 11th verify in a minute with 429, Retry-After and RateLimit headers, even with a forged X-Forwarded-For", async () => {
    const opened = await openFacilitator("cronos-testnet", { RATE_LIMIT_VERIFY_PER_MINUTE: "10" });
    const { body } = await makePayment(opened.chain);
    const agent = request(opened.app);
    for (let i = 0; i < 10; i++) {
      const ok = await agent.post("/v2/x402/verify").set("X-Forwarded-For", `10.0.0.${i}`).send(body);
      expect(ok.status).to.equal(200);
      expect(ok.headers["ratelimit-policy"]).to.match(/^"verify"; q=10; w=60; pk=:[A-Za-z0-9+/=]+:$/);
      expect(ok.headers["ratelimit"]).to.match(new RegExp(`^"verify"; r=${9 - i}; t=\\d+$`));
    }
    const limited = await agent.post("/v2/x402/verify").set("X-Forwarded-For", "10.9.9.9").send(body);
    expect(limited.status).to.equal(429);
    expect(limited.body.error).to.equal("Too many requests");
    expect(limited.body.retryAfter).to.be.within(1, 60);
    expect(limited.headers["retry-after"]).to.equal(String(limited.body.retryAfter));
    expect(limited.headers["ratelimit"]).to.match(/^"verify"; r=0; t=\d+$/);
    // Settle has its own quota.
    expect((await agent.post("/v2/x402/settle").send(body)).status).to.equal(200);
  });

  it("answers the 6th settle in a minute with 429", async () => {
    const opened = await openFacilitator("cronos-testnet", { RATE_LIMIT_SETTLE_PER_MINUTE: "5" });
    const { body } = await makePayment(opened.chain);
    const windowOpened = Date.now(); // no later than the first request, which opens the client's minute
    for (let i = 0; i < 5; i++) {
      expect((await request(opened.app).post("/v2/x402/settle").send(body)).status).to.equal(200);
    }
    const limited = await request(opened.app).post("/v2/x402/settle").send(body);
    const elapsedMs = Date.now() - windowOpened;
    expect(limited.status).to.equal(429);
    // retryAfter: the whole seconds left of the client's minute, from 60 minus what has passed down to 60.
    const { retryAfter } = limited.body as { retryAfter: number };
    expect(retryAfter).to.be.within(Math.max(1, Math.ceil((60_000 - elapsedMs) / 1000)), 60);
    expect(limited.body).to.deep.equal({ error: "Too many requests", retryAfter });
    expect(limited.headers["retry-after"]).to.equal(String(retryAfter));
  });

  it("counts clients by X-Forwarded-For only when trusted proxies are configured", async () => {
    const opened = await openFacilitator("cronos-testnet", { RATE_LIMIT_VERIFY_PER_MINUTE: "2", TRUST_PROXY: "loopback" });
    const { body } = await makePayment(opened.chain);
    for (let i = 0; i < 6; i++) {
      const response = await request(opened.app).post("/v2/x402/verify").set("X-Forwarded-For", `203.0.113.${i}`).send(body);
      expect(response.status).to.equal(200);
    }
    await request(opened.app).post("/v2/x402/verify").set("X-Forwarded-For", "203.0.113.77").send(body);
    await request(opened.app).post("/v2/x402/verify").set("X-Forwarded-For", "203.0.113.77").send(body);
    const limited = await request(opened.app).post("/v2/x402/verify").set("X-Forwarded-For", "203.0.113.77").send(body);
    expect(limited.status).to.equal(429);
  });

  it("switches a limit off with 0", async () => {
    const opened = await openFacilitator("cronos-testnet", { RATE_LIMIT_VERIFY_PER_MINUTE: "0" });
    const { body } = await makePayment(opened.chain);
    for (let i = 0; i < 15; i++) expect((await request(opened.app).post("/v2/x402/verify").send(body)).status).to.equal(200);
  });
});
