// Traces (docs/operations.md, "Traces"): a payment from the kit's buyer through the kit's seller to the local
// stack's facilitator, its chain and its ledger, exported over OTLP/HTTP (JSON) to an in-process receiver:
// one trace id from the buyer to the RPC, each hop's parent named by the `traceparent` it was sent, and no
// secret in any span. RPC spans over real URLs (with credentials in them) through a fault proxy: attempts,
// URL names without credentials, and a slow node in the span's duration.
import { SpanKind } from "@opentelemetry/api";
import { expect } from "chai";
import express from "express";
import type { Hex } from "viem";
import { createPublicClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { BUYER_SPAN, wrapFetchWithPayment } from "../../src/buyer/fetch.js";
import { rpcTransport } from "../../src/chain/rpc-transport.js";
import { tracingSettings } from "../../src/facilitator/config/tracing.js";
import { INJECTED_RPC } from "../../src/facilitator/networks.js";
import { startLocalStack, type LocalStack } from "../../src/harness/stack.js";
import { createPaymentHeader } from "../../src/buyer/index.js";
import { createFacilitatorClient, paymentRequirements, requirePayment } from "../../src/seller/index.js";
import { SELLER_SPAN } from "../../src/seller/tracing.js";
import { globalTracer } from "../../src/telemetry/spans.js";
import { startTracing, type Tracing } from "../../src/facilitator/tracing.js";
import { HARDHAT_KEYS } from "../helpers/facilitator.js";
import { listen, type Listening } from "../helpers/http.js";
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../helpers/otlp-receiver.js";
import { startFaultProxy, type FaultProxy } from "../helpers/rpc-proxy.js";
import { PRICE, STACK_OPTIONS } from "../helpers/seller.js";

/** The seller's API key at the facilitator (a secret the spans must never show). */
const SELLER_API_KEY = "seller-api-key-0123456789abcdef";
const SERVICE = "facilitator-under-test";
/** Hardhat's account #1 (a PUBLIC address): the payee of the stand-in seller. */
const HARDHAT_ADDRESS = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

const OTLP = (receiver: OtlpReceiver): NodeJS.ProcessEnv => ({
  OTEL_TRACES_EXPORTER: "otlp",
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url,
  OTEL_SERVICE_NAME: SERVICE,
  // Exported at once rather than every 5 s: the test waits for spans, not for a clock.
  OTEL_BSP_SCHEDULE_DELAY: "20",
});

/** Every text a span carries: its name, its attributes, its status message and its resource. */
function textsOf(span: ReceivedSpan): string[] {
  return [span.name, JSON.stringify(span.attributes), span.status.message ?? "", JSON.stringify(span.resource)];
}

/** Fails naming the span and the secret's kind when any span carries any of `secrets` (any letter case, with or without 0x). */
function expectNoSecret(spans: ReceivedSpan[], secrets: Record<string, string>): void {
  for (const span of spans) {
    const texts = textsOf(span).join("\n").toLowerCase();
    for (const [kind, secret] of Object.entries(secrets)) {
      const bare = secret.toLowerCase().replace(/^0x/, "");
      expect(texts.includes(bare), `span "${span.name}" carries the ${kind}`).to.equal(false);
    }
  }
}

const durationMs = (span: ReceivedSpan) => Number(span.end - span.start) / 1e6;

describe("traces off (no OpenTelemetry SDK registered in the process): the seller and the buyer make no span and send no traceparent", function () {
  it("a paid request's every hop goes without traceparent, and the kit's tracer is undefined", async () => {
    expect(globalTracer()).to.equal(undefined);
    const sent: Array<string | null> = [];
    const recording = (input: string | URL | Request, init?: RequestInit) => {
      sent.push(new Headers(init?.headers).get("traceparent"));
      return fetch(input, init);
    };
    const facilitator = await listen((_req, res) => void res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ isValid: true, invalidReason: null })));
    const app = express();
    app.get("/report", requirePayment(paymentRequirements({ network: "cronos-testnet", payTo: HARDHAT_ADDRESS, amount: PRICE }), { facilitator: createFacilitatorClient({ url: facilitator.url, fetch: recording }) }), (_req, res) => void res.json({}));
    const seller = await listen(app);
    try {
      const paidFetch = wrapFetchWithPayment(recording, { signer: privateKeyToAccount(HARDHAT_KEYS.buyer), maxAmount: PRICE });
      // The seller verifies (its facilitator answers valid), then settles: the stand-in answers no settlement, a 500.
      expect((await paidFetch(`${seller.url}/report`)).status).to.equal(500);
      expect(sent).to.have.length(4);
      expect(sent).to.deep.equal([null, null, null, null]);
    } finally {
      await seller.close();
      await facilitator.close();
    }
  });
});

