import { expect } from "chai";
import express from "express";
import { recoverTypedDataAddress } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import {
  getPaymentResponse,
  getV2PaymentResponse,
  wrapFetchWithPayment,
  type PaymentFetchOptions,
} from "../../src/buyer/index.js";
import { transferAuthorizationTypedData } from "../../src/protocol/eip3009.js";
import { decodePaymentHeader } from "../../src/protocol/header.js";
import { NETWORKS } from "../../src/protocol/networks.js";
import { listen } from "../helpers/http.js";
import { SETTLED } from "../helpers/stand-in-facilitator.js";
import { VECTOR_PAYEE, VECTOR_SIGNER, VECTOR_V2_OFFER } from "../helpers/vectors.js";
import { rejection } from "../helpers/payment-error.js";

const account = privateKeyToAccount(VECTOR_SIGNER.privateKey);
const TESTNET = {
  scheme: "exact",
  network: "cronos-testnet",
  payTo: VECTOR_PAYEE,
  asset: NETWORKS["cronos-testnet"].token,
  maxAmountRequired: "1000000",
  description: "premium",
  mimeType: "application/json",
  maxTimeoutSeconds: 300,
};
const MAINNET = { ...TESTNET, network: "cronos-mainnet", asset: NETWORKS["cronos-mainnet"].token };
const PAYMENT_RESPONSE = Buffer.from(JSON.stringify(SETTLED)).toString("base64");

interface SellerCall {
  method: string;
  payment: string | undefined;
  body: string;
  auth: string | undefined;
}

/** A seller stand-in: answers 402 with `paymentRequired` until paid (or always, with `alwaysRefuse`). */
async function startSeller(paymentRequired: unknown, setup: { alwaysRefuse?: boolean; rawBody?: string } = {}) {
  const calls: SellerCall[] = [];
  const app = express();
  app.use(express.text({ type: () => true }));
  app.all("/premium", (req, res) => {
    const payment = req.get("X-PAYMENT");
    calls.push({ method: req.method, payment, body: typeof req.body === "string" ? req.body : "", auth: req.get("authorization") });
    if (payment === undefined || setup.alwaysRefuse) {
      if (setup.rawBody !== undefined) res.status(402).type("text/plain").send(setup.rawBody);
      else res.status(402).json(paymentRequired);
      return;
    }
    res.setHeader("X-PAYMENT-RESPONSE", PAYMENT_RESPONSE);
    res.json({ content: "secret" });
  });
  const server = await listen(app);
  return { url: `${server.url}/premium`, calls, close: server.close };
}

const options = (overrides: Partial<PaymentFetchOptions> = {}): PaymentFetchOptions => ({
  signer: account,
  maxAmount: 1_000_000n,
  ...overrides,
});


function paidFor(header: string | undefined) {
  const decoded = decodePaymentHeader(header ?? "");
  if (!decoded.ok) throw new Error("the retry carried no valid X-PAYMENT");
  return decoded.payload;
}

