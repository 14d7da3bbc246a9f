import { expect } from "chai";
import express from "express";
import type { Address, Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader, createV2PaymentPayload, getPaymentResponse, randomNonce, wrapFetchWithPayment } from "../../src/buyer/index.js";
import type { LocalStack } from "../../src/harness/stack.js";
import type { PaymentRequirements } from "../../src/protocol/schemas.js";
import { paymentRequirements, requirePayment } from "../../src/seller/index.js";
import { chainTime, increaseTime, rpcClient } from "../helpers/chain.js";
import { decodeBase64Json, encodeBase64Json, expectAnswer, listen, recordingFetch, type Listening } from "../helpers/http.js";
import { paymentRequiredBody, PRICE, STACK_OPTIONS, startTestStack } from "../helpers/seller.js";
import { expectPaidOnChain, partyBalances } from "../compat/helpers.js";

/** The window these routes give a settled payment: `maxTimeoutSeconds`. */
const WINDOW_SECONDS = 60;
/** A cheaper route's price, paid to the same seller. */
const CHEAP = 1_000n;
/** 2100-01-01T00:00:00Z: the authorization of the attack, valid for ever in practice. */
const YEAR_2100 = 4_102_444_800n;

describe("e2e: one payment buys one answer and its retries within maxTimeoutSeconds (seller middleware, both dialects, local chain)", function () {
  let stack: LocalStack;
  let rpcUrl: string;
  let sellers: RetrySeller[];
  /** The chain's clock as EDR keeps it (the wall clock plus what the test moved it by): the sellers measure on it. */
  let offsetMs = 0;
  const chainClock = () => Date.now() + offsetMs;

  /** Moves the chain's time forward (mining a block at the new time), and with it the sellers' clock. */
  async function moveChainTime(seconds: number): Promise<void> {
    await increaseTime(rpcUrl, seconds);
    offsetMs = Number(await chainTime(rpcUrl)) * 1000 - Date.now();
  }

  interface RetrySeller extends Listening {
    report: PaymentRequirements;
    cheap: PaymentRequirements;
    /** Handler runs per route. */
    runs: { report: number; cheap: number };
  }

  /** A seller with `/report` (PRICE) and `/cheap` (CHEAP), both paying the stack's seller, on the chain's clock. */
  async function startRetrySeller(): Promise<RetrySeller> {
    const report = paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: PRICE, maxTimeoutSeconds: WINDOW_SECONDS, resource: "/report" });
    const cheap = paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: CHEAP, maxTimeoutSeconds: WINDOW_SECONDS, resource: "/cheap" });
    const runs = { report: 0, cheap: 0 };
    const app = express();
    const options = { facilitatorUrl: stack.facilitatorUrl, clock: chainClock, paymentIdentifier: "optional" as const };
    app.get("/report", requirePayment(report, options), (_req, res) => void res.json({ report: "sunny", run: ++runs.report }));
    app.get("/cheap", requirePayment(cheap, options), (_req, res) => void res.json({ cheap: true, run: ++runs.cheap }));
    return Object.assign(await listen(app), { report, cheap, runs });
  }

  before(async () => {
    stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], buyers: 4 });
    rpcUrl = stack.networks["cronos-testnet"]!.rpcUrl;
    await moveChainTime(0);
  });
  beforeEach(async () => {
    sellers = [await startRetrySeller(), await startRetrySeller()];
  });
  afterEach(async () => {
    await Promise.all(sellers.map((seller) => seller.close()));
  });
  after(async () => {
    await stack?.stop();
  });

  const buyer = (index: number) => {
    const { address, privateKey } = stack.networks["cronos-testnet"]!.buyers[index]!;
    return { address, account: privateKeyToAccount(privateKey) };
  };
  /** The seller's 402 once a payment's window has ended, and when it ended. */
  const windowEnded = (requirements: PaymentRequirements, settledAt: string) => {
    const until = new Date(Date.parse(settledAt) + WINDOW_SECONDS * 1000).toISOString();
    return paymentRequiredBody(
      requirements,
      "Payment already used",
      `this payment was settled at ${settledAt}, and a payment is served again only within maxTimeoutSeconds (${WINDOW_SECONDS} s) of its settlement, until ${until}; sign a new payment`,
    );
  };
  /** The time of the block that mined `hash`, as ISO-8601. */
  async function blockTimeOf(hash: Hex): Promise<string> {
    const client = rpcClient(rpcUrl);
    const { blockNumber } = await client.getTransactionReceipt({ hash });
    return new Date(Number((await client.getBlock({ blockNumber })).timestamp) * 1000).toISOString();
  }
  /** The x402 v2 offer of a route's 402 (`PAYMENT-REQUIRED`). */
  async function v2Offer(url: string) {
    const unpaid = await fetch(url);
    expect(unpaid.status).to.equal(402);
    return decodeBase64Json(unpaid.headers.get("PAYMENT-REQUIRED")) as unknown as { accepts: Array<Record<string, unknown>>; extensions: Record<string, unknown> };
  }

  it("Cronos dialect (wrapFetchWithPayment): a retry of the same X-PAYMENT gets the same answer at any instance until settlement + maxTimeoutSeconds of chain time, then 402 Payment already used with fresh requirements; USDC.e moves once", async () => {
    const [a, b] = sellers as [RetrySeller, RetrySeller];
    const { address, account } = buyer(0);
    const before = await partyBalances(stack, "cronos-testnet", address);
    const recorder = recordingFetch();
    const paid = await wrapFetchWithPayment(recorder.fetch, { signer: account, maxAmount: PRICE })(`${a.url}/report`);
    expect(paid.status).to.equal(200);
    const first = (await paid.json()) as { report: string; run: number; payment: { txHash: Hex; timestamp: string } };
    expect(first.run).to.equal(1);
    await expectPaidOnChain(stack, "cronos-testnet", first.payment.txHash, { buyer: address, price: PRICE, before });
    const header = recorder.paymentHeaders[0]!;

    // Within the window, at either instance: the same payment and settlement, the handler runs again.
    await moveChainTime(WINDOW_SECONDS / 2);
    for (const [seller, run] of [[b, 1], [a, 2]] as const) {
      const retry = await fetch(`${seller.url}/report`, { headers: { "X-PAYMENT": header } });
      await expectAnswer(retry, 200, { report: "sunny", run, payment: first.payment });
      expect(getPaymentResponse(retry)).to.deep.equal(getPaymentResponse(paid));
    }

    // Past it, at either instance: 402 with the fresh requirements and the reason, nothing served, nothing moved.
    await moveChainTime(WINDOW_SECONDS / 2 + 1);
    for (const seller of [a, b]) {
      const late = await fetch(`${seller.url}/report`, { headers: { "X-PAYMENT": header } });
      await expectAnswer(late, 402, windowEnded(seller.report, first.payment.timestamp));
      expect(late.headers.get("X-PAYMENT-RESPONSE")).to.equal(null);
    }
    expect([a.runs.report, b.runs.report]).to.deep.equal([2, 1]);
    expect(await partyBalances(stack, "cronos-testnet", address)).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);

    // A new payment is a new answer.
    const again = await wrapFetchWithPayment(fetch, { signer: account, maxAmount: PRICE })(`${a.url}/report`);
    const second = (await again.json()) as { payment: { txHash: Hex } };
    expect([again.status, second.payment.txHash === first.payment.txHash]).to.deep.equal([200, false]);
    expect(await partyBalances(stack, "cronos-testnet", address)).to.deep.equal([before[0]! - 2n * PRICE, before[1]! + 2n * PRICE]);
  });

  it("x402 v2 under a payment identifier with validBefore in 2100 (the issue's attack): the same transaction within the window, then ten replays are ten 402s; USDC.e moves once", async () => {
    const [seller] = sellers as [RetrySeller];
    const { address, account } = buyer(1);
    const offer = await v2Offer(`${seller.url}/report`);
    const payment = await createV2PaymentPayload({ signer: account, requirements: offer.accepts[0]!, extensions: offer.extensions, validBefore: YEAR_2100 });
    expect(payment.extensions?.["payment-identifier"]).to.have.nested.property("info.id").that.is.a("string");
    const pay = () => fetch(`${seller.url}/report`, { headers: { "PAYMENT-SIGNATURE": encodeBase64Json(payment) } });
    const before = await partyBalances(stack, "cronos-testnet", address);

    const paid = await pay();
    expect(paid.status).to.equal(200);
    const receipt = decodeBase64Json(paid.headers.get("PAYMENT-RESPONSE")) as unknown as { transaction: Hex };
    await expectPaidOnChain(stack, "cronos-testnet", receipt.transaction, { buyer: address, price: PRICE, before });
    const settledAt = await blockTimeOf(receipt.transaction);

    await moveChainTime(WINDOW_SECONDS - 5);
    const retry = await pay();
    expect([retry.status, decodeBase64Json(retry.headers.get("PAYMENT-RESPONSE"))]).to.deep.equal([200, decodeBase64Json(paid.headers.get("PAYMENT-RESPONSE"))]);

    await moveChainTime(6);
    const replays = await Promise.all(Array.from({ length: 10 }, () => pay()));
    for (const replay of replays) {
      await expectAnswer(replay, 402, windowEnded(seller.report, settledAt));
      expect(decodeBase64Json(replay.headers.get("PAYMENT-REQUIRED"))).to.include({ error: "invalid_exact_evm_nonce_already_used" });
      expect(replay.headers.get("PAYMENT-RESPONSE")).to.equal(null);
    }
    expect(seller.runs.report).to.equal(2);
    expect(await partyBalances(stack, "cronos-testnet", address)).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
  });

  it("x402 v2 without an identifier: the facilitator calls a retry used, the seller serves it from the record within the window and refuses it after", async () => {
    const [seller] = sellers as [RetrySeller];
    const { address, account } = buyer(2);
    const offer = await v2Offer(`${seller.url}/report`);
    const payment = await createV2PaymentPayload({ signer: account, requirements: offer.accepts[0]! });
    expect(payment.extensions).to.equal(undefined);
    const pay = () => fetch(`${seller.url}/report`, { headers: { "PAYMENT-SIGNATURE": encodeBase64Json(payment) } });
    const before = await partyBalances(stack, "cronos-testnet", address);

    const paid = await pay();
    const body = (await paid.json()) as { payment: { txHash: Hex } };
    expect(paid.status).to.equal(200);
    const retry = await pay();
    await expectAnswer(retry, 200, { report: "sunny", run: 2, payment: body.payment });
    expect(decodeBase64Json(retry.headers.get("PAYMENT-RESPONSE"))).to.deep.equal(decodeBase64Json(paid.headers.get("PAYMENT-RESPONSE")));

    await moveChainTime(WINDOW_SECONDS + 1);
    const late = await pay();
    expect(late.status).to.equal(402);
    expect(((await late.json()) as { error: string }).error).to.equal("Payment already used");
    expect(seller.runs.report).to.equal(2);
    expect(await partyBalances(stack, "cronos-testnet", address)).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
  });

  it("does not serve a payment whose nonce a cheaper authorization to the same seller spent: the record's value is not this route's price (402 Authorization already used, nothing moves)", async () => {
    const [seller] = sellers as [RetrySeller];
    const { address, account } = buyer(3);
    const nonce = randomNonce();
    const before = await partyBalances(stack, "cronos-testnet", address);
    const cheap = await fetch(`${seller.url}/cheap`, { headers: { "X-PAYMENT": await createPaymentHeader({ signer: account, requirements: seller.cheap, nonce }) } });
    expect(cheap.status).to.equal(200);

    const dear = await fetch(`${seller.url}/report`, { headers: { "X-PAYMENT": await createPaymentHeader({ signer: account, requirements: seller.report, nonce }) } });
    await expectAnswer(dear, 402, paymentRequiredBody(seller.report, "Payment verification failed", "Authorization already used"));
    expect(seller.runs).to.deep.equal({ report: 0, cheap: 1 });
    expect(await partyBalances(stack, "cronos-testnet", address)).to.deep.equal([before[0]! - CHEAP, before[1]! + CHEAP]);
  });

  it("refuses a paid header at another payee's route (verify: Recipient does not match payTo address), never serving it from the record", async () => {
    const [seller] = sellers as [RetrySeller];
    const { account } = buyer(3);
    const recorder = recordingFetch();
    const paid = await wrapFetchWithPayment(recorder.fetch, { signer: account, maxAmount: PRICE })(`${seller.url}/report`);
    expect(paid.status).to.equal(200);
    const other: Address = stack.relayer;
    const app = express();
    const elsewhere = paymentRequirements({ network: "cronos-testnet", payTo: other, amount: PRICE, maxTimeoutSeconds: WINDOW_SECONDS });
    app.get("/report", requirePayment(elsewhere, { facilitatorUrl: stack.facilitatorUrl, clock: chainClock }), (_req, res) => void res.json({ served: true }));
    const otherSeller = await listen(app);
    try {
      const stolen = await fetch(`${otherSeller.url}/report`, { headers: { "X-PAYMENT": recorder.paymentHeaders[0]! } });
      await expectAnswer(stolen, 402, paymentRequiredBody(elsewhere, "Payment verification failed", "Recipient does not match payTo address"));
    } finally {
      await otherSeller.close();
    }
  });
});
