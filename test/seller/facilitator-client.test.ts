import { expect } from "chai";
import {
  createFacilitatorClient,
  FacilitatorError,
  paymentRequirements,
  type FacilitatorErrorCode,
} from "../../src/seller/index.js";
import { retryAfterSeconds } from "../../src/seller/facilitator-client.js";
import { closedPortUrl } from "../helpers/http.js";
import { rejection } from "../helpers/reject.js";
import {
  json,
  settleFailed,
  startStandInFacilitator,
  SETTLED,
  SUPPORTED,
  VALID,
  type StandInFacilitator,
} from "../helpers/stand-in-facilitator.js";
import { VECTOR_A_HEADER, VECTOR_PAYEE } from "../helpers/vectors.js";

const REQUIREMENTS = paymentRequirements({ network: "cronos-testnet", payTo: VECTOR_PAYEE, amount: 1_000_000n });
const REQUEST = { paymentHeader: VECTOR_A_HEADER, paymentRequirements: REQUIREMENTS };
const WIRE_BODY = { x402Version: 1, paymentHeader: VECTOR_A_HEADER, paymentRequirements: REQUIREMENTS };

describe("seller: facilitator client", () => {
  let standIn: StandInFacilitator;
  before(async () => {
    standIn = await startStandInFacilitator();
  });
  after(async () => {
    await standIn.close();
  });
  beforeEach(() => standIn.reset());

  it("GETs /v2/x402/supported and returns the parsed answer", async () => {
    const client = createFacilitatorClient({ url: standIn.url });
    expect(await client.supported()).to.deep.equal(SUPPORTED);
    expect(standIn.requests).to.have.length(1);
    expect(standIn.requests[0]).to.include({ method: "GET", path: "/v2/x402/supported" });
  });

  it("POSTs verify with Content-Type, X402-Version and the exact body", async () => {
    const client = createFacilitatorClient({ url: standIn.url });
    expect(await client.verify(REQUEST)).to.deep.equal(VALID);
    const [request] = standIn.requests;
    expect(request).to.include({ method: "POST", path: "/v2/x402/verify" });
    expect(request?.headers["content-type"]).to.equal("application/json");
    expect(request?.headers["x402-version"]).to.equal("1");
    expect(request?.body).to.deep.equal(WIRE_BODY);
  });

  it("POSTs settle with the exact body and returns payment.settled", async () => {
    const client = createFacilitatorClient({ url: `${standIn.url}/` }); // a trailing slash is tolerated
    expect(await client.settle(REQUEST)).to.deep.equal(SETTLED);
    const [request] = standIn.requests;
    expect(request).to.include({ method: "POST", path: "/v2/x402/settle" });
    expect(request?.headers["content-type"]).to.equal("application/json");
    expect(request?.headers["x402-version"]).to.equal("1");
    expect(request?.body).to.deep.equal(WIRE_BODY);
  });

  it("returns negative answers as values: isValid false, payment.failed", async () => {
    const client = createFacilitatorClient({ url: standIn.url });
    standIn.answers.verify = json({ isValid: false, invalidReason: "Authorization expired" });
    standIn.answers.settle = json(settleFailed("Authorization already used"));
    expect(await client.verify(REQUEST)).to.deep.equal({ isValid: false, invalidReason: "Authorization expired" });
    expect(await client.settle(REQUEST)).to.deep.equal(settleFailed("Authorization already used"));
  });

  for (const [status, body] of [
    [400, { isValid: false, invalidReason: "Invalid request: paymentRequirements.payTo is required" }],
    [429, { error: "Too many requests" }],
    [500, { error: "Internal error" }],
    [503, { error: "Service unavailable" }],
  ] as const) {
    it(`throws http_status on HTTP ${status}, with the status and the body in details`, async () => {
      const client = createFacilitatorClient({ url: standIn.url });
      standIn.answers.verify = json(body, status);
      const error = await rejection(client.verify(REQUEST), FacilitatorError);
      expect(error.code).to.equal("http_status" satisfies FacilitatorErrorCode);
      expect(error.operation).to.equal("verify");
      expect(error.status).to.equal(status);
      expect(error.details).to.equal(`HTTP ${status}: ${JSON.stringify(body)}`);
    });
  }

  it("throws malformed on a 2xx answer that is not JSON", async () => {
    const client = createFacilitatorClient({ url: standIn.url });
    standIn.answers.settle = { kind: "text", body: "<html>oops</html>", contentType: "text/html" };
    const error = await rejection(client.settle(REQUEST), FacilitatorError);
    expect(error.code).to.equal("malformed");
    expect(error.status).to.equal(200);
    expect(error.details).to.equal("answer is not JSON: <html>oops</html>");
  });

  it("throws malformed on JSON that fails the response schema", async () => {
    const client = createFacilitatorClient({ url: standIn.url });
    standIn.answers.verify = json({ valid: true });
    standIn.answers.settle = json({ ...SETTLED, blockNumber: "4242" });
    const verifyError = await rejection(client.verify(REQUEST), FacilitatorError);
    expect(verifyError.code).to.equal("malformed");
    expect(verifyError.details).to.match(/^answer does not match the verify response schema: isValid/);
    const settleError = await rejection(client.settle(REQUEST), FacilitatorError);
    expect(settleError.code).to.equal("malformed");
    expect(settleError.details).to.match(/blockNumber/);
  });

  it("throws timeout when the facilitator does not answer in time", async () => {
    const client = createFacilitatorClient({ url: standIn.url, timeoutMs: 150 });
    // The stand-in never answers: an answer at all is the time-out's.
    standIn.answers.verify = { kind: "hang" };
    const error = await rejection(client.verify(REQUEST), FacilitatorError);
    expect(error.code).to.equal("timeout");
    expect(error.details).to.equal("no answer within 150 ms");
  });

  it("reads a Retry-After in seconds or as an HTTP date against the clock, bounded to a day", () => {
    const now = Date.UTC(2026, 0, 1, 12, 0, 0);
    const at = (ms: number) => new Date(now + ms).toUTCString();
    expect(retryAfterSeconds("30", now)).to.equal(30);
    expect(retryAfterSeconds(at(30_000), now)).to.equal(30);
    // HTTP dates have whole seconds: a date 30.5 s ahead is written 30 s ahead of a clock at .000.
    expect(retryAfterSeconds(at(30_000), now - 500)).to.equal(31);
    expect(retryAfterSeconds(at(-60_000), now)).to.equal(0);
    expect(retryAfterSeconds(at(2 * 86_400_000), now)).to.equal(86_400);
    expect(retryAfterSeconds("999999", now)).to.equal(86_400);
    expect(retryAfterSeconds("soon", now)).to.equal(undefined);
    expect(retryAfterSeconds(null, now)).to.equal(undefined);
  });

  it("throws unreachable when nothing listens", async () => {
    const client = createFacilitatorClient({ url: await closedPortUrl() });
    const error = await rejection(client.settle(REQUEST), FacilitatorError);
    expect(error.code).to.equal("unreachable");
    expect(error.status).to.equal(undefined);
    expect(error.details).to.match(/ECONNREFUSED/);
  });

  it("uses an injected fetch, and times out even if that fetch ignores the abort signal", async () => {
    const calls: string[] = [];
    const client = createFacilitatorClient({
      url: "http://facilitator.invalid",
      timeoutMs: 100,
      fetch: async (input) => {
        calls.push(String(input));
        return new Promise<Response>(() => {});
      },
    });
    const error = await rejection(client.supported(), FacilitatorError);
    expect(error.code).to.equal("timeout");
    expect(calls).to.deep.equal(["http://facilitator.invalid/v2/x402/supported"]);
  });

  it("sends apiKey as Authorization: Bearer on supported, verify and settle, and refuses a key that cannot be a header", async () => {
    const apiKey = "sk-seller-abc123";
    const client = createFacilitatorClient({ url: standIn.url, apiKey });
    await client.supported();
    await client.verify(REQUEST);
    await client.settle(REQUEST);
    expect(standIn.requests.map((request) => request.headers.authorization)).to.deep.equal(Array(3).fill(`Bearer ${apiKey}`));
    expect(() => createFacilitatorClient({ url: standIn.url, apiKey: "two words" })).to.throw(
      TypeError,
      /^apiKey must be a non-empty string of printable ASCII without spaces$/,
    );
    // Without a key nothing is sent.
    standIn.reset();
    await createFacilitatorClient({ url: standIn.url }).verify(REQUEST);
    expect(standIn.requests[0]?.headers.authorization).to.equal(undefined);
  });

  it("speaks x402 v2 with verifyV2 and settleV2: the body, X402-Version 2 and the v2 answers", async () => {
    const client = createFacilitatorClient({ url: standIn.url });
    const request = { paymentPayload: { x402Version: 2, accepted: {}, payload: {} }, paymentRequirements: { scheme: "exact", network: "eip155:338" } };
    const verified = { isValid: false, invalidReason: "invalid_exact_evm_signature", invalidMessage: "Invalid EIP-3009 signature", payer: VECTOR_PAYEE };
    const settled = { success: true, payer: VECTOR_PAYEE, transaction: SETTLED.txHash, network: "eip155:338" };
    standIn.answers.verify = json(verified);
    standIn.answers.settle = json(settled);
    expect(await client.verifyV2(request)).to.deep.equal(verified);
    expect(await client.settleV2(request)).to.deep.equal(settled);
    for (const recorded of standIn.requests) {
      expect(recorded.headers["x402-version"]).to.equal("2");
      expect(recorded.body).to.deep.equal({ x402Version: 2, ...request });
    }
    standIn.answers.settle = json({ success: true });
    const error = await rejection(client.settleV2(request), FacilitatorError);
    expect(error.code).to.equal("malformed");
    expect(error.details).to.match(/^answer does not match the settle response schema: transaction/);
  });

  it("looks a settlement up by authorization with settlement(): GET with the query encoded and the API key, the parsed status, undefined for 404, errors for the rest", async () => {
    const client = createFacilitatorClient({ url: standIn.url, apiKey: "sk-seller-0123456789" });
    const query = { network: "eip155:338", from: VECTOR_PAYEE, nonce: `0x${"12".repeat(32)}` };
    const status = {
      status: "settled",
      network: "eip155:338",
      from: VECTOR_PAYEE,
      to: VECTOR_PAYEE,
      value: "1000000",
      nonce: query.nonce,
      txHash: SETTLED.txHash,
      transactions: [SETTLED.txHash],
      blockNumber: 7,
      timestamp: "2030-01-01T00:00:00.000Z",
    };
    standIn.answers.settlements = json(status);
    expect(await client.settlement(query)).to.deep.equal(status);
    const [request] = standIn.requests;
    expect([request?.method, request?.path, request?.query, request?.headers.authorization]).to.deep.equal([
      "GET",
      "/v2/x402/settlements",
      query,
      "Bearer sk-seller-0123456789",
    ]);

    standIn.answers.settlements = json({ error: "Not found" }, 404);
    expect(await client.settlement(query)).to.equal(undefined);
    standIn.answers.settlements = json({ error: "Invalid request: network base is not served here" }, 400);
    expect(await rejection(client.settlement(query), FacilitatorError)).to.include({ code: "http_status", status: 400, operation: "settlements" });
    standIn.answers.settlements = json({ status: "settled" });
    expect(await rejection(client.settlement(query), FacilitatorError)).to.include({ code: "malformed", operation: "settlements" });
  });
});
