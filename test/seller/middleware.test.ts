import { expect } from "chai";
import express, { type RequestHandler } from "express";
import { privateKeyToAccount } from "viem/accounts";
import { createV2PaymentPayload, decodePaymentResponse } from "../../src/buyer/index.js";
import {
  createFacilitatorClient,
  getPayment,
  InvalidRequirementsError,
  paymentRequirements,
  requirePayment,
  type RequirePaymentOptions,
  type RequirementsSource,
} from "../../src/seller/index.js";
import { VerifyReason } from "../../src/protocol/reasons.js";
import { decodePaymentHeader } from "../../src/protocol/header.js";
import { closedPortUrl, decodeBase64Json, listen } from "../helpers/http.js";
import {
  json,
  settleFailed,
  startStandInFacilitator,
  SETTLED,
  type StandInFacilitator,
} from "../helpers/stand-in-facilitator.js";
import { VECTOR_A_HEADER, VECTOR_PAYEE, VECTOR_SIGNER, VECTOR_V2_OFFER } from "../helpers/vectors.js";

const REQUIREMENTS = paymentRequirements({
  network: "cronos-testnet",
  payTo: VECTOR_PAYEE,
  amount: 1_000_000n,
  description: "A premium answer",
  resource: "http://127.0.0.1/premium",
});
const RECEIPT = {
  txHash: SETTLED.txHash,
  from: SETTLED.from,
  to: SETTLED.to,
  value: SETTLED.value,
  blockNumber: SETTLED.blockNumber,
  timestamp: SETTLED.timestamp,
};
const CONTENT = { answer: 42 };

type SellerOptions = Omit<RequirePaymentOptions, "facilitator" | "facilitatorUrl" | "timeoutMs" | "settleTimeoutMs"> & {
  timeoutMs?: number;
  settleTimeoutMs?: number;
};

const paymentRequiredBody = (requirements: unknown, extra: { error: string; reason?: string }) => ({
  x402Version: 1,
  paymentRequirements: requirements,
  accepts: [requirements],
  ...extra,
});