describe("traces: buyer → seller → facilitator → RPC and ledger, over OTLP", function () {
  this.timeout(180_000);
  let receiver: OtlpReceiver;
  let stack: LocalStack;
  let seller: Listening;
  /** `traceparent` of each request the seller's facilitator client sent, and of each the buyer sent. */
  const sellerSent: Array<{ path: string; traceparent: string | null }> = [];
  const buyerSent: Array<string | null> = [];

  before(async () => {
    receiver = await startOtlpReceiver();
    // Exports may wait ten minutes for the collector: only the SDK's own shutdown bound ends the last test in time.
    const patient = { OTEL_EXPORTER_OTLP_TIMEOUT: "600000", OTEL_BSP_EXPORT_TIMEOUT: "600000" };
    stack = await startLocalStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], env: { ...OTLP(receiver), ...patient, API_KEYS: SELLER_API_KEY } });
    const facilitator = createFacilitatorClient({
      url: stack.facilitatorUrl,
      apiKey: SELLER_API_KEY,
      fetch: (input, init) => {
        sellerSent.push({ path: new URL(String(input)).pathname, traceparent: new Headers(init?.headers).get("traceparent") });
        return fetch(input, init);
      },
    });
    const app = express();
    const requirements = paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: PRICE });
    app.get("/report", requirePayment(requirements, { facilitator }), (_req, res) => void res.json({ report: "sunny" }));
    seller = await listen(app);
  });
  after(async () => {
    await seller?.close();
    await stack?.stop();
    await receiver?.close();
  });

  /** Pays the seller's route with the stack's first buyer; the answer and the X-PAYMENT sent. */
  async function pay(): Promise<{ status: number; paymentHeader: string }> {
    const buyer = privateKeyToAccount(stack.networks["cronos-testnet"]!.buyers[0]!.privateKey);
    let paymentHeader = "";
    const paidFetch = wrapFetchWithPayment(
      async (input, init) => {
        const headers = new Headers(init?.headers);
        buyerSent.push(headers.get("traceparent"));
        paymentHeader = headers.get("X-PAYMENT") ?? paymentHeader;
        return fetch(input, init);
      },
      { signer: buyer, maxAmount: PRICE },
    );
    const response = await paidFetch(`${seller.url}/report`);
    await response.arrayBuffer();
    return { status: response.status, paymentHeader };
  }

  /**
   * The spans of the last payment's trace (its id from the `traceparent` the buyer sent), once its buyer span
   * has arrived: that span ends last, after the seller's, the facilitator's, the RPC's and the ledger's.
   */
  async function lastPaymentTrace(): Promise<ReceivedSpan[]> {
    const traceId = buyerSent.at(-1)?.split("-")[1];
    expect(traceId, "the buyer sent a traceparent").to.match(/^[0-9a-f]{32}$/);
    const spans = await receiver.waitFor((all) => all.some((span) => span.traceId === traceId && span.name === BUYER_SPAN));
    return spans.filter((span) => span.traceId === traceId);
  }

  it("one trace from the buyer's fetch to the RPC calls, each hop the child of the traceparent it was sent, with the payment's attributes and no secret", async () => {
    const { status, paymentHeader } = await pay();
    expect(status).to.equal(200);
    const trace = await lastPaymentTrace();
    const byName = (name: string) => trace.filter((span) => span.name === name);
    const one = (name: string) => {
      const found = byName(name);
      expect(found, name).to.have.length(1);
      return found[0]!;
    };

    const buyerSpan = one(BUYER_SPAN);
    expect(buyerSpan.parentSpanId).to.equal("");
    expect(buyerSpan.kind).to.equal(SpanKind.CLIENT + 1);
    // Both of the buyer's requests (unpaid, then paid) carried its span as their parent.
    const traceparent = (spanId: string) => `00-${buyerSpan.traceId}-${spanId}-01`;
    expect(buyerSent.slice(-2)).to.deep.equal([traceparent(buyerSpan.spanId), traceparent(buyerSpan.spanId)]);

    // The seller: one span per request that reached it (the 402, then the paid one), children of the buyer's.
    const sellerSpans = byName(SELLER_SPAN);
    expect(sellerSpans.map((span) => [span.parentSpanId, span.attributes["http.response.status_code"]])).to.have.deep.members([
      [buyerSpan.spanId, 402],
      [buyerSpan.spanId, 200],
    ]);
    const paidSeller = sellerSpans.find((span) => span.attributes["http.response.status_code"] === 200)!;
    const buyerAddress = privateKeyToAccount(stack.networks["cronos-testnet"]!.buyers[0]!.privateKey).address;
    const txHash = paidSeller.attributes["x402.tx_hash"];
    expect(txHash).to.match(/^0x[0-9a-f]{64}$/);
    expect(paidSeller.attributes).to.deep.include({
      "x402.network": "cronos-testnet",
      "x402.payee": stack.seller,
      "x402.value": String(PRICE),
      "x402.payer": buyerAddress,
    });

    // The seller's facilitator calls: spans under the seller's, whose traceparent the facilitator was sent.
    for (const operation of ["verify", "settle"]) {
      const client = one(`x402 facilitator ${operation}`);
      expect(client.parentSpanId).to.equal(paidSeller.spanId);
      expect(sellerSent.filter((sent) => sent.path === `/v2/x402/${operation}`).at(-1)!.traceparent).to.equal(traceparent(client.spanId));
      const server = one(`POST /v2/x402/${operation}`);
      expect(server.parentSpanId, `the facilitator's ${operation} span is the child of the call it was sent`).to.equal(client.spanId);
      expect(server.attributes).to.deep.include({ "http.request.method": "POST", "url.path": `/v2/x402/${operation}`, "http.response.status_code": 200 });
      expect(server.resource["service.name"]).to.equal(SERVICE);
    }

    // Verify's checks (on the verify route, and settle's re-verification on a fresh head), with the payment's terms.
    const nonce = (JSON.parse(Buffer.from(paymentHeader, "base64").toString("utf8")) as { payload: { nonce: string } }).payload.nonce;
    const terms = { "x402.network": "cronos-testnet", "x402.payer": buyerAddress, "x402.payee": stack.seller, "x402.value": String(PRICE), "x402.nonce": nonce, "x402.outcome": "valid" };
    const [verifyServer, settleServer] = [one("POST /v2/x402/verify"), one("POST /v2/x402/settle")];
    expect(byName("x402 verify").map((span) => [span.parentSpanId, span.attributes])).to.have.deep.members([
      [verifyServer.spanId, terms],
      [settleServer.spanId, terms],
    ]);
    // Settle's steps under its request: the claim (the ledger's), simulate, send, the receipt's wait and the decision.
    const steps = ["ledger claim", "x402 simulate", "x402 send", "x402 wait", "x402 decision"].map(one);
    expect(steps.map((span) => span.parentSpanId)).to.deep.equal(steps.map(() => settleServer.spanId));
    expect([one("x402 send").attributes, one("x402 wait").attributes, one("x402 decision").attributes]).to.deep.equal([
      { "x402.tx_hash": txHash },
      { "x402.tx_hash": txHash },
      { "x402.outcome": "paid" },
    ]);

    // Under the facilitator's spans: the RPC calls (the stack's in-process chain: "injected") and the ledger's groups.
    const ids = new Set(trace.map((span) => span.spanId));
    const rpc = trace.filter((span) => span.attributes["rpc.system"] === "jsonrpc");
    expect(rpc.map((span) => span.name)).to.include.members(["eth_sendRawTransaction"]);
    for (const span of rpc) {
      expect(span.attributes).to.deep.include({ "rpc.method": span.name, "x402.rpc.attempt": 1, "x402.rpc.url": INJECTED_RPC });
      expect(ids.has(span.parentSpanId), `${span.name}'s parent is in the trace`).to.equal(true);
    }
    const ledger = trace.filter((span) => span.name.startsWith("ledger "));
    expect(ledger.map((span) => span.name)).to.include.members(["ledger claim"]);
    for (const span of ledger) expect(span.attributes).to.deep.include({ "db.system.name": "sqlite", "db.operation.name": span.name.slice("ledger ".length) });

    // No secret anywhere: keys, the buyer's signature, the seller's API key (nor any span of any trace).
    const signature = (JSON.parse(Buffer.from(paymentHeader, "base64").toString("utf8")) as { payload: { signature: Hex } }).payload.signature;
    expectNoSecret(receiver.spans, {
      "buyer's private key": stack.networks["cronos-testnet"]!.buyers[0]!.privateKey,
      "relayer's private key": HARDHAT_KEYS.relayer,
      "buyer's signature": signature,
      "seller's API key": SELLER_API_KEY,
    });
  });

  it("a slow node shows in its RPC call's span: eth_sendRawTransaction delayed 400 ms lasts at least that", async () => {
    const fault = await stack.harness.fault({ kind: "rpc", mode: "delay", delayMs: 400, methods: ["eth_sendRawTransaction"], forCalls: 1 });
    try {
      expect((await pay()).status).to.equal(200);
    } finally {
      await fault.undo();
    }
    const sends = (await lastPaymentTrace()).filter((span) => span.name === "eth_sendRawTransaction");
    expect(sends).to.have.length(1);
    expect(durationMs(sends[0]!)).to.be.at.least(400);
  });

  it("a collector that never answers costs the payments nothing: they are paid, and the facilitator still stops (its last exports given up)", async () => {
    receiver.hang = true;
    const answered = receiver.requests;
    expect((await pay()).status).to.equal(200);
    expect((await pay()).status).to.equal(200);
    // The exporter has sent to the hanging collector (and waits for it): the spans of these payments are held there.
    await receiver.waitFor(() => receiver.held > 0);
    // Exports wait up to ten minutes here: this resolves (before the test's time-out) only because shutdown is bounded.
    await stack.stop();
    expect(receiver.requests).to.equal(answered);
  });
});

