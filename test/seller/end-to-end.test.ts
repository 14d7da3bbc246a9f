import { expect } from "chai";
import express from "express";
import { privateKeyToAccount } from "viem/accounts";
import { getPaymentResponse, PaymentError, wrapFetchWithPayment } from "../../src/buyer/index.js";
import { decodePaymentHeader } from "../../src/protocol/header.js";
import { paymentRequirements, requirePayment } from "../../src/seller/index.js";
import { listen } from "../helpers/http.js";
import { json, SETTLED, startStandInFacilitator, type StandInFacilitator } from "../helpers/stand-in-facilitator.js";
import { VECTOR_PAYEE, VECTOR_SIGNER } from "../helpers/vectors.js";
import { rejection } from "../helpers/reject.js";

describe("buyer SDK → seller SDK → stand-in facilitator", () => {
  const buyer = privateKeyToAccount(VECTOR_SIGNER.privateKey);
  const requirements = paymentRequirements({ network: "cronos-testnet", payTo: VECTOR_PAYEE, amount: 1_000_000n });
  let standIn: StandInFacilitator;
  let seller: Awaited<ReturnType<typeof listen>>;

  before(async () => {
    standIn = await startStandInFacilitator();
    const app = express();
    app.get("/weather", requirePayment(requirements, { facilitatorUrl: standIn.url }), (_req, res) => {
      res.json({ city: "Lisbon", sky: "clear" });
    });
    seller = await listen(app);
  });
  after(async () => {
    await seller.close();
    await standIn.close();
  });
  beforeEach(() => standIn.reset());

  it("pays, and the seller forwards the buyer's header untouched", async () => {
    const paidFetch = wrapFetchWithPayment(fetch, { signer: buyer, maxAmount: 1_000_000n });
    const response = await paidFetch(`${seller.url}/weather`);
    expect(response.status).to.equal(200);
    expect(await response.json()).to.deep.equal({
      city: "Lisbon",
      sky: "clear",
      payment: {
        txHash: SETTLED.txHash,
        from: SETTLED.from,
        to: SETTLED.to,
        value: SETTLED.value,
        blockNumber: SETTLED.blockNumber,
        timestamp: SETTLED.timestamp,
      },
    });
    expect(getPaymentResponse(response)).to.deep.equal(SETTLED);

    expect(standIn.requests.map((request) => request.path)).to.deep.equal(["/v2/x402/verify", "/v2/x402/settle"]);
    const [verify, settle] = standIn.requests;
    expect(settle?.body).to.deep.equal(verify?.body);
    expect(verify?.body).to.have.property("paymentRequirements").that.deep.equals(requirements);
    const header: unknown = verify?.body && typeof verify.body === "object" && "paymentHeader" in verify.body ? verify.body.paymentHeader : undefined;
    expect(header).to.be.a("string");
    const decoded = decodePaymentHeader(String(header));
    expect(decoded.ok && decoded.payload.authorization).to.include({ from: buyer.address, to: VECTOR_PAYEE, value: "1000000" });
  });

  it("hands back the seller's second 402 when the facilitator refuses the payment", async () => {
    standIn.answers.verify = json({ isValid: false, invalidReason: "ERC20: transfer amount exceeds balance" });
    const response = await wrapFetchWithPayment(fetch, { signer: buyer, maxAmount: 1_000_000n })(`${seller.url}/weather`);
    expect(response.status).to.equal(402);
    expect(await response.json()).to.deep.equal({
      error: "Payment verification failed",
      x402Version: 1,
      paymentRequirements: requirements,
      accepts: [requirements],
      reason: "ERC20: transfer amount exceeds balance",
    });
    expect(standIn.requests.map((request) => request.path)).to.deep.equal(["/v2/x402/verify"]);
  });

  it("does not pay more than maxAmount", async () => {
    const caught = await rejection(wrapFetchWithPayment(fetch, { signer: buyer, maxAmount: 999_999n })(`${seller.url}/weather`), PaymentError);
    expect(caught.code).to.equal("no_acceptable_requirements");
    expect(standIn.requests).to.deep.equal([]);
  });
});
