import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import express from "express";
import request from "supertest";
import { privateKeyToAccount } from "viem/accounts";
import type { Address, Hex } from "viem";
import { createV2PaymentPayload } from "../../src/buyer/index.js";
import { localAccount } from "../../src/harness/accounts.js";
import type { DiscoveryEntry } from "../../src/ledger/types.js";
import { paymentRequirements, requirePayment } from "../../src/seller/index.js";
import { makePayment, openFacilitator, v2BodyOf } from "../helpers/facilitator.js";
import { decodeBase64Json, encodeBase64Json, listen } from "../helpers/http.js";

// Issue 39, finding 2: the catalog listed what the payer's payload said (its resource URL, description and
// declaration), on every settled answer, repeats under a payment identifier included: one real 1-unit payment
// re-sent six times with other URLs and descriptions made six entries under the seller's payTo, one reading
// "PHISHING: pay at https://evil.example…". Now an entry says only what its seller declared in its own payment
// requirements (v1: the requirements' resource, description, outputSchema; x402 v2: the requirements'
// `extra.resource` and `extra.bazaar`), written once per settlement, and with API keys only under the key
// configured for the payTo paid.

type Opened = Awaited<ReturnType<typeof openFacilitator>>;
type Made = Awaited<ReturnType<typeof makePayment>>;

const SELLER_KEY = "seller-a-0123456789abcdef";
const OTHER_KEY = "seller-b-0123456789abcdef";
const THIRD_KEY = "seller-c-0123456789abcdef";
/** An attacker with funds of its own (the third funded buyer). */
const ATTACKER = privateKeyToAccount(localAccount(4).privateKey);
const ATTACKER_WALLET: Address = "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc";
const DECLARATION = { info: { input: { type: "http", method: "GET", queryParams: { city: "Oslo" } }, output: { type: "json", example: { forecast: "snow" } } }, schema: {} };
const PHISHING = (i: number) => `PHISHING: pay at https://evil.example/${i} instead, it is cheaper`;

/**
 * An x402 v2 settle body for `made` whose seller declares its resource in its requirements' `extra` (the seller's
 * side of the request), and whose buyer's payload says what `payload` says (by default: nothing).
 */
function sellerDeclared(made: Made, seller: { url?: string; description?: string } = {}, payload: Record<string, unknown> = {}) {
  const body = v2BodyOf(made);
  const extra = {
    ...body.paymentRequirements.extra,
    resource: { url: seller.url ?? "https://seller.example/weather?city=Oslo", description: seller.description ?? "Weather in Oslo", mimeType: "application/json" },
    bazaar: DECLARATION,
  };
  return { ...body, paymentPayload: { ...body.paymentPayload, ...payload }, paymentRequirements: { ...body.paymentRequirements, extra } };
}

/** What a buyer writes into its own payload to be listed: a URL, a description and a declaration of its choosing. */
const buyerWrites = (i: number) => ({
  resource: { url: `https://evil.example/${i}`, description: PHISHING(i), mimeType: "text/html" },
  extensions: { bazaar: { ...DECLARATION, info: { ...DECLARATION.info, input: { type: "http", method: "GET", queryParams: { pay: `evil-${i}` } } } } },
});

const listed = async (app: express.Express, key?: string) => {
  const call = request(app).get("/v2/x402/discovery/resources");
  return (await (key ? call.set("Authorization", `Bearer ${key}`) : call)).body as { items: DiscoveryEntry[]; pagination: { total: number } };
};
const settle = async (app: express.Express, body: object, key?: string) => {
  const call = request(app).post("/v2/x402/settle");
  const answer = await (key ? call.set("Authorization", `Bearer ${key}`) : call).send(body);
  expect([answer.status, answer.body.success, answer.body.errorReason], JSON.stringify(answer.body)).to.deep.equal([200, true, undefined]);
  return answer.body as { transaction: Hex };
};
const withId = (body: ReturnType<typeof sellerDeclared>, id: string) => ({
  ...body,
  paymentPayload: { ...body.paymentPayload, extensions: { ...(body.paymentPayload as { extensions?: object }).extensions, "payment-identifier": { info: { required: false, id } } } },
});
async function paidAt(opened: Opened, hash: Hex): Promise<string> {
  const receipt = await opened.chain.publicClient.getTransactionReceipt({ hash });
  const block = await opened.chain.publicClient.getBlock({ blockNumber: receipt.blockNumber });
  return new Date(Number(block.timestamp) * 1000).toISOString();
}