describe("traces: RPC spans over URLs with credentials (attempts, failover, what is never recorded)", function () {
  this.timeout(120_000);
  let receiver: OtlpReceiver;
  let stack: LocalStack;
  let proxies: FaultProxy[];
  let tracing: Tracing;

  before(async () => {
    receiver = await startOtlpReceiver();
    // No API key and no limits: verify and settle take the fast lane (fast-lane.ts), which reads bodies itself.
    stack = await startLocalStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], env: OTLP(receiver) });
    proxies = [await startFaultProxy(stack.networks["cronos-testnet"]!.rpcUrl), await startFaultProxy(stack.networks["cronos-testnet"]!.rpcUrl)];
    tracing = await startTracing(tracingSettings(OTLP(receiver))!);
  });
  after(async () => {
    await tracing?.close();
    for (const proxy of proxies ?? []) await proxy.close();
    await stack?.stop();
    await receiver?.close();
  });

  /** A URL of the proxy carrying a user, a password, a key in its path and one in its query. */
  const secretUrl = (proxy: FaultProxy) => {
    const url = new URL(proxy.url);
    return `http://rpc-user:rpc-password-secret@${url.host}/v2/PATHKEY0123456789?apikey=QUERYKEY0123456789`;
  };

  /** Calls `eth_blockNumber` in a span of its own (RPC spans are made within a request's span) and gives that trace's RPC spans. */
  async function call(urls: string[], label: string): Promise<ReceivedSpan[]> {
    const rpc = rpcTransport({ urls, timeoutMs: 5_000, rankIntervalMs: 60_000, tracer: tracing.tracer });
    try {
      const client = createPublicClient({ transport: rpc.transport, cacheTime: 0 });
      await tracing.tracer.startActiveSpan(label, async (span) => {
        await client.getBlockNumber();
        span.end();
      });
    } finally {
      rpc.close();
    }
    const spans = await receiver.waitFor((all) => all.some((span) => span.name === label));
    const root = spans.find((span) => span.name === label)!;
    return spans.filter((span) => span.traceId === root.traceId && span.name === "eth_blockNumber");
  }

  it("one URL: a refused first attempt (HTTP 503) and its retry are two spans, attempts 1 and 2, named by scheme and host only", async () => {
    proxies[0]!.fail({ kind: "http503", method: "eth_blockNumber", times: 1 });
    const spans = await call([secretUrl(proxies[0]!)], "one URL");
    const host = new URL(proxies[0]!.url).host;
    expect(spans.map((span) => [span.attributes["x402.rpc.attempt"], span.attributes["x402.rpc.url"], span.status])).to.deep.equal([
      [1, `http://${host}`, { code: 2, message: "HTTP 503" }],
      [2, `http://${host}`, { code: 0 }],
    ]);
  });

  it("failover: the first URL down, the call's second attempt goes to URL #2, each span naming its URL's place", async () => {
    await proxies[0]!.kill();
    try {
      const spans = await call([secretUrl(proxies[0]!), secretUrl(proxies[1]!)], "failover");
      const [first, second] = proxies.map((proxy) => new URL(proxy.url).host);
      expect(spans.map((span) => [span.attributes["x402.rpc.attempt"], span.attributes["x402.rpc.url"], span.status.code])).to.deep.equal([
        [1, `http://${first} (URL #1 of 2)`, 2],
        [2, `http://${second} (URL #2 of 2)`, 0],
      ]);
      expect(spans[0]!.status.message).to.equal("connection refused");
    } finally {
      await proxies[0]!.revive();
    }
    expectNoSecret(receiver.spans, { "RPC URL's password": "rpc-password-secret", "RPC URL's user": "rpc-user", "RPC URL's path key": "PATHKEY0123456789", "RPC URL's query key": "QUERYKEY0123456789" });
  });

  it("the fast lane (no API key, no limits) keeps the request's trace: verify's checks and its RPC calls under POST /v2/x402/verify", async () => {
    const info = stack.networks["cronos-testnet"]!;
    const requirements = paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: PRICE });
    const paymentHeader = await createPaymentHeader({ signer: privateKeyToAccount(info.buyers[1]!.privateKey), requirements });
    const facilitator = createFacilitatorClient({ url: stack.facilitatorUrl });
    const traceId = await tracing.tracer.startActiveSpan("fast lane", async (span) => {
      expect(await facilitator.verify({ paymentHeader, paymentRequirements: requirements })).to.deep.include({ isValid: true });
      span.end();
      return span.spanContext().traceId;
    });
    const spans = (await receiver.waitFor((all) => all.some((span) => span.traceId === traceId && span.name === "fast lane"))).filter((span) => span.traceId === traceId);
    const server = spans.find((span) => span.name === "POST /v2/x402/verify")!;
    expect(server, "the facilitator's span, in the caller's trace").to.not.equal(undefined);
    const checks = spans.filter((span) => span.name === "x402 verify");
    expect(checks.map((span) => [span.parentSpanId, span.attributes["x402.outcome"]])).to.deep.equal([[server.spanId, "valid"]]);
    // Verify's chain reads (the head, the payer's code and balance) are the request's descendants.
    const byId = new Map(spans.map((span) => [span.spanId, span]));
    const underServer = (span: ReceivedSpan): boolean => span.parentSpanId === server.spanId || (byId.has(span.parentSpanId) && underServer(byId.get(span.parentSpanId)!));
    const rpc = spans.filter((span) => span.attributes["rpc.system"] === "jsonrpc");
    expect(rpc.map((span) => span.name)).to.include.members(["eth_getBlockByNumber", "eth_getCode"]);
    expect(rpc.filter((span) => !underServer(span)).map((span) => span.name)).to.deep.equal([]);
  });

  it("outside any span (background work) an RPC call makes no span", async () => {
    const rpc = rpcTransport({ urls: [proxies[1]!.url], timeoutMs: 5_000, rankIntervalMs: 60_000, tracer: tracing.tracer });
    const before = receiver.spans.length;
    try {
      await createPublicClient({ transport: rpc.transport, cacheTime: 0 }).getBlockNumber();
    } finally {
      rpc.close();
    }
    // A span made after the call: once it has arrived, so would have the call's.
    tracing.tracer.startSpan("marker").end();
    const spans = await receiver.waitFor((all) => all.slice(before).some((span) => span.name === "marker"));
    // (Spans of earlier traces may still arrive: the call's would have started a trace of its own, a root.)
    expect(spans.slice(before).filter((span) => span.parentSpanId === "").map((span) => span.name)).to.deep.equal(["marker"]);
  });
});
