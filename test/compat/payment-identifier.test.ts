import { expect } from "chai";
import { HTTPFacilitatorClient } from "@x402/core/server";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import {
  appendPaymentIdentifierToExtensions,
  declarePaymentIdentifierExtension,
  extractPaymentIdentifier,
  generatePaymentId,
  validatePaymentIdentifier,
} from "@x402/extensions/payment-identifier";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { privateKeyToAccount } from "viem/accounts";
import express from "express";
import { createV2PaymentPayload } from "../../src/buyer/index.js";
import { paymentRequirements, requirePayment } from "../../src/seller/index.js";
import { decodeBase64Json, encodeBase64Json, listen } from "../helpers/http.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { rpcClient, tokenBalances, TX_HASH } from "../helpers/chain.js";
import { signTransferAuthorization } from "../helpers/sign.js";
import { PRICE, STACK_OPTIONS, startTestStack } from "../helpers/seller.js";
import { expectPaidOnChain, partyBalances } from "./helpers.js";
import { rejection } from "../helpers/reject.js";

/** A client answer without the keys the client sets to undefined, for exact comparisons. */
const plain = (value: unknown) => JSON.parse(JSON.stringify(value)) as Record<string, unknown>;

describe("x402 v2 payment-identifier through @x402/core's HTTPFacilitatorClient: idempotent settles", function () {
  let stack: LocalStack;
  let client: HTTPFacilitatorClient;
  let requirements: PaymentRequirements;
  let buyer: { address: `0x${string}`; privateKey: `0x${string}` };

  before(async () => {
    stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"] });
    client = new HTTPFacilitatorClient({ url: `${stack.facilitatorUrl}/v2/x402` });
    const info = stack.networks["cronos-testnet"]!;
    buyer = info.buyers[0]!;
    requirements = {
      scheme: "exact",
      network: "eip155:338",
      asset: info.token,
      amount: PRICE.toString(),
      payTo: stack.seller,
      maxTimeoutSeconds: 300,
      extra: { name: info.domain.name, version: info.domain.version },
    };
  });
  after(async () => {
    await stack?.stop();
  });

  /** A payment from @x402/evm's client scheme carrying `id`, added as `@x402/extensions` adds it to a seller's declaration. */
  async function paymentWithId(id: string): Promise<PaymentPayload> {
    const partial = await new ExactEvmScheme(privateKeyToAccount(buyer.privateKey)).createPaymentPayload(2, requirements);
    const extensions = appendPaymentIdentifierToExtensions({ "payment-identifier": declarePaymentIdentifierExtension(true) }, id);
    const payment = { x402Version: 2, resource: { url: "http://seller.test/weather" }, accepted: requirements, payload: partial.payload, extensions } as PaymentPayload;
    expect(extractPaymentIdentifier(payment)).to.equal(id);
    return payment;
  }

  it("lists payment-identifier in supported", async () => {
    expect((await client.getSupported()).extensions).to.deep.equal(["bazaar", "payment-identifier"]);
  });

  it("the same id with the same payment: the same answer and the same transaction, paid once", async () => {
    const payment = await paymentWithId(generatePaymentId());
    const before = await partyBalances(stack, "cronos-testnet", buyer.address);
    const first = plain(await client.settle(payment, requirements));
    expect(first.transaction).to.match(TX_HASH);
    expect(first).to.deep.equal({ success: true, payer: buyer.address, transaction: first.transaction, network: "eip155:338" });
    const again = plain(await client.settle(payment, requirements));
    expect(again).to.deep.equal(first);
    await expectPaidOnChain(stack, "cronos-testnet", String(first.transaction), { buyer: buyer.address, price: PRICE, before });
  });

  it("the same id with the same payment, settled at once many times: one transaction, every answer the same", async () => {
    const payment = await paymentWithId(generatePaymentId("burst_"));
    const before = await partyBalances(stack, "cronos-testnet", buyer.address);
    const answers = (await Promise.all(Array.from({ length: 6 }, () => client.settle(payment, requirements)))).map(plain);
    const [first] = answers;
    expect(first!.success).to.equal(true);
    expect(answers).to.deep.equal(Array.from({ length: 6 }, () => first));
    await expectPaidOnChain(stack, "cronos-testnet", String(first!.transaction), { buyer: buyer.address, price: PRICE, before });
  });

  it("verify of a payment settled under its id answers valid (a seller's retry verifies before it settles), and the settle that follows gives the same transaction", async () => {
    const payment = await paymentWithId(generatePaymentId("retry_"));
    const first = plain(await client.settle(payment, requirements));
    expect(first.success).to.equal(true);
    expect(plain(await client.verify(payment, requirements))).to.deep.equal({ isValid: true, payer: buyer.address });
    expect(plain(await client.settle(payment, requirements))).to.deep.equal(first);
    // Without the id, the same authorization is "already used", as before.
    const bare = { ...payment, extensions: {} } as PaymentPayload;
    expect(plain(await client.verify(bare, requirements))).to.include({ isValid: false, invalidReason: "invalid_exact_evm_nonce_already_used" });
  });

  /** The v2 settle answer refusing a payment under an identifier bound to another (nothing sent). */
  const conflictAnswer = (refusal: string) => ({
    success: false,
    errorReason: "payment_identifier_conflict",
    errorMessage: refusal,
    payer: buyer.address,
    transaction: "",
    network: "eip155:338",
  });

  /** The kit's seller of one paid route declaring payment-identifier (`mode`), its 402 offer, and a way to pay it. */
  async function identifierSeller(mode: "required" | "optional") {
    const app = express();
    app.get(
      "/report",
      requirePayment(paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: PRICE }), { facilitatorUrl: stack.facilitatorUrl, paymentIdentifier: mode }),
      (_req, res) => void res.json({ report: "ok" }),
    );
    const seller = await listen(app);
    const unpaid = await fetch(`${seller.url}/report`);
    expect(unpaid.status).to.equal(402);
    const offer = decodeBase64Json(unpaid.headers.get("PAYMENT-REQUIRED")) as unknown as { accepts: Array<Record<string, unknown>>; extensions: Record<string, { info: Record<string, unknown> }> };
    const pay = async (payment: unknown) => fetch(`${seller.url}/report`, { headers: { "PAYMENT-SIGNATURE": encodeBase64Json(payment) } });
    return { seller, offer, pay };
  }

  it("the kit's seller with paymentIdentifier: \"required\" declares it in PAYMENT-REQUIRED, answers 400 to a v2 payment without an id, and a retry with the kit buyer's echoed id gets the same transaction", async () => {
    const { seller, offer, pay } = await identifierSeller("required");
    try {
      expect(offer.extensions["payment-identifier"]!.info).to.deep.equal({ required: true });
      const signer = privateKeyToAccount(buyer.privateKey);

      const withoutId = await pay(await createV2PaymentPayload({ signer, requirements: offer.accepts[0]! }));
      expect([withoutId.status, await withoutId.json()]).to.deep.equal([
        400,
        { error: "Payment identifier required", details: 'this resource requires paymentPayload.extensions["payment-identifier"].info.id' },
      ]);

      const payment = await createV2PaymentPayload({ signer, requirements: offer.accepts[0]!, extensions: offer.extensions });
      const id = extractPaymentIdentifier(payment as unknown as PaymentPayload);
      expect(id).to.match(/^pay_[0-9a-f]{32}$/);
      const before = await partyBalances(stack, "cronos-testnet", buyer.address);
      const paid = await pay(payment);
      expect(paid.status).to.equal(200);
      const receipt = decodeBase64Json(paid.headers.get("PAYMENT-RESPONSE")) as unknown as { transaction: string };
      const again = await pay(payment);
      expect(again.status).to.equal(200);
      expect((decodeBase64Json(again.headers.get("PAYMENT-RESPONSE")) as unknown as { transaction: string }).transaction).to.equal(receipt.transaction);
      await expectPaidOnChain(stack, "cronos-testnet", receipt.transaction, { buyer: buyer.address, price: PRICE, before });
    } finally {
      await seller.close();
    }
  });

  it("the kit's seller with paymentIdentifier: \"optional\" declares it not required: a v2 payment without an id is paid, one with the kit buyer's echoed id gets the same transaction on a retry", async () => {
    const { seller, offer, pay } = await identifierSeller("optional");
    try {
      expect(offer.extensions["payment-identifier"]!.info).to.deep.equal({ required: false });
      const signer = privateKeyToAccount(buyer.privateKey);
      const receiptOf = (answer: Response) => (decodeBase64Json(answer.headers.get("PAYMENT-RESPONSE")) as unknown as { transaction: string }).transaction;

      let before = await partyBalances(stack, "cronos-testnet", buyer.address);
      const withoutId = await pay(await createV2PaymentPayload({ signer, requirements: offer.accepts[0]! }));
      expect([withoutId.status, await withoutId.json()]).to.deep.equal([200, { report: "ok", payment: { txHash: receiptOf(withoutId), from: buyer.address, to: stack.seller, value: PRICE.toString() } }]);
      await expectPaidOnChain(stack, "cronos-testnet", receiptOf(withoutId), { buyer: buyer.address, price: PRICE, before });

      const payment = await createV2PaymentPayload({ signer, requirements: offer.accepts[0]!, extensions: offer.extensions });
      expect(extractPaymentIdentifier(payment as unknown as PaymentPayload)).to.match(/^pay_[0-9a-f]{32}$/);
      before = await partyBalances(stack, "cronos-testnet", buyer.address);
      const paid = await pay(payment);
      expect(paid.status).to.equal(200);
      const again = await pay(payment);
      expect([again.status, receiptOf(again)]).to.deep.equal([200, receiptOf(paid)]);
      await expectPaidOnChain(stack, "cronos-testnet", receiptOf(paid), { buyer: buyer.address, price: PRICE, before });
    } finally {
      await seller.close();
    }
  });

  it("the same id with another payment: refused on verify and settle, naming the identifier, and nothing is sent", async () => {
    const id = generatePaymentId("dup_");
    const first = plain(await client.settle(await paymentWithId(id), requirements));
    expect(first.success).to.equal(true);
    const other = await paymentWithId(id);
    const before = await partyBalances(stack, "cronos-testnet", buyer.address);
    const refusal = `Payment identifier ${id} is already used by another payment`;
    expect(plain(await client.verify(other, requirements))).to.deep.equal({
      isValid: false,
      invalidReason: "payment_identifier_conflict",
      invalidMessage: refusal,
      payer: buyer.address,
    });
    expect(plain(await client.settle(other, requirements))).to.deep.equal(conflictAnswer(refusal));
    expect(await partyBalances(stack, "cronos-testnet", buyer.address)).to.deep.equal(before);
    // The other authorization is still good without the identifier (or under a fresh one).
    const fresh = plain(await client.settle(await paymentWithId(generatePaymentId()), requirements));
    expect(fresh.success).to.equal(true);
  });

  /**
   * The payer re-signs `payment`'s nonce for other terms (another payee, another value), under the same id:
   * what a payer would send to make a second seller believe it was paid by the first payment's transaction.
   */
  async function resignedUnderSameNonce(payment: PaymentPayload, terms: { payTo: `0x${string}`; amount: string }): Promise<{ payment: PaymentPayload; requirements: PaymentRequirements }> {
    const info = stack.networks["cronos-testnet"]!;
    const signed = payment.payload.authorization as { from: `0x${string}`; validAfter: string; validBefore: string; nonce: `0x${string}` };
    const message = { from: signed.from, to: terms.payTo, value: BigInt(terms.amount), validAfter: BigInt(signed.validAfter), validBefore: BigInt(signed.validBefore), nonce: signed.nonce };
    const { signature } = await signTransferAuthorization({
      account: privateKeyToAccount(buyer.privateKey),
      domain: { name: info.domain.name, version: info.domain.version, chainId: 338, verifyingContract: info.token },
      message,
    });
    const other = { ...requirements, payTo: terms.payTo, amount: terms.amount };
    const authorization = { ...message, value: terms.amount, validAfter: signed.validAfter, validBefore: signed.validBefore };
    return { payment: { ...payment, accepted: other, payload: { signature, authorization } } as PaymentPayload, requirements: other };
  }

  for (const [what, terms] of [
    ["another payee", (payee: `0x${string}`) => ({ payTo: payee, amount: PRICE.toString() })],
    ["another value", () => ({ payTo: stack.seller, amount: "5000000" })],
  ] as const) {
    it(`a payment re-signed under the settled payment's nonce and id for ${what}: refused on verify and settle as payment_identifier_conflict, never answered with the first transaction, nothing sent`, async () => {
      const info = stack.networks["cronos-testnet"]!;
      const payee = stack.networks["cronos-testnet"]!.buyers[2]!.address;
      const id = generatePaymentId("replay_");
      const original = await paymentWithId(id);
      const first = plain(await client.settle(original, requirements));
      expect(first.success).to.equal(true);
      const resigned = await resignedUnderSameNonce(original, terms(payee));
      const parties = [buyer.address, stack.seller, payee];
      const before = await tokenBalances(info.rpcUrl, info.token, parties);
      const sent = await rpcClient(info.rpcUrl).getTransactionCount({ address: stack.relayer, blockTag: "pending" });
      const refusal = `Payment identifier ${id} is already used by another payment`;
      expect(plain(await client.verify(resigned.payment, resigned.requirements))).to.deep.equal({
        isValid: false,
        invalidReason: "payment_identifier_conflict",
        invalidMessage: refusal,
        payer: buyer.address,
      });
      expect(plain(await client.settle(resigned.payment, resigned.requirements))).to.deep.equal(conflictAnswer(refusal));
      expect(await tokenBalances(info.rpcUrl, info.token, parties)).to.deep.equal(before);
      expect(await rpcClient(info.rpcUrl).getTransactionCount({ address: stack.relayer, blockTag: "pending" })).to.equal(sent);
      // The payment that was settled under the id still gets its own answer.
      expect(plain(await client.settle(original, requirements))).to.deep.equal(first);
    });
  }

  it("two payments racing under one new id: exactly one is paid, the other refused naming the identifier", async () => {
    const id = generatePaymentId("race_");
    const [a, b] = await Promise.all([paymentWithId(id), paymentWithId(id)]);
    const before = await partyBalances(stack, "cronos-testnet", buyer.address);
    const answers = (await Promise.all([client.settle(a, requirements), client.settle(b, requirements)])).map(plain);
    expect(answers.filter((answer) => answer.success === true)).to.have.length(1);
    expect(answers.filter((answer) => answer.errorReason === "payment_identifier_conflict").map((answer) => answer.errorMessage)).to.deep.equal([
      `Payment identifier ${id} is already used by another payment`,
    ]);
    const paid = answers.find((answer) => answer.success === true)!;
    await expectPaidOnChain(stack, "cronos-testnet", String(paid.transaction), { buyer: buyer.address, price: PRICE, before });
  });

  it("an identifier the package would refuse (too short, other characters) is a 400 invalid_request naming the field", async () => {
    const payment = await paymentWithId(generatePaymentId());
    for (const id of ["short", "has spaces in it, sixteen+"]) {
      const bad = { ...payment, extensions: { "payment-identifier": { info: { required: true, id } } } } as PaymentPayload;
      const caught = await rejection(client.verify(bad, requirements), Error, id);
      expect(caught, id).to.include({
        name: "VerifyError",
        statusCode: 400,
        invalidReason: "invalid_request",
        message: 'invalid_request: Invalid request: paymentPayload.extensions["payment-identifier"].info.id must be 16 to 128 characters of A-Z a-z 0-9 _ -',
      });
    }
    // Malformed as validatePaymentIdentifier sees it: refused too, not silently ignored.
    for (const [extension, what] of [
      [{ info: { id: generatePaymentId() } }, "info.required must be a boolean"],
      [{ info: { required: "yes", id: generatePaymentId() } }, "info.required must be a boolean"],
      [{ required: true }, "info must be an object"],
      ["pay_0123456789abcdef", "must be an object"],
    ] as const) {
      expect(validatePaymentIdentifier(extension).valid, what).to.equal(false);
      const bad = { ...payment, extensions: { "payment-identifier": extension } } as PaymentPayload;
      const caught = await rejection(client.verify(bad, requirements), Error, what);
      expect(caught, what).to.include({ name: "VerifyError", statusCode: 400, invalidReason: "invalid_request", message: `invalid_request: Invalid request: paymentPayload.extensions["payment-identifier"]${what.startsWith("must") ? " " : "."}${what}` });
    }
  });

  it("the kit's buyer attaches an id (createV2PaymentPayload paymentId), and a repeat gets the same transaction", async () => {
    const id = generatePaymentId("kit_");
    const payment = (await createV2PaymentPayload({ signer: privateKeyToAccount(buyer.privateKey), requirements, paymentId: id })) as unknown as PaymentPayload;
    expect(extractPaymentIdentifier(payment)).to.equal(id);
    const first = plain(await client.settle(payment, requirements));
    expect(first.success).to.equal(true);
    expect(plain(await client.settle(payment, requirements))).to.deep.equal(first);
    const caught = await rejection(createV2PaymentPayload({ signer: privateKeyToAccount(buyer.privateKey), requirements, paymentId: "bad id" }), Error);
    expect(caught).to.include({ name: "PaymentError", code: "invalid_parameters", message: "paymentId must be 16 to 128 characters of A-Z a-z 0-9 _ -" });
  });
});