describe("buyer: wrapFetchWithPayment", () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await Promise.all(closers.splice(0).map((close) => close()));
  });
  async function seller(...args: Parameters<typeof startSeller>) {
    const started = await startSeller(...args);
    closers.push(started.close);
    return started;
  }

  it("pays a 402 once and returns the paid answer", async () => {
    const shop = await seller({ error: "Payment Required", x402Version: 1, paymentRequirements: TESTNET, accepts: [TESTNET] });
    const response = await wrapFetchWithPayment(fetch, options())(shop.url);
    expect(response.status).to.equal(200);
    expect(await response.json()).to.deep.equal({ content: "secret" });
    expect(getPaymentResponse(response)).to.deep.equal(SETTLED);
    expect(shop.calls.map((call) => call.payment === undefined)).to.deep.equal([true, false]);

    const payment = paidFor(shop.calls[1]?.payment);
    expect(payment).to.include({ x402Version: 1, scheme: "exact", network: "cronos-testnet", asset: TESTNET.asset });
    expect(payment.authorization).to.include({ from: account.address, to: VECTOR_PAYEE, value: "1000000", validAfter: 0n });
    const info = NETWORKS["cronos-testnet"];
    const signer = await recoverTypedDataAddress({
      ...transferAuthorizationTypedData(
        { ...info.domain, chainId: info.chainId, verifyingContract: info.token },
        { ...payment.authorization, value: BigInt(payment.authorization.value) },
      ),
      signature: payment.authorization.signature,
    });
    expect(signer).to.equal(account.address);
  });

  it("passes non-402 answers through without paying", async () => {
    const app = express();
    const calls: Array<string | undefined> = [];
    app.get("/free", (req, res) => {
      calls.push(req.get("X-PAYMENT"));
      res.status(200).json({ free: true });
    });
    const server = await listen(app);
    closers.push(server.close);
    const response = await wrapFetchWithPayment(fetch, options())(`${server.url}/free`);
    expect(response.status).to.equal(200);
    expect(getPaymentResponse(response)).to.equal(undefined);
    expect(calls).to.deep.equal([undefined]);
  });

  it("picks the first acceptable requirement of an accepts list", async () => {
    const expensive = { ...TESTNET, maxAmountRequired: "2000000" };
    const foreign = { ...TESTNET, network: "base-sepolia", asset: "0x036CbD53842c5426634e7929541eC2318f3dCF7e" };
    const otherScheme = { ...TESTNET, scheme: "upto" };
    const cheapMainnet = { ...MAINNET, maxAmountRequired: "500000" };
    const shop = await seller({ error: "Payment Required", x402Version: 1, accepts: [expensive, foreign, otherScheme, cheapMainnet, TESTNET] });
    const response = await wrapFetchWithPayment(fetch, options())(shop.url);
    expect(response.status).to.equal(200);
    const payment = paidFor(shop.calls[1]?.payment);
    expect(payment.network).to.equal("cronos-mainnet");
    expect(payment.asset).to.equal(MAINNET.asset);
    expect(payment.authorization.value).to.equal("500000");
  });

  it("refuses a too expensive requirement with PaymentError and does not retry", async () => {
    const shop = await seller({ error: "Payment Required", x402Version: 1, paymentRequirements: { ...TESTNET, maxAmountRequired: "1000001" } });
    const error = await rejection(wrapFetchWithPayment(fetch, options())(shop.url), "no_acceptable_requirements");
    expect(error.status).to.equal(402);
    expect(error.details).to.equal("#0: maxAmountRequired 1000001 exceeds maxAmount 1000000");
    expect(shop.calls).to.have.length(1);
  });

  it("refuses a foreign network or a foreign asset", async () => {
    const foreignNetwork = await seller({ error: "Payment Required", x402Version: 1, accepts: [{ ...TESTNET, network: "base" }] });
    const networkError = await rejection(wrapFetchWithPayment(fetch, options())(foreignNetwork.url), "no_acceptable_requirements");
    expect(networkError.details).to.equal('#0: network "base" is not allowed');

    const foreignAsset = { ...TESTNET, asset: "0x5FbDB2315678afecb367f032d93F642f64180aa3" };
    const assetShop = await seller({ error: "Payment Required", x402Version: 1, paymentRequirements: foreignAsset });
    const assetError = await rejection(wrapFetchWithPayment(fetch, options())(assetShop.url), "no_acceptable_requirements");
    expect(assetError.details).to.equal(`#0: asset ${foreignAsset.asset} is not allowed on cronos-testnet`);

    // Mainnet's token is foreign on testnet.
    const swapped = await seller({ error: "Payment Required", x402Version: 1, paymentRequirements: { ...TESTNET, asset: MAINNET.asset } });
    await rejection(wrapFetchWithPayment(fetch, options())(swapped.url), "no_acceptable_requirements");

    const mainnetOnly = await seller({ error: "Payment Required", x402Version: 1, paymentRequirements: TESTNET });
    const onlyError = await rejection(
      wrapFetchWithPayment(fetch, options({ networks: ["cronos"] }))(mainnetOnly.url),
      "no_acceptable_requirements",
    );
    expect(onlyError.details).to.equal('#0: network "cronos-testnet" is not allowed');
  });

  it("pays with an explicitly allowed asset on an explicitly allowed network", async () => {
    const local = { ...TESTNET, asset: "0x5FbDB2315678afecb367f032d93F642f64180aa3" };
    const shop = await seller({ error: "Payment Required", x402Version: 1, paymentRequirements: local });
    const response = await wrapFetchWithPayment(
      fetch,
      options({ networks: ["cronos-testnet"], assets: [local.asset.toLowerCase()] }),
    )(shop.url);
    expect(response.status).to.equal(200);
    expect(paidFor(shop.calls[1]?.payment).asset).to.equal(local.asset);
  });

  it("does not loop on a second 402: it returns it", async () => {
    const shop = await seller({ error: "Payment Required", x402Version: 1, paymentRequirements: TESTNET }, { alwaysRefuse: true });
    const response = await wrapFetchWithPayment(fetch, options())(shop.url);
    expect(response.status).to.equal(402);
    expect(shop.calls).to.have.length(2);
    expect(shop.calls[1]?.payment).to.be.a("string");
  });

  it("throws malformed_402 on a body that is not JSON or holds no requirements", async () => {
    const text = await seller(undefined, { rawBody: "<html>pay me</html>" });
    await rejection(wrapFetchWithPayment(fetch, options())(text.url), "malformed_402");
    const empty = await seller({ error: "Payment Required", x402Version: 1 });
    await rejection(wrapFetchWithPayment(fetch, options())(empty.url), "malformed_402");
    const notList = await seller({ error: "Payment Required", x402Version: 1, accepts: TESTNET });
    await rejection(wrapFetchWithPayment(fetch, options())(notList.url), "malformed_402");
  });

  it("lists invalid requirements among the refusals", async () => {
    const shop = await seller({ error: "Payment Required", x402Version: 1, accepts: [{ ...TESTNET, maxAmountRequired: "1.5" }] });
    const error = await rejection(wrapFetchWithPayment(fetch, options())(shop.url), "no_acceptable_requirements");
    expect(error.details).to.match(/^#0: invalid: maxAmountRequired/);
  });

  it("replays the method, headers and body of the request (init and Request object)", async () => {
    const shop = await seller({ error: "Payment Required", x402Version: 1, paymentRequirements: TESTNET });
    const paidFetch = wrapFetchWithPayment(fetch, options());
    await paidFetch(shop.url, { method: "POST", body: "question=life", headers: { Authorization: "Bearer t" } });
    await paidFetch(new Request(shop.url, { method: "PUT", body: "from a Request", headers: { Authorization: "Bearer r" } }));
    expect(shop.calls.map(({ method, body, auth, payment }) => ({ method, body, auth, paid: payment !== undefined }))).to.deep.equal([
      { method: "POST", body: "question=life", auth: "Bearer t", paid: false },
      { method: "POST", body: "question=life", auth: "Bearer t", paid: true },
      { method: "PUT", body: "from a Request", auth: "Bearer r", paid: false },
      { method: "PUT", body: "from a Request", auth: "Bearer r", paid: true },
    ]);
  });

  describe("an x402 v2 402 (PAYMENT-REQUIRED, as @x402/express answers)", () => {
    const V2_TESTNET = VECTOR_V2_OFFER;
    const V2_SETTLED = { success: true, payer: account.address, transaction: SETTLED.txHash, network: "eip155:338" };
    const base64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64");

    /** A v2 seller: `{}` body, the offer in PAYMENT-REQUIRED, paid by PAYMENT-SIGNATURE; `body` adds a Cronos body. */
    async function v2Seller(accepts: unknown[], body: unknown = {}) {
      const signatures: string[] = [];
      const app = express();
      app.get("/premium", (req, res) => {
        const signature = req.get("PAYMENT-SIGNATURE");
        const payment = req.get("X-PAYMENT");
        if (signature) signatures.push(signature);
        if (signature === undefined && payment === undefined) {
          res.setHeader("PAYMENT-REQUIRED", base64({ x402Version: 2, error: "Payment required", resource: { url: "http://shop/premium" }, accepts }));
          res.status(402).json(body);
          return;
        }
        if (signature) res.setHeader("PAYMENT-RESPONSE", base64(V2_SETTLED));
        else res.setHeader("X-PAYMENT-RESPONSE", PAYMENT_RESPONSE);
        res.json({ content: "secret", paidWith: signature ? "PAYMENT-SIGNATURE" : "X-PAYMENT" });
      });
      const server = await listen(app);
      closers.push(server.close);
      return { url: `${server.url}/premium`, signatures };
    }

    it("pays with PAYMENT-SIGNATURE: the v2 payment echoing the offer, signed over chain 338 and the offer's domain", async () => {
      const shop = await v2Seller([{ ...V2_TESTNET, scheme: "upto" }, V2_TESTNET]);
      const response = await wrapFetchWithPayment(fetch, options())(shop.url);
      expect(response.status).to.equal(200);
      expect(await response.json()).to.deep.equal({ content: "secret", paidWith: "PAYMENT-SIGNATURE" });
      expect(getV2PaymentResponse(response)).to.deep.equal(V2_SETTLED);
      expect(getPaymentResponse(response)).to.equal(undefined);

      const payment = JSON.parse(Buffer.from(shop.signatures[0]!, "base64").toString("utf8"));
      expect(payment).to.deep.include({ x402Version: 2, resource: { url: "http://shop/premium" }, accepted: V2_TESTNET });
      const { authorization, signature } = payment.payload;
      expect(authorization).to.include({ from: account.address, to: VECTOR_PAYEE, value: "1000000", validAfter: "0" });
      expect(authorization.validBefore).to.match(/^\d+$/);
      const info = NETWORKS["cronos-testnet"];
      const signer = await recoverTypedDataAddress({
        ...transferAuthorizationTypedData(
          { name: "Bridged USDC (Stargate)", version: "1", chainId: 338, verifyingContract: info.token },
          { ...authorization, value: 1_000_000n, validAfter: 0n, validBefore: BigInt(authorization.validBefore) },
        ),
        signature,
      });
      expect(signer).to.equal(account.address);
    });

    it("pays in the Cronos dialect when the 402 offers both (the kit seller's answer)", async () => {
      const shop = await v2Seller([V2_TESTNET], { error: "Payment Required", x402Version: 1, paymentRequirements: TESTNET, accepts: [TESTNET] });
      const response = await wrapFetchWithPayment(fetch, options())(shop.url);
      expect(await response.json()).to.deep.equal({ content: "secret", paidWith: "X-PAYMENT" });
      expect(shop.signatures).to.deep.equal([]);
    });

    it("refuses v2 offers it will not pay, naming them as the seller wrote them", async () => {
      const shop = await v2Seller([
        { ...V2_TESTNET, amount: "1000001" },
        { ...V2_TESTNET, network: "eip155:8453" },
        { ...V2_TESTNET, asset: "0x5FbDB2315678afecb367f032d93F642f64180aa3" },
        { ...V2_TESTNET, amount: "1.5" },
      ]);
      const error = await rejection(wrapFetchWithPayment(fetch, options())(shop.url), "no_acceptable_requirements");
      expect(error.details).to.equal(
        [
          "#0: amount 1000001 exceeds maxAmount 1000000",
          '#1: network "eip155:8453" is not allowed',
          "#2: asset 0x5FbDB2315678afecb367f032d93F642f64180aa3 is not allowed on eip155:338",
          "#3: invalid: amount must be a decimal string of digits",
        ].join("; "),
      );
      expect(shop.signatures).to.deep.equal([]);
    });
  });
});
