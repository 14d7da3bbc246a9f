import { expect } from "chai";
import express from "express";
import type { Address, Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { CONTROL_BODY_LIMIT_BYTES } from "../../src/harness/control/spec.js";
import { HarnessRefusal } from "../../src/harness/control/server.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { RequestError, VerifyReason } from "../../src/protocol/reasons.js";
import { EvmReason } from "../../src/protocol/x402v2.js";
import { paymentRequirements, requirePayment } from "../../src/seller/index.js";
import { expectSettlementOnChain, tokenBalances } from "../helpers/chain.js";
import { decodeBase64Json, listen, postJson, rawRequest, type Listening } from "../helpers/http.js";
import { startTestStack, STACK_OPTIONS } from "../helpers/seller.js";

// POST $HARNESS_URL/sign: the CLI's signing over the control endpoint, for the stack's own buyers only, under
// the endpoint's rules (loopback Host, no Origin, JSON of at most 16 KiB); a key in the body is refused.

const PRICE = 10_000n;

describe("harness control: POST /harness/sign, payments signed for the stack's own buyers (src/harness/control/sign.ts)", function () {
  this.timeout(180_000);
  let stack: LocalStack;
  let seller: Listening;
  const testnet = () => stack.networks["cronos-testnet"]!;
  const buyer = (index = 0): Address => testnet().buyers[index]!.address;
  const keys = () => testnet().buyers.map((each) => each.privateKey);
  const requirements = () => paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: PRICE, resource: "/report" });
  const sign = (body: unknown, headers: Record<string, string> = {}) => postJson(`${stack.harnessUrl}/sign`, body, headers);
  /** No key of the stack in an answer. */
  const expectNoKey = (answer: unknown) => {
    for (const key of keys()) expect(JSON.stringify(answer).toLowerCase()).not.to.contain(key.slice(2).toLowerCase());
  };
  async function verify(signed: { header: string; value: string }): Promise<Record<string, unknown>> {
    const v2Offer = async () => (decodeBase64Json((await fetch(`${seller.url}/report`)).headers.get("PAYMENT-REQUIRED")).accepts as unknown[])[0];
    const body =
      signed.header === "X-PAYMENT"
        ? { x402Version: 1, paymentHeader: signed.value, paymentRequirements: requirements() }
        : { x402Version: 2, paymentPayload: decodeBase64Json(signed.value), paymentRequirements: await v2Offer() };
    return (await postJson(`${stack.facilitatorUrl}/v2/x402/verify`, body, { "X402-Version": String(body.x402Version) })).json as Record<string, unknown>;
  }

  before(async () => {
    stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], buyers: 2 });
    const app = express();
    app.get("/report", requirePayment(requirements(), { facilitatorUrl: stack.facilitatorUrl }), (_req, res) => void res.json({ report: "sunny" }));
    seller = await listen(app);
  });
  after(async () => {
    await seller?.close();
    await stack?.stop();
  });

  it("GET /harness/sign lists the buyers it signs for (addresses, no key)", async () => {
    const response = await fetch(`${stack.harnessUrl}/sign`);
    const body = await response.json();
    expect([response.status, body]).to.deep.equal([200, { buyers: [buyer(0), buyer(1)] }]);
  });

  for (const [dialect, network] of [
    ["cronos", "cronos-testnet"],
    ["x402v2", "eip155:338"],
  ] as const) {
    it(`from terms, ${dialect}: the seller serves the value it answers, the token moves the price by that authorization`, async () => {
      const before = await tokenBalances(testnet().rpcUrl, testnet().token, [buyer(), stack.seller]);
      const { status, json } = await sign({ network, payTo: stack.seller, amount: String(PRICE) });
      expect(status, JSON.stringify(json)).to.equal(200);
      expectNoKey(json);
      expect(json).to.deep.include({ dialect, payer: buyer(), amount: String(PRICE), header: dialect === "cronos" ? "X-PAYMENT" : "PAYMENT-SIGNATURE" });
      const paid = await fetch(`${seller.url}/report`, { headers: { [json.header]: json.value } });
      const body = (await paid.json()) as { report: string; payment?: { txHash: Hex } };
      expect([paid.status, body.report]).to.deep.equal([200, "sunny"]);
      const settled = dialect === "cronos" ? decodeBase64Json(paid.headers.get("X-PAYMENT-RESPONSE")).txHash : decodeBase64Json(paid.headers.get("PAYMENT-RESPONSE")).transaction;
      await expectSettlementOnChain(stack, "cronos-testnet", settled as Hex, { from: buyer(), to: stack.seller, value: PRICE, nonce: json.nonce as Hex });
      expect(await tokenBalances(testnet().rpcUrl, testnet().token, [buyer(), stack.seller])).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
    });
  }

  it("from the 402 answer (its JSON body, its PAYMENT-REQUIRED value), for another buyer, with the window and nonce given", async () => {
    const response = await fetch(`${seller.url}/report`);
    const header = response.headers.get("PAYMENT-REQUIRED")!;
    const nonce = `0x${"cd".repeat(32)}` as Hex;
    const fromBody = await sign({ paymentRequired: await response.json(), payer: buyer(1).toLowerCase(), validBefore: 4_000_000_000, nonce });
    expect(fromBody.status, JSON.stringify(fromBody.json)).to.equal(200);
    expect(fromBody.json.payment.payload).to.deep.include({ from: buyer(1), to: stack.seller, value: String(PRICE), validBefore: 4_000_000_000, nonce });
    expect(await verify(fromBody.json)).to.deep.equal({ isValid: true, invalidReason: null });
    // "+N" is N seconds after the clock when it signs: between the question and the answer, whatever the machine took.
    const asked = Math.floor(Date.now() / 1000);
    const relative = await sign({ paymentRequired: header, validAfter: "+5", validBefore: "+600" });
    const answered = Math.ceil(Date.now() / 1000);
    expect(relative.json.validAfter).to.be.within(asked + 5, answered + 5);
    expect(relative.json.validBefore).to.be.within(asked + 600, answered + 600);
    expect(await sign({ paymentRequired: header, validBefore: "tomorrow" })).to.deep.equal({ status: 400, json: { error: 'validBefore must be unix seconds (a whole number), or "+N" (N seconds from now)' } });
    const fromHeader = await sign({ paymentRequired: header });
    expect(fromHeader.json.header).to.equal("PAYMENT-SIGNATURE");
    expect(await verify(fromHeader.json)).to.deep.equal({ isValid: true, payer: buyer() });
  });

  it("the changes made on purpose: each refused by the facilitator with its reason, in both dialects", async () => {
    const paymentRequired = await (await fetch(`${seller.url}/report`)).json();
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ amount: "5000" }, VerifyReason.invalidAmount("5000"), EvmReason.valueMismatch],
      [{ payTo: buyer(1) }, VerifyReason.recipientMismatch, EvmReason.recipientMismatch],
      [{ network: "cronos-mainnet" }, VerifyReason.unsupportedNetwork("cronos-mainnet"), EvmReason.networkMismatch],
      [{ domainVersion: "9" }, VerifyReason.invalidSignature, EvmReason.invalidSignature],
      [{ signWith: buyer(1) }, VerifyReason.invalidSignature, EvmReason.invalidSignature],
      [{ validBefore: 1_000 }, VerifyReason.expired, EvmReason.validBefore],
    ];
    for (const [change, text, code] of cases) {
      const cronos = await sign({ paymentRequired, ...change });
      expect(cronos.status, JSON.stringify(cronos.json)).to.equal(200);
      expect(await verify(cronos.json), JSON.stringify(change)).to.deep.equal({ isValid: false, invalidReason: text });
      const response = await fetch(`${seller.url}/report`);
      const v2 = await sign({ paymentRequired: response.headers.get("PAYMENT-REQUIRED"), ...change });
      expect(await verify(v2.json), JSON.stringify(change)).to.deep.include({ isValid: false, invalidReason: code, invalidMessage: text });
    }
  });

  describe("what it refuses (nothing signed, no key answered)", () => {
    it("a key in the body, under any name: 400 saying it signs for its own buyers only", async () => {
      const foreign = `0x${"42".repeat(32)}`;
      for (const field of ["privateKey", "key", "buyerPrivateKey", "signWithKey", "secret"]) {
        const { status, json } = await sign({ network: "cronos-testnet", payTo: stack.seller, amount: "1", [field]: foreign });
        expect(status, field).to.equal(400);
        expect(json.error).to.match(new RegExp(`^${field}: the harness takes no key; it signs for the stack's own buyers, named by \`payer\``));
        expect(JSON.stringify(json)).not.to.contain(foreign.slice(2));
      }
      // A key where an address goes is not an address.
      const asPayer = await sign({ network: "cronos-testnet", payTo: stack.seller, amount: "1", payer: foreign });
      expect(asPayer).to.deep.equal({ status: 400, json: { error: "payer must be a 0x address of 40 hex digits" } });
    });

    it("a payer or signWith that is not one of the stack's buyers: 400 naming who it signs for", async () => {
      const stranger = privateKeyToAccount(`0x${"42".repeat(32)}`).address;
      for (const field of ["payer", "signWith"]) {
        const { status, json } = await sign({ network: "cronos-testnet", payTo: stack.seller, amount: "1", [field]: stranger });
        expect([status, json]).to.deep.equal([400, { error: `${field}: ${stranger} is not one of this stack's buyers (${buyer(0)}, ${buyer(1)}); the harness signs for its own buyers only` }]);
      }
    });

    it("bad requests: an unknown field, a missing term, a bad 402, each 400 with one line", async () => {
      const cases: Array<[unknown, string]> = [
        [{ network: "cronos-testnet", payTo: stack.seller, amount: "1", frobnicate: 1 }, 'Unrecognized key: "frobnicate"'],
        [{ network: "cronos-testnet", amount: "1" }, "invalid_parameters"],
        [{ network: "cronos-testnet", payTo: stack.seller, amount: "1.5" }, "amount must be a whole number of base units, as a string"],
        [{ paymentRequired: { error: "Payment Required" } }, "the 402 answer holds no payment requirements"],
        [{ paymentRequired: "not a 402" }, "the 402 answer is neither JSON, `curl -si` output nor a PAYMENT-REQUIRED value (base64 JSON)"],
      ];
      for (const [body, error] of cases) {
        const { status, json } = await sign(body);
        expect(status, JSON.stringify(body)).to.equal(400);
        expect(json.error, JSON.stringify(body)).to.contain(error === "invalid_parameters" ? "payTo: needed without a 402 answer" : error);
      }
    });

    it("the endpoint's rules: a foreign Host 421, any Origin 403, not JSON 415, over 16 KiB 413", async () => {
      const body = JSON.stringify({ network: "cronos-testnet", payTo: stack.seller, amount: "1" });
      for (const host of ["evil.example", "127.0.0.1.nip.io"]) {
        const answer = await rawRequest(`${stack.harnessUrl}/sign`, { host, method: "POST", headers: { "Content-Type": "application/json" }, body });
        expect({ status: answer.status, body: answer.body }, host).to.deep.equal({ status: 421, body: { error: RequestError.misdirected } });
      }
      for (const origin of ["http://evil.example", "null", new URL(stack.harnessUrl).origin]) {
        expect(await sign(JSON.parse(body), { origin }), origin).to.deep.equal({ status: 403, json: { error: HarnessRefusal.fromPage } });
      }
      const form = await fetch(`${stack.harnessUrl}/sign`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "network=cronos-testnet" });
      expect([form.status, await form.json()]).to.deep.equal([415, { error: HarnessRefusal.notJson }]);
      const large = await sign({ paymentRequired: "x".repeat(CONTROL_BODY_LIMIT_BYTES) });
      expect(large).to.deep.equal({ status: 413, json: { error: `Payload too large: the limit is ${CONTROL_BODY_LIMIT_BYTES} bytes` } });
    });
  });
});