describe("seller: requirePayment", () => {
  let standIn: StandInFacilitator;
  const closers: Array<() => Promise<void>> = [];
  /** What the middleware logged (every seller here logs into it). */
  const logged: Array<{ message?: string; fields: Record<string, unknown> }> = [];
  const logger = { error: (fields: object, message?: string) => void logged.push({ message, fields: fields as Record<string, unknown> }) };
  before(async () => {
    standIn = await startStandInFacilitator();
  });
  after(async () => {
    await standIn.close();
  });
  beforeEach(() => {
    standIn.reset();
    logged.length = 0;
  });
  afterEach(async () => {
    await Promise.all(closers.splice(0).map((close) => close()));
  });

  /** Runs a seller on loopback: `POST|GET /premium` behind requirePayment; counts handler runs. */
  async function startSeller(
    requirements: RequirementsSource = REQUIREMENTS,
    options: SellerOptions = {},
    setup: { handler?: RequestHandler; bodyParser?: boolean } = {},
  ) {
    const state = { handlerRuns: 0 };
    const app = express();
    if (setup.bodyParser) app.use(express.json());
    const handler: RequestHandler = setup.handler ?? ((_req, res) => void res.json(CONTENT));
    const middleware = requirePayment(requirements, { facilitatorUrl: standIn.url, logger, ...options });
    app.all("/premium", middleware, (req, res, next) => {
      state.handlerRuns += 1;
      return handler(req, res, next);
    });
    const server = await listen(app);
    closers.push(server.close);
    return { url: `${server.url}/premium`, state };
  }

  const expectFacilitatorCalls = (...paths: string[]) => {
    expect(standIn.requests.map((request) => request.path)).to.deep.equal(paths.map((path) => `/v2/x402/${path}`));
    for (const request of standIn.requests) {
      expect(request.method).to.equal("POST");
      expect(request.headers["content-type"]).to.equal("application/json");
      expect(request.headers["x402-version"]).to.equal("1");
      expect(request.body).to.deep.equal({ x402Version: 1, paymentHeader: VECTOR_A_HEADER, paymentRequirements: REQUIREMENTS });
    }
  };

  it("answers 402 with the requirements (object and accepts list) when there is no payment", async () => {
    const seller = await startSeller();
    const response = await fetch(seller.url);
    expect(response.status).to.equal(402);
    expect(await response.json()).to.deep.equal(paymentRequiredBody(REQUIREMENTS, { error: "Payment Required" }));
    expect(response.headers.get("x-payment-response")).to.equal(null);
    expect(standIn.requests).to.deep.equal([]);
    expect(seller.state.handlerRuns).to.equal(0);
  });

  it("verifies, settles and runs the handler for a payment in X-PAYMENT (any case)", async () => {
    const seller = await startSeller();
    const response = await fetch(seller.url, { headers: { "x-Payment": VECTOR_A_HEADER } });
    expect(response.status).to.equal(200);
    expect(await response.json()).to.deep.equal({ ...CONTENT, payment: RECEIPT });
    const paymentResponse = response.headers.get("X-PAYMENT-RESPONSE");
    expect(paymentResponse).to.equal(Buffer.from(JSON.stringify(SETTLED)).toString("base64"));
    expect(decodePaymentResponse(paymentResponse ?? "")).to.deep.equal(SETTLED);
    expectFacilitatorCalls("verify", "settle");
    expect(seller.state.handlerRuns).to.equal(1);
  });

  for (const bodyParser of [true, false]) {
    it(`takes the header from a JSON body field paymentHeader (${bodyParser ? "after" : "without"} express.json())`, async () => {
      const seller = await startSeller(REQUIREMENTS, {}, {
        bodyParser,
        handler: (req, res) => void res.json({ echoed: req.body }),
      });
      const body = { paymentHeader: VECTOR_A_HEADER, question: "life" };
      const response = await fetch(seller.url, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(response.status).to.equal(200);
      // The body stays readable by the handler when the middleware parsed it.
      expect(await response.json()).to.deep.equal({ echoed: body, payment: RECEIPT });
      expectFacilitatorCalls("verify", "settle");
    });
  }

  it("answers 402 with the reason when verify says isValid false, without settling", async () => {
    standIn.answers.verify = json({ isValid: false, invalidReason: "Authorization expired" });
    const seller = await startSeller();
    const response = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
    expect(response.status).to.equal(402);
    expect(await response.json()).to.deep.equal(
      paymentRequiredBody(REQUIREMENTS, { error: "Payment verification failed", reason: "Authorization expired" }),
    );
    expectFacilitatorCalls("verify");
    expect(seller.state.handlerRuns).to.equal(0);
  });

  it("answers 402 with the settle error when settle says payment.failed", async () => {
    standIn.answers.settle = json(settleFailed("ERC20: transfer amount exceeds balance"));
    const seller = await startSeller();
    const response = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
    expect(response.status).to.equal(402);
    expect(await response.json()).to.deep.equal(
      paymentRequiredBody(REQUIREMENTS, { error: "Payment settlement failed", reason: "ERC20: transfer amount exceeds balance" }),
    );
    expect(response.headers.get("x-payment-response")).to.equal(null);
    expectFacilitatorCalls("verify", "settle");
    expect(seller.state.handlerRuns).to.equal(0);
  });

  it("answers 402 without calling the facilitator when the header is not a payment", async () => {
    const seller = await startSeller();
    const notBase64 = await fetch(seller.url, { headers: { "X-PAYMENT": "%%% not base64 %%%" } });
    expect(notBase64.status).to.equal(402);
    expect(await notBase64.json()).to.deep.equal(
      paymentRequiredBody(REQUIREMENTS, { error: "Payment verification failed", reason: VerifyReason.invalidBase64 }),
    );
    const notPayment = await fetch(seller.url, {
      headers: { "X-PAYMENT": Buffer.from(JSON.stringify({ hello: "world" })).toString("base64") },
    });
    expect(notPayment.status).to.equal(402);
    const body: unknown = await notPayment.json();
    expect(body).to.have.property("error", "Payment verification failed");
    expect(body).to.have.property("reason").that.matches(/^Invalid paymentHeader: x402Version/);
    expect(standIn.requests).to.deep.equal([]);
    expect(seller.state.handlerRuns).to.equal(0);
  });

  describe("a busy facilitator (429 or 503) answers the buyer 503 with Retry-After and a generic body", () => {
    const cases = [
      { title: "verify answers 429 with Retry-After: 17", operation: "verify", answer: () => json({ error: "Too many requests", retryAfter: 17 }, 429, { "Retry-After": "17" }), retryAfter: "17" },
      { title: "verify answers 503 without Retry-After", operation: "verify", answer: () => json({ error: "Service unavailable" }, 503), retryAfter: "5" },
      { title: "settle answers 429 with Retry-After: 42", operation: "settle", answer: () => json({ error: "Too many requests", retryAfter: 42 }, 429, { "Retry-After": "42" }), retryAfter: "42" },
      { title: "settle answers 503 without Retry-After", operation: "settle", answer: () => json(settleFailed("Service unavailable: the settlement ledger is unavailable"), 503), retryAfter: "5" },
      // A date: read against the clock (exact conversions: test/seller/facilitator-client.test.ts); two days ahead is bounded to a day.
      { title: "settle answers 503 with a Retry-After date two days ahead (bounded to a day)", operation: "settle", answer: () => json({ error: "Service unavailable" }, 503, { "Retry-After": new Date(Date.now() + 2 * 86_400_000).toUTCString() }), retryAfter: "86400" },
    ] as const;
    for (const busy of cases) {
      it(`when ${busy.title}`, async () => {
        standIn.answers[busy.operation] = busy.answer();
        const seller = await startSeller();
        const response = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
        expect(response.status).to.equal(503);
        expect(response.headers.get("retry-after")).to.equal(busy.retryAfter);
        // The buyer learns to come back later, not the facilitator's body or address.
        expect(await response.json()).to.deep.equal({ error: "Payment service busy", details: "The payment could not be processed right now; try again later" });
        expect(logged).to.have.length(1);
        expect(logged[0]?.message).to.equal(`facilitator ${busy.operation} failed`);
        expect(logged[0]?.fields).to.include({ operation: busy.operation, code: "http_status" });
        expectFacilitatorCalls(...(busy.operation === "verify" ? (["verify"] as const) : (["verify", "settle"] as const)));
        expect(seller.state.handlerRuns).to.equal(0);
      });
    }
  });

  describe("facilitator faults answer 500 {error, details} with a generic details text and log the facts", () => {
    const faults = [
      {
        title: "verify answers HTTP 500",
        program: (s: StandInFacilitator) => (s.answers.verify = json({ error: "Internal error" }, 500)),
        error: "Facilitator verify request failed",
        details: 'facilitator verify failed: http_status (HTTP 500): HTTP 500: {"error":"Internal error"}',
        calls: ["verify"],
      },
      {
        title: "verify answers HTTP 400 with a verify-shaped body",
        program: (s: StandInFacilitator) =>
          (s.answers.verify = json({ isValid: false, invalidReason: "Invalid request: x" }, 400)),
        error: "Facilitator verify request failed",
        details:
          'facilitator verify failed: http_status (HTTP 400): HTTP 400: {"isValid":false,"invalidReason":"Invalid request: x"}',
        calls: ["verify"],
      },
      {
        title: "verify answers garbage",
        program: (s: StandInFacilitator) => (s.answers.verify = { kind: "text", body: "garbage" }),
        error: "Facilitator verify request failed",
        details: "facilitator verify failed: malformed (HTTP 200): answer is not JSON: garbage",
        calls: ["verify"],
      },
      {
        title: "verify answers JSON of the wrong shape",
        program: (s: StandInFacilitator) => (s.answers.verify = json({ isValid: "yes", invalidReason: null })),
        error: "Facilitator verify request failed",
        details:
          "facilitator verify failed: malformed (HTTP 200): answer does not match the verify response schema: isValid Invalid input: expected boolean, received string",
        calls: ["verify"],
      },
      {
        title: "verify hangs past the client time-out",
        program: (s: StandInFacilitator) => (s.answers.verify = { kind: "hang" }),
        error: "Facilitator verify request failed",
        details: "facilitator verify failed: timeout: no answer within 200 ms",
        calls: ["verify"],
      },
      {
        title: "settle answers HTTP 500",
        program: (s: StandInFacilitator) => (s.answers.settle = json({ error: "Internal error" }, 500)),
        error: "Facilitator settle request failed",
        details: 'facilitator settle failed: http_status (HTTP 500): HTTP 500: {"error":"Internal error"}',
        calls: ["verify", "settle"],
      },
      {
        title: "settle answers JSON of the wrong shape",
        program: (s: StandInFacilitator) => (s.answers.settle = json({ ...SETTLED, txHash: "0x1234" })),
        error: "Facilitator settle request failed",
        details: /^facilitator settle failed: malformed \(HTTP 200\): answer does not match the settle response schema: txHash/,
        calls: ["verify", "settle"],
      },
      {
        title: "settle hangs past the client time-out",
        program: (s: StandInFacilitator) => (s.answers.settle = { kind: "hang" }),
        error: "Facilitator settle request failed",
        details: "facilitator settle failed: timeout: no answer within 200 ms",
        calls: ["verify", "settle"],
      },
    ];
    for (const fault of faults) {
      it(`when ${fault.title}`, async () => {
        fault.program(standIn);
        const seller = await startSeller(REQUIREMENTS, { timeoutMs: 200, settleTimeoutMs: 200 });
        const response = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
        expect(response.status).to.equal(500);
        // The buyer learns that it failed, not how: no status, address or body of the facilitator.
        expect(await response.json()).to.deep.equal({ error: fault.error, details: "The payment could not be processed right now; try again later" });
        expect(logged).to.have.length(1);
        const [entry] = logged;
        const operation = fault.calls.at(-1);
        expect(entry?.message).to.equal(`facilitator ${operation} failed`);
        expect(entry?.fields).to.include({ operation, method: "GET", path: "/premium", facilitator: standIn.url });
        if (typeof fault.details === "string") expect(entry?.fields.err).to.equal(fault.details);
        else expect(entry?.fields.err).to.match(fault.details);
        expectFacilitatorCalls(...fault.calls);
        expect(seller.state.handlerRuns).to.equal(0);
      });
    }

    it("when the facilitator is a closed port", async () => {
      const app = express();
      const facilitatorUrl = await closedPortUrl();
      app.get("/premium", requirePayment(REQUIREMENTS, { facilitatorUrl, logger }), (_req, res) => {
        res.json(CONTENT);
      });
      const server = await listen(app);
      closers.push(server.close);
      const response = await fetch(`${server.url}/premium`, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect(response.status).to.equal(500);
      const text = await response.text();
      expect(JSON.parse(text)).to.deep.equal({ error: "Facilitator verify request failed", details: "The payment could not be processed right now; try again later" });
      expect(text).to.not.include("ECONNREFUSED");
      expect(text).to.not.include(facilitatorUrl.replace("http://", ""));
      expect(logged.map((entry) => entry.fields)).to.deep.equal([
        {
          operation: "verify",
          method: "GET",
          path: "/premium",
          facilitator: facilitatorUrl,
          code: "unreachable",
          err: `facilitator verify failed: unreachable: fetch failed: connect ECONNREFUSED ${facilitatorUrl.replace("http://", "")}`,
        },
      ]);
    });
  });

  describe("requirements", () => {
    it("computes requirements per request (async function of req)", async () => {
      const priced = (amount: string) => ({ ...REQUIREMENTS, maxAmountRequired: amount });
      const seller = await startSeller(async (req) => priced(req.query.big === "1" ? "5000000" : "1000000"));
      const unpaid = await fetch(`${seller.url}?big=1`);
      expect(unpaid.status).to.equal(402);
      expect(await unpaid.json()).to.deep.equal(paymentRequiredBody(priced("5000000"), { error: "Payment Required" }));
      const paid = await fetch(`${seller.url}?big=1`, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect(paid.status).to.equal(200);
      expect(standIn.requests.map((request) => request.body)).to.deep.equal([
        { x402Version: 1, paymentHeader: VECTOR_A_HEADER, paymentRequirements: priced("5000000") },
        { x402Version: 1, paymentHeader: VECTOR_A_HEADER, paymentRequirements: priced("5000000") },
      ]);
    });

    it("answers 500 when the requirements function throws or returns invalid requirements", async () => {
      const throwing = await startSeller(() => {
        throw new Error("price feed down");
      });
      const generic = { error: "Payment requirements unavailable", details: "The payment could not be processed right now; try again later" };
      const first = await fetch(throwing.url);
      expect(first.status).to.equal(500);
      expect(await first.json()).to.deep.equal(generic);
      const invalid = await startSeller(() => ({ ...REQUIREMENTS, payTo: "0x1234" }));
      const second = await fetch(invalid.url);
      expect(second.status).to.equal(500);
      expect(await second.json()).to.deep.equal(generic);
      expect(logged).to.deep.equal([
        { message: "payment requirements unavailable", fields: { method: "GET", path: "/premium", err: "price feed down" } },
        {
          message: "payment requirements unavailable",
          fields: { method: "GET", path: "/premium", err: "invalid payment requirements: payTo must be a 0x-prefixed 20-byte address" },
        },
      ]);
    });

    it("throws InvalidRequirementsError at set-up for invalid fixed requirements", () => {
      expect(() => requirePayment({ ...REQUIREMENTS, maxAmountRequired: "1.5" }, { facilitatorUrl: standIn.url })).to.throw(
        InvalidRequirementsError,
        /maxAmountRequired/,
      );
    });

    it("lets the description option override the requirements' description", async () => {
      const seller = await startSeller(REQUIREMENTS, { description: "Weather for Lisbon" });
      const response = await fetch(seller.url);
      expect(await response.json()).to.deep.equal(
        paymentRequiredBody({ ...REQUIREMENTS, description: "Weather for Lisbon" }, { error: "Payment Required" }),
      );
    });

    it("accepts a facilitator client instead of a URL", async () => {
      const app = express();
      const facilitator = createFacilitatorClient({ url: standIn.url });
      app.get("/premium", requirePayment(REQUIREMENTS, { facilitator }), (_req, res) => void res.json(CONTENT));
      const server = await listen(app);
      closers.push(server.close);
      const response = await fetch(`${server.url}/premium`, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect(response.status).to.equal(200);
      expectFacilitatorCalls("verify", "settle");
    });
  });

  describe("content hand-off", () => {
    it("gives the handler res.locals.payment and getPayment(req)", async () => {
      const seller = await startSeller(REQUIREMENTS, {}, {
        handler: (req, res) => {
          const context = getPayment(req);
          res.type("text/plain").send(
            JSON.stringify({ locals: res.locals.payment, context: context && { ...context, settlement: undefined } }),
          );
        },
      });
      const response = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect(response.status).to.equal(200);
      expect(JSON.parse(await response.text())).to.deep.equal({
        locals: RECEIPT,
        context: { dialect: "cronos", receipt: RECEIPT, requirements: REQUIREMENTS, paymentHeader: VECTOR_A_HEADER },
      });
    });

    it("merges payment into objects sent with res.send too, and leaves arrays and a handler's own payment alone", async () => {
      const cases: Array<[string, RequestHandler, unknown]> = [
        ["send(object)", (_req, res) => void res.send({ a: 1 }), { a: 1, payment: RECEIPT }],
        ["json(array)", (_req, res) => void res.json([1, 2]), [1, 2]],
        ["json(own payment)", (_req, res) => void res.json({ payment: "mine" }), { payment: "mine" }],
        ["status(201).json", (_req, res) => void res.status(201).json({ created: true }), { created: true, payment: RECEIPT }],
      ];
      for (const [name, handler, expected] of cases) {
        const seller = await startSeller(REQUIREMENTS, {}, { handler });
        const response = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
        expect(await response.json(), name).to.deep.equal(expected);
        expect(response.headers.get("x-payment-response"), name).to.be.a("string");
      }
    });

    it("does not merge when mergePaymentIntoJson is false", async () => {
      const seller = await startSeller(REQUIREMENTS, { mergePaymentIntoJson: false });
      const response = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect(response.status).to.equal(200);
      expect(await response.json()).to.deep.equal(CONTENT);
    });
  });

  describe("x402 v2 buyers (PAYMENT-SIGNATURE) on the same route", () => {
    const V2_OFFER = VECTOR_V2_OFFER;
    const V2_SETTLED = { success: true, payer: SETTLED.from, transaction: SETTLED.txHash, network: "eip155:338" };
    const signedPayment = () =>
      createV2PaymentPayload({
        signer: privateKeyToAccount(VECTOR_SIGNER.privateKey),
        requirements: V2_OFFER,
        resource: { url: "http://127.0.0.1/premium" },
      });

    it("answers 402 with the Cronos body and the x402 v2 offer in PAYMENT-REQUIRED", async () => {
      const seller = await startSeller();
      const response = await fetch(seller.url);
      expect(response.status).to.equal(402);
      expect(await response.json()).to.deep.equal(paymentRequiredBody(REQUIREMENTS, { error: "Payment Required" }));
      expect(decodeBase64Json(response.headers.get("PAYMENT-REQUIRED"))).to.deep.equal({
        x402Version: 2,
        error: "Payment Required",
        resource: { url: "http://127.0.0.1/premium", description: "A premium answer", mimeType: "application/json" },
        accepts: [V2_OFFER],
      });
    });

    it("verifies and settles a PAYMENT-SIGNATURE payment in x402 v2 and answers PAYMENT-RESPONSE", async () => {
      standIn.answers.verify = json({ isValid: true, payer: SETTLED.from });
      standIn.answers.settle = json(V2_SETTLED);
      const seller = await startSeller(REQUIREMENTS, {}, {
        handler: (req, res) => void res.json({ ...CONTENT, dialect: getPayment(req)?.dialect }),
      });
      const payment = await signedPayment();
      const response = await fetch(seller.url, { headers: { "PAYMENT-SIGNATURE": Buffer.from(JSON.stringify(payment)).toString("base64") } });
      expect(response.status).to.equal(200);
      expect(await response.json()).to.deep.equal({
        ...CONTENT,
        dialect: "x402v2",
        payment: { txHash: SETTLED.txHash, from: SETTLED.from, to: VECTOR_PAYEE, value: "1000000" },
      });
      expect(decodeBase64Json(response.headers.get("PAYMENT-RESPONSE"))).to.deep.equal(V2_SETTLED);
      expect(response.headers.get("X-PAYMENT-RESPONSE")).to.equal(null);
      expect(standIn.requests.map((request) => [request.path, request.headers["x402-version"], request.body])).to.deep.equal(
        ["verify", "settle"].map((operation) => [
          `/v2/x402/${operation}`,
          "2",
          { x402Version: 2, paymentPayload: payment, paymentRequirements: V2_OFFER },
        ]),
      );
    });

    it("answers 402 with the facilitator's code in PAYMENT-REQUIRED when x402 v2 verify refuses", async () => {
      standIn.answers.verify = json({
        isValid: false,
        invalidReason: "invalid_exact_evm_insufficient_balance",
        invalidMessage: "ERC20: transfer amount exceeds balance",
        payer: SETTLED.from,
      });
      const seller = await startSeller();
      const signature = Buffer.from(JSON.stringify(await signedPayment())).toString("base64");
      const response = await fetch(seller.url, { headers: { "PAYMENT-SIGNATURE": signature } });
      expect(response.status).to.equal(402);
      expect(await response.json()).to.deep.equal(
        paymentRequiredBody(REQUIREMENTS, { error: "Payment verification failed", reason: "ERC20: transfer amount exceeds balance" }),
      );
      expect(decodeBase64Json(response.headers.get("PAYMENT-REQUIRED"))).to.include({ error: "invalid_exact_evm_insufficient_balance" });
      expect(standIn.requests.map((request) => request.path)).to.deep.equal(["/v2/x402/verify"]);
      expect(seller.state.handlerRuns).to.equal(0);
    });

    it("answers 402 without calling the facilitator when PAYMENT-SIGNATURE is not an x402 v2 payment", async () => {
      const seller = await startSeller();
      for (const [value, reason] of [
        ["%%%", "Invalid paymentPayload: PAYMENT-SIGNATURE is not base64 JSON of an object"],
        [Buffer.from(JSON.stringify({ x402Version: 2 })).toString("base64"), "Invalid paymentPayload: accepted is required; payload is required"],
      ]) {
        const response = await fetch(seller.url, { headers: { "PAYMENT-SIGNATURE": value! } });
        expect(response.status).to.equal(402);
        expect(await response.json()).to.deep.equal(paymentRequiredBody(REQUIREMENTS, { error: "Payment verification failed", reason }));
        expect(decodeBase64Json(response.headers.get("PAYMENT-REQUIRED"))).to.include({ error: "unsupported_payload_type" });
      }
      expect(standIn.requests).to.deep.equal([]);
    });
  });

  describe("the retry window: a settled payment is served again only within maxTimeoutSeconds of its settlement", () => {
    const SETTLED_AT = Date.parse(SETTLED.timestamp);
    const WINDOW_MS = 300_000; // REQUIREMENTS' maxTimeoutSeconds
    const VECTOR_A = decodePaymentHeader(VECTOR_A_HEADER);
    if (!VECTOR_A.ok) throw new Error("vector A does not decode");
    const { from, nonce } = VECTOR_A.payload.authorization;
    /** The facilitator's record of vector A settled to the route's payee at its price (what a lookup answers). */
    const RECORD = {
      status: "settled",
      network: "cronos-testnet",
      from,
      to: VECTOR_PAYEE,
      value: "1000000",
      nonce,
      txHash: SETTLED.txHash,
      transactions: [SETTLED.txHash],
      blockNumber: SETTLED.blockNumber,
      timestamp: SETTLED.timestamp,
    };
    const USED = { isValid: false, invalidReason: "Authorization already used" };
    const windowEnded = (until: number) => ({
      error: "Payment already used",
      reason: `this payment was settled at ${SETTLED.timestamp}, and a payment is served again only within maxTimeoutSeconds (300 s) of its settlement, until ${new Date(until).toISOString()}; sign a new payment`,
    });

    it("holds a settle answer to its block time: served up to settlement + maxTimeoutSeconds by the seller's clock, 402 Payment already used a millisecond later (a facilitator that repeats its first answer)", async () => {
      let now = SETTLED_AT + WINDOW_MS;
      const seller = await startSeller(REQUIREMENTS, { clock: () => now });
      const served = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect([served.status, await served.json()]).to.deep.equal([200, { ...CONTENT, payment: RECEIPT }]);

      now += 1;
      const late = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect([late.status, await late.json()]).to.deep.equal([402, paymentRequiredBody(REQUIREMENTS, windowEnded(SETTLED_AT + WINDOW_MS))]);
      expect(late.headers.get("X-PAYMENT-RESPONSE")).to.equal(null);
      expect(decodeBase64Json(late.headers.get("PAYMENT-REQUIRED"))).to.include({ error: "invalid_exact_evm_nonce_already_used" });
      expect(seller.state.handlerRuns).to.equal(1);
    });

    it("serves a retry the facilitator calls used from its record of that payer and nonce, in the settle answer's shape, within the window only", async () => {
      standIn.answers.verify = json(USED);
      standIn.answers.settlements = json(RECORD);
      let now = SETTLED_AT + 1_000;
      const seller = await startSeller(REQUIREMENTS, { clock: () => now });
      const retried = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect([retried.status, await retried.json()]).to.deep.equal([200, { ...CONTENT, payment: RECEIPT }]);
      expect(decodePaymentResponse(retried.headers.get("X-PAYMENT-RESPONSE") ?? "")).to.deep.equal(SETTLED);
      expect(standIn.requests.map((request) => [request.method, request.path, request.query])).to.deep.equal([
        ["POST", "/v2/x402/verify", {}],
        ["GET", "/v2/x402/settlements", { network: "cronos-testnet", from, nonce }],
      ]);

      now = SETTLED_AT + WINDOW_MS + 1;
      const late = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect([late.status, await late.json()]).to.deep.equal([402, paymentRequiredBody(REQUIREMENTS, windowEnded(SETTLED_AT + WINDOW_MS))]);
      expect(seller.state.handlerRuns).to.equal(1);
    });

    it("does not serve a used payment whose record is not this route's: another payee, another value, not settled, unknown (402 as the facilitator said)", async () => {
      standIn.answers.verify = json(USED);
      const seller = await startSeller(REQUIREMENTS, { clock: () => SETTLED_AT });
      const records: unknown[] = [
        { ...RECORD, to: VECTOR_SIGNER.address },
        { ...RECORD, value: "1" },
        { ...RECORD, from: VECTOR_PAYEE },
        { ...RECORD, status: "pending", blockNumber: undefined, timestamp: undefined },
        { ...RECORD, status: "failed", error: "Transaction failed on-chain" },
      ];
      for (const record of records) {
        standIn.answers.settlements = json(record);
        const response = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
        expect([response.status, await response.json()], JSON.stringify(record)).to.deep.equal([
          402,
          paymentRequiredBody(REQUIREMENTS, { error: "Payment verification failed", reason: "Authorization already used" }),
        ]);
      }
      standIn.answers.settlements = json({ error: "Not found" }, 404);
      const unknown = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect(unknown.status).to.equal(402);
      expect(seller.state.handlerRuns).to.equal(0);
    });

    it("answers a retry whose lookup fails: 503 with Retry-After when the facilitator is busy, else the facilitator's refusal (logged); a lookup that hangs ends at timeoutMs", async () => {
      standIn.answers.verify = json(USED);
      const seller = await startSeller(REQUIREMENTS, { clock: () => SETTLED_AT, timeoutMs: 300 });
      const refusal = paymentRequiredBody(REQUIREMENTS, { error: "Payment verification failed", reason: "Authorization already used" });

      standIn.answers.settlements = json({ error: "Too many requests", retryAfter: 7 }, 429, { "Retry-After": "7" });
      const busy = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect([busy.status, busy.headers.get("Retry-After"), await busy.json()]).to.deep.equal([
        503,
        "7",
        { error: "Payment service busy", details: "The payment could not be processed right now; try again later" },
      ]);

      standIn.answers.settlements = json({ error: "Internal error" }, 500);
      const broken = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect([broken.status, await broken.json()]).to.deep.equal([402, refusal]);

      // A lookup that never answers: given up at its time-out (the log's `timeout` below), the refusal answered.
      standIn.answers.settlements = { kind: "hang" };
      const hung = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect([hung.status, await hung.json()]).to.deep.equal([402, refusal]);

      expect(logged.map((line) => [line.message, line.fields.operation, line.fields.code, line.fields.status])).to.deep.equal([
        ["facilitator lookup failed", "lookup", "http_status", 429],
        ["facilitator lookup failed", "lookup", "http_status", 500],
        ["facilitator lookup failed", "lookup", "timeout", undefined],
      ]);
      expect(seller.state.handlerRuns).to.equal(0);
    });

    describe("x402 v2 under a payment identifier (the facilitator answers a repeat as the first settle, without a time)", () => {
      const V2_SETTLED = { success: true, payer: SETTLED.from, transaction: SETTLED.txHash, network: "eip155:338" };
      const identifiedPayment = async () => {
        const payment = await createV2PaymentPayload({
          signer: privateKeyToAccount(VECTOR_SIGNER.privateKey),
          requirements: VECTOR_V2_OFFER,
          resource: { url: "http://127.0.0.1/premium" },
          paymentId: "pay_0123456789abcdef",
        });
        return { payment, header: Buffer.from(JSON.stringify(payment)).toString("base64") };
      };
      beforeEach(() => {
        standIn.answers.verify = json({ isValid: true, payer: SETTLED.from });
        standIn.answers.settle = json(V2_SETTLED);
      });

      it("reads the settlement's time from the facilitator's record of that payer and nonce: served within the window, 402 Payment already used after it", async () => {
        const { payment, header } = await identifiedPayment();
        const authorization = payment.payload.authorization;
        standIn.answers.settlements = json({ ...RECORD, network: "eip155:338", from: authorization.from, nonce: authorization.nonce });
        let now = SETTLED_AT + WINDOW_MS;
        const seller = await startSeller(REQUIREMENTS, { clock: () => now, paymentIdentifier: "optional" });
        const served = await fetch(seller.url, { headers: { "PAYMENT-SIGNATURE": header } });
        expect([served.status, await served.json()]).to.deep.equal([200, { ...CONTENT, payment: { txHash: SETTLED.txHash, from: SETTLED.from, to: VECTOR_PAYEE, value: "1000000" } }]);
        expect(decodeBase64Json(served.headers.get("PAYMENT-RESPONSE"))).to.deep.equal(V2_SETTLED);
        expect(standIn.requests.map((request) => [request.path, request.query])).to.deep.equal([
          ["/v2/x402/verify", {}],
          ["/v2/x402/settle", {}],
          ["/v2/x402/settlements", { network: "eip155:338", from: authorization.from, nonce: authorization.nonce }],
        ]);

        now += 1;
        const late = await fetch(seller.url, { headers: { "PAYMENT-SIGNATURE": header } });
        expect([late.status, await late.json()]).to.deep.equal([402, paymentRequiredBody(REQUIREMENTS, windowEnded(SETTLED_AT + WINDOW_MS))]);
        expect(decodeBase64Json(late.headers.get("PAYMENT-REQUIRED"))).to.include({ error: "invalid_exact_evm_nonce_already_used" });
        expect(late.headers.get("PAYMENT-RESPONSE")).to.equal(null);
        expect(seller.state.handlerRuns).to.equal(1);
      });

      it("serves nothing it cannot date: a record that is missing, names another transaction, or a lookup that fails is 500 (busy: 503), never the resource", async () => {
        const { payment, header } = await identifiedPayment();
        const authorization = payment.payload.authorization;
        const record = { ...RECORD, network: "eip155:338", from: authorization.from, nonce: authorization.nonce };
        const seller = await startSeller(REQUIREMENTS, { clock: () => SETTLED_AT, paymentIdentifier: "optional" });
        const failed = { error: "Facilitator settlement lookup failed", details: "The payment could not be processed right now; try again later" };
        const cases: Array<[unknown, number, unknown]> = [
          [json({ error: "Not found" }, 404), 500, failed],
          [json({ ...record, txHash: `0x${"cd".repeat(32)}`, transactions: [`0x${"cd".repeat(32)}`] }), 500, failed],
          [json({ ...record, value: "999999" }), 500, failed],
          [json({ error: "Internal error" }, 500), 500, failed],
          [json({ status: "settled" }), 500, failed],
          [json({ error: "Too many requests" }, 429, { "Retry-After": "3" }), 503, { error: "Payment service busy", details: "The payment could not be processed right now; try again later" }],
        ];
        for (const [answer, status, body] of cases) {
          standIn.answers.settlements = answer as typeof standIn.answers.settlements;
          const response = await fetch(seller.url, { headers: { "PAYMENT-SIGNATURE": header } });
          expect([response.status, await response.json()], JSON.stringify(answer)).to.deep.equal([status, body]);
        }
        expect(seller.state.handlerRuns).to.equal(0);
      });

      it("asks no lookup for a v2 payment without an identifier (the facilitator never repeats one)", async () => {
        const payment = await createV2PaymentPayload({ signer: privateKeyToAccount(VECTOR_SIGNER.privateKey), requirements: VECTOR_V2_OFFER });
        const seller = await startSeller(REQUIREMENTS, { clock: () => SETTLED_AT + 10 * WINDOW_MS });
        const response = await fetch(seller.url, { headers: { "PAYMENT-SIGNATURE": Buffer.from(JSON.stringify(payment)).toString("base64") } });
        expect(response.status).to.equal(200);
        expect(standIn.requests.map((request) => request.path)).to.deep.equal(["/v2/x402/verify", "/v2/x402/settle"]);
      });
    });
  });

  describe("apiKey", () => {
    it("sends the seller's key as a bearer token on verify and settle, and keeps it out of logs and answers", async () => {
      const apiKey = "sk-seller-0123456789";
      const seller = await startSeller(REQUIREMENTS, { apiKey });
      const paid = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect(paid.status).to.equal(200);
      expect(standIn.requests.map((request) => request.headers.authorization)).to.deep.equal([`Bearer ${apiKey}`, `Bearer ${apiKey}`]);

      standIn.reset();
      standIn.answers.verify = json({ error: "Unknown API key" }, 401);
      const refused = await fetch(seller.url, { headers: { "X-PAYMENT": VECTOR_A_HEADER } });
      expect(refused.status).to.equal(500);
      expect(await refused.text()).to.not.include(apiKey);
      expect(logged).to.have.length(1);
      expect(logged[0]?.fields).to.include({ code: "http_status", status: 401 });
      expect(JSON.stringify(logged)).to.not.include(apiKey);
    });
  });

  describe("paymentRequirements builder", () => {
    it("fills the wire object with the network's token and the defaults", () => {
      expect(paymentRequirements({ network: "cronos-testnet", payTo: VECTOR_PAYEE.toLowerCase(), amount: "1000000" })).to.deep.equal({
        scheme: "exact",
        network: "cronos-testnet",
        payTo: VECTOR_PAYEE,
        asset: "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0",
        maxAmountRequired: "1000000",
        description: "X402 payment request",
        mimeType: "application/json",
        maxTimeoutSeconds: 300,
      });
    });

    it("keeps the cronos alias, takes bigint amounts and passes resource and extra", () => {
      const built = paymentRequirements({
        network: "cronos",
        payTo: VECTOR_PAYEE,
        amount: 2_500_000n,
        description: "d",
        mimeType: "text/plain",
        maxTimeoutSeconds: 60,
        resource: "https://seller.example/premium",
        extra: { note: "x" },
      });
      expect(built).to.deep.equal({
        scheme: "exact",
        network: "cronos",
        payTo: VECTOR_PAYEE,
        asset: "0xf951eC28187D9E5Ca673Da8FE6757E6f0Be5F77C",
        maxAmountRequired: "2500000",
        description: "d",
        mimeType: "text/plain",
        maxTimeoutSeconds: 60,
        resource: "https://seller.example/premium",
        extra: { note: "x" },
      });
    });

    it("refuses an unknown network without asset, a bad address and a bad amount", () => {
      expect(() => paymentRequirements({ network: "base", payTo: VECTOR_PAYEE, amount: 1n })).to.throw(InvalidRequirementsError, /asset/);
      expect(() => paymentRequirements({ network: "cronos-testnet", payTo: "0xabc", amount: 1n })).to.throw(InvalidRequirementsError, /payTo/);
      expect(() => paymentRequirements({ network: "cronos-testnet", payTo: VECTOR_PAYEE, amount: -1n })).to.throw(InvalidRequirementsError);
      expect(() => paymentRequirements({ network: "cronos-testnet", payTo: VECTOR_PAYEE, amount: "1e6" })).to.throw(
        InvalidRequirementsError,
        /maxAmountRequired/,
      );
    });
  });
});