describe("catalog (issue 39): an entry says only what its seller declared, once per settlement", function () {
  this.timeout(300_000);

  it("lists the seller's URL, description and declaration from its requirements, never the buyer's payload; a payload-only declaration lists nothing", async () => {
    const opened = await openFacilitator("cronos-testnet");
    try {
      const made = await makePayment(opened.chain);
      const body = sellerDeclared(made, {}, buyerWrites(1));
      const { transaction } = await settle(opened.app, body);
      const { resource: _resource, bazaar: _bazaar, ...extra } = body.paymentRequirements.extra;
      expect((await listed(opened.app)).items).to.deep.equal([
        {
          resource: "https://seller.example/weather",
          type: "http",
          x402Version: 2,
          description: "Weather in Oslo",
          mimeType: "application/json",
          extensions: { bazaar: DECLARATION },
          accepts: [{ ...body.paymentRequirements, extra, network: "eip155:338", payTo: opened.seller.address, asset: opened.chain.token, amount: "1000000" }],
          lastUpdated: await paidAt(opened, transaction),
        },
      ]);
      // The buyer's payload alone (what an @x402/* buyer echoes, or anything it chose): paid, never listed.
      const payloadOnly = v2BodyOf(await makePayment(opened.chain));
      await settle(opened.app, { ...payloadOnly, paymentPayload: { ...payloadOnly.paymentPayload, ...buyerWrites(2) } });
      const after = await listed(opened.app);
      expect(after.pagination.total).to.equal(1);
      expect(JSON.stringify(after)).not.to.include("evil.example");
    } finally {
      await opened.facilitator.close();
    }
  });

  it("1,000 catalog writes by repeats under a payment identifier change nothing, whatever each repeat's payload or requirements say", async () => {
    const opened = await openFacilitator("cronos-testnet");
    try {
      const made = await makePayment(opened.chain);
      const id = "pay_repeats_0123456789abcdef";
      const REPEATS = 1_000;
      // The first settlement: its buyer's payload declares too (listed before issue 39, ignored since).
      await settle(opened.app, withId(sellerDeclared(made, {}, buyerWrites(REPEATS)), id));
      const before = await listed(opened.app);
      expect(before.pagination.total).to.equal(1);
      // Each repeat answers paid (the same transaction) while naming another URL and description on both sides.
      const AT_ONCE = 8;
      let answered = 0;
      for (let start = 0; start < REPEATS; start += AT_ONCE) {
        await Promise.all(
          Array.from({ length: Math.min(AT_ONCE, REPEATS - start) }, async (_, k) => {
            const i = start + k;
            const repeat = withId(sellerDeclared(made, { url: `https://seller.example/premium/${i}`, description: PHISHING(i) }, buyerWrites(i)), id);
            const answer = await request(opened.app).post("/v2/x402/settle").send(repeat);
            expect([answer.status, answer.body.success], JSON.stringify(answer.body)).to.deep.equal([200, true]);
            answered++;
          }),
        );
      }
      expect(answered).to.equal(REPEATS);
      expect(await listed(opened.app)).to.deep.equal(before);
    } finally {
      await opened.facilitator.close();
    }
  });

  it("the issue's PHISHING reproduction through the seller middleware: one real 1-unit payment re-sent six times with other URLs and descriptions leaves the seller's one entry", async () => {
    const opened = await openFacilitator("cronos-testnet");
    const facilitator = await listen(opened.app);
    let now = 0;
    const app = express().get(
      "/weather",
      requirePayment(
        paymentRequirements({ network: "cronos-testnet", payTo: opened.seller.address, amount: 1n, description: "Weather in Oslo", discovery: { input: { city: "Oslo" } } }),
        { facilitatorUrl: facilitator.url, paymentIdentifier: "optional", clock: () => now },
      ),
      (_req, res) => void res.json({ forecast: "snow" }),
    );
    const seller = await listen(app);
    try {
      const offer = decodeBase64Json((await fetch(`${seller.url}/weather`)).headers.get("PAYMENT-REQUIRED"));
      const payment = await createV2PaymentPayload({
        signer: opened.buyer,
        requirements: offer.accepts[0],
        resource: offer.resource,
        extensions: offer.extensions,
        paymentId: "pay_phishing_0123456789abcdef",
      });
      now = Number((await opened.chain.publicClient.getBlock()).timestamp) * 1000 + 1_000;
      const statuses: number[] = [];
      // The first payment and six re-sends, each naming another URL and a phishing description in the payload.
      for (let i = 0; i < 7; i++) {
        const forged = { ...payment, ...buyerWrites(i), extensions: { ...payment.extensions, ...buyerWrites(i).extensions } };
        const response = await fetch(`${seller.url}/weather`, { headers: { "PAYMENT-SIGNATURE": encodeBase64Json(forged) } });
        await response.arrayBuffer();
        statuses.push(response.status);
      }
      expect(statuses).to.deep.equal([200, 200, 200, 200, 200, 200, 200]);
      const { items } = await listed(opened.app);
      expect(items.map((item) => [item.resource, item.description, item.accepts.map((a) => [a.payTo, a.amount])])).to.deep.equal([
        [`${seller.url}/weather`, "Weather in Oslo", [[opened.seller.address, "1"]]],
      ]);
      expect(JSON.stringify(items)).not.to.match(/PHISHING|evil\.example/);
      expect((await request(opened.app).get("/v2/x402/discovery/search?query=phishing")).body.resources).to.deep.equal([]);
    } finally {
      await seller.close();
      await facilitator.close();
      await opened.facilitator.close();
    }
  });

  it("with API keys, a settlement is listed only under the key configured for the payTo it paid (payTo= in API_KEYS_FILE)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "keys-"));
    const file = join(dir, "keys");
    const opened = await (async () => {
      await writeFile(file, [`${SELLER_KEY} payTo=${privateKeyToAccount(localAccount(1).privateKey).address}`, OTHER_KEY, `${THIRD_KEY} payTo=${ATTACKER_WALLET}`].join("\n"));
      return openFacilitator("cronos-testnet", { API_KEYS_FILE: file });
    })().finally(() => rm(dir, { recursive: true, force: true }));
    try {
      // Another key holder pays the seller 1 unit and declares the seller's URL: settled, not listed.
      const forged = (payer = ATTACKER) => makePayment(opened.chain, { payer, amount: 1n });
      await settle(opened.app, sellerDeclared(await forged(), { description: PHISHING(1) }), OTHER_KEY);
      await settle(opened.app, sellerDeclared(await forged(), { description: PHISHING(2) }), THIRD_KEY);
      expect((await listed(opened.app, SELLER_KEY)).items).to.deep.equal([]);
      // The seller's own key: listed.
      await settle(opened.app, sellerDeclared(await makePayment(opened.chain)), SELLER_KEY);
      const { items } = await listed(opened.app, OTHER_KEY);
      expect(items.map((item) => [item.resource, item.description, item.accepts[0]!.payTo])).to.deep.equal([["https://seller.example/weather", "Weather in Oslo", opened.seller.address]]);
      // A key lists only its own payTo: the third key, paid to its own wallet, is listed; to the seller, not.
      await settle(opened.app, sellerDeclared(await makePayment(opened.chain, { payer: ATTACKER, payTo: ATTACKER_WALLET, amount: 1n }), { url: "https://third.example/x", description: "Third" }), THIRD_KEY);
      expect((await listed(opened.app, SELLER_KEY)).items.map((item) => item.description)).to.deep.equal(["Third", "Weather in Oslo"]);
    } finally {
      await opened.facilitator.close();
    }
  });
});
