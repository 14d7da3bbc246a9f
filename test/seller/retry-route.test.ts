import { expect } from "chai";
import express from "express";
import { paymentRequirements, requirePayment } from "../../src/seller/index.js";
import { makePayment, openFacilitator, v2BodyOf } from "../helpers/facilitator.js";
import { encodeBase64Json, listen, type Listening } from "../helpers/http.js";

// Issue 39, finding 5: the seller's retry window matched the facilitator's record by payer, payTo and amount
// only, so within maxTimeoutSeconds one payment's header was served on every route of the same price. A
// settled payment is now served again only on the route (method and resource) it was first served on.

type Opened = Awaited<ReturnType<typeof openFacilitator>>;
const PRICE = 1_000_000n;

describe("the seller's retry window is bound to the route a payment was made for (issue 39)", function () {
  this.timeout(120_000);
  let opened: Opened;
  let facilitator: Listening;
  let seller: Listening;
  let now = 0;
  const served: string[] = [];

  before(async () => {
    opened = await openFacilitator("cronos-testnet");
    facilitator = await listen(opened.app);
    const options = { facilitatorUrl: facilitator.url, paymentIdentifier: "optional" as const, clock: () => now };
    const app = express();
    // Two routes of one price to one payTo, and a third of the same price under another resource name.
    for (const path of ["/report", "/premium"]) {
      app.get(path, requirePayment(paymentRequirements({ network: "cronos-testnet", payTo: opened.seller.address, amount: PRICE }), options), (req, res) => {
        served.push(req.path);
        res.json({ route: req.path });
      });
    }
    seller = await listen(app);
  });
  after(async () => {
    await seller?.close();
    await facilitator?.close();
    await opened?.facilitator.close();
  });
  beforeEach(async () => {
    served.length = 0;
    // The seller's clock is the chain's (its blocks start at a fixed date), a second after its latest block.
    now = Number((await opened.chain.publicClient.getBlock()).timestamp) * 1000 + 1_000;
  });

  const get = async (path: string, headers: Record<string, string>) => {
    const response = await fetch(`${seller.url}${path}`, { headers });
    return { status: response.status, body: (await response.json()) as { route?: string; error?: string; reason?: string } };
  };
  /** The answer to the same payment on `/premium` (another route) and then on `/report` (its own), after it was paid on `/report`. */
  async function replay(headers: Record<string, string>) {
    const first = await get("/report", headers);
    const other = await get("/premium", headers);
    const own = await get("/report", headers);
    return { first, other, own };
  }
  const REFUSED = (resource: string) => ({
    status: 402,
    error: "Payment already used",
    reason: `this payment was made for ${resource}, and a payment is served again only on the resource it paid for; sign a new payment for this one`,
  });

  it("Cronos dialect (X-PAYMENT): the same header on a second route of the same price is 402; on its own route it is served again", async () => {
    const { body } = await makePayment(opened.chain, { amount: PRICE });
    const { first, other, own } = await replay({ "X-PAYMENT": body.paymentHeader });
    expect([first.status, first.body.route]).to.deep.equal([200, "/report"]);
    expect({ status: other.status, error: other.body.error, reason: other.body.reason }).to.deep.equal(REFUSED("/report"));
    expect([own.status, own.body.route]).to.deep.equal([200, "/report"]);
    expect(served).to.deep.equal(["/report", "/report"]);
  });

  it("x402 v2 under a payment identifier (PAYMENT-SIGNATURE): the same payment on a second route is 402; on its own route it is served again", async () => {
    const { paymentPayload } = v2BodyOf(await makePayment(opened.chain, { amount: PRICE }));
    const header = encodeBase64Json({ ...paymentPayload, extensions: { "payment-identifier": { info: { required: false, id: "pay_route_bound_0123456789" } } } });
    const { first, other, own } = await replay({ "PAYMENT-SIGNATURE": header });
    expect([first.status, first.body.route]).to.deep.equal([200, "/report"]);
    expect({ status: other.status, error: other.body.error, reason: other.body.reason }).to.deep.equal(REFUSED("/report"));
    expect([own.status, own.body.route]).to.deep.equal([200, "/report"]);
    expect(served).to.deep.equal(["/report", "/report"]);
  });

  it("x402 v2 without an identifier, and the same authorization in the other dialect: 402 on the second route", async () => {
    const made = await makePayment(opened.chain, { amount: PRICE });
    const header = encodeBase64Json(v2BodyOf(made).paymentPayload);
    const { first, other, own } = await replay({ "PAYMENT-SIGNATURE": header });
    expect([first.status, other.status, own.status]).to.deep.equal([200, 402, 200]);
    expect(other.body.reason).to.equal(REFUSED("/report").reason);
    // The very authorization, as an X-PAYMENT on the other route.
    const crossed = await get("/premium", { "X-PAYMENT": made.body.paymentHeader });
    expect({ status: crossed.status, error: crossed.body.error, reason: crossed.body.reason }).to.deep.equal(REFUSED("/report"));
    expect(served).to.deep.equal(["/report", "/report"]);
  });
});
