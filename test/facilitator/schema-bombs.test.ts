import { expect } from "chai";
import express from "express";
import request from "supertest";
import { paymentIdentifierOf } from "../../src/protocol/x402v2.js";
import { isValidBazaarDeclaration } from "../../src/protocol/bazaar.js";
import { paymentRequirements, requirePayment } from "../../src/seller/index.js";
import { makePayment, openFacilitator, v2BodyOf } from "../helpers/facilitator.js";
import { decodeBase64Json, listen } from "../helpers/http.js";
import { deepSchemaText, doublingSchema, hugeEnumSchema, REGEX_BOMB, REGEX_BOMB_ID } from "../helpers/schema-bombs.js";

// Issue 39, finding 1: a JSON Schema written by the payer (the payment-identifier extension's `schema`) was
// compiled and run by ajv before the signature check: a schema doubling its work per level froze the
// process for hours. Nothing a buyer writes is compiled or run now: the identifier's `info` has a fixed
// shape, and a catalog declaration is checked by fixed code within size and depth bounds.
//
// Speed belongs to bench/ (`npm run bench:schema-bombs` prints each entrance's time against 50 ms). Here
// every answer must arrive at all: 60 levels are 2^60 checks of the last one for anything that runs the
// schema, work that never ends (the test's time-out fails it). Where the schema can be handed over as an
// object, the reads of it are counted: they grow with its size, never with the paths through it.

const ID = "pay_schema_bomb_0123456789";
const LEVELS = [30, 60] as const;

/** A payment-identifier extension carrying `schema` (parsed from text when given as a string). */
const identifierWith = (schema: unknown, id = ID) => ({ "payment-identifier": { info: { required: false, id }, schema } });

/** `value` behind proxies that count every property read, at every depth. */
function counted<T>(value: T, reads: { count: number }): T {
  if (value === null || typeof value !== "object") return value;
  return new Proxy(value, {
    get(target, key, receiver) {
      reads.count++;
      return counted(Reflect.get(target, key, receiver) as unknown, reads);
    },
  });
}

describe("schema bombs (issue 39): no payer-written schema is compiled or run, at any entrance", function () {
  this.timeout(120_000);

  it("paymentIdentifierOf never reads the extension's schema: a schema that throws on every read is not touched", () => {
    let reads = 0;
    const trap = new Proxy(
      {},
      {
        get: () => {
          reads++;
          throw new Error("the schema was read");
        },
        ownKeys: () => {
          reads++;
          throw new Error("the schema was walked");
        },
      },
    );
    expect(paymentIdentifierOf(identifierWith(trap))).to.deep.equal({ id: ID });
    expect(reads).to.equal(0);
  });

  it("the identifier's fixed shape decides, whatever the schema says: doubling, deep, huge enum, regex bomb, one refusing the id, one that does not compile", () => {
    for (const [name, schema] of [
      ["doubling, 60 levels", doublingSchema(60)],
      ["5,000 levels deep", JSON.parse(deepSchemaText(5_000))],
      ["an enum of 2,000", hugeEnumSchema(2_000)],
      ["a regex bomb", REGEX_BOMB],
      ["a schema refusing every id", { properties: { id: { not: {} } } }],
      ["not a schema", "not a schema"],
    ] as const) {
      const id = name === "a regex bomb" ? REGEX_BOMB_ID : ID;
      expect(paymentIdentifierOf(identifierWith(schema, id)), name).to.deep.equal({ id });
    }
    // The shape itself is still the rule.
    expect(paymentIdentifierOf(identifierWith(doublingSchema(60), "short"))).to.deep.equal({
      error: 'paymentPayload.extensions["payment-identifier"].info.id must be 16 to 128 characters of A-Z a-z 0-9 _ -',
    });
  });

  it("a bazaar declaration is checked by fixed code: a doubling schema is data, never run; one nested past the bound is refused", () => {
    const info = { input: { type: "http", method: "GET", queryParams: { city: "Oslo" } } };
    const reads: Record<number, number> = {};
    for (const levels of LEVELS) {
      const counter = { count: 0 };
      expect(isValidBazaarDeclaration({ info, schema: counted(doublingSchema(levels), counter) }), `${levels} levels`).to.equal(true);
      reads[levels] = counter.count;
    }
    // Twice the levels, about twice the nodes: at most twice the reads (plus the fixed part); running the
    // schema would read the last level 2^30 times more.
    expect(reads[30], "reads of the 30-level schema").to.be.above(0);
    expect(reads[60], `reads of the 60-level schema against ${reads[30]} for 30`).to.be.at.most(2 * reads[30]! + 50);
    expect(isValidBazaarDeclaration({ info, schema: REGEX_BOMB })).to.equal(true);
    expect(isValidBazaarDeclaration({ info, schema: JSON.parse(deepSchemaText(5_000)) })).to.equal(false);
  });

  it("verify and settle (x402 v2) answer a payment carrying each bomb as they answer it without: valid, then paid", async () => {
    const opened = await openFacilitator("cronos-testnet");
    try {
      const post = (route: "verify" | "settle", body: unknown) => request(opened.app).post(`/v2/x402/${route}`).set("Content-Type", "application/json").send(JSON.stringify(body));
      for (const route of ["verify", "settle"] as const) {
        for (const levels of LEVELS) {
          const body = v2BodyOf(await makePayment(opened.chain));
          const bombed = { ...body, paymentPayload: { ...body.paymentPayload, extensions: identifierWith(doublingSchema(levels), `${ID}_${route}_${levels}`) } };
          const answer = await post(route, bombed);
          expect([answer.status, route === "verify" ? answer.body.isValid : answer.body.success], `${route}, ${levels} levels: ${JSON.stringify(answer.body)}`).to.deep.equal([200, true]);
        }
      }
      // The other bombs, each on a payment of its own: paid as without them.
      for (const [name, schemaText, id] of [
        ["5,000 levels deep", deepSchemaText(5_000), `${ID}_deep`],
        ["an enum of 2,000", JSON.stringify(hugeEnumSchema(2_000)), `${ID}_enum`],
        ["a regex bomb", JSON.stringify(REGEX_BOMB), REGEX_BOMB_ID],
      ] as const) {
        const body = v2BodyOf(await makePayment(opened.chain));
        const text = JSON.stringify({ ...body, paymentPayload: { ...body.paymentPayload, extensions: identifierWith("SCHEMA", id) } }).replace('"SCHEMA"', schemaText);
        const answer = await request(opened.app).post("/v2/x402/settle").set("Content-Type", "application/json").send(text);
        expect([answer.status, answer.body.success], `${name}: ${JSON.stringify(answer.body)}`).to.deep.equal([200, true]);
      }
    } finally {
      await opened.facilitator.close();
    }
  });

  it("the seller middleware serves a PAYMENT-SIGNATURE carrying the doubling schema as it serves one without", async () => {
    const opened = await openFacilitator("cronos-testnet");
    const facilitator = await listen(opened.app);
    // The seller's clock is the chain's (its blocks start at a fixed date): its retry window reads it.
    let now = 0;
    const app = express().get(
      "/paid",
      requirePayment(paymentRequirements({ network: "cronos-testnet", payTo: opened.seller.address, amount: 1_000_000n }), {
        facilitatorUrl: facilitator.url,
        paymentIdentifier: "optional",
        clock: () => now,
      }),
      (_req, res) => void res.json({ served: true }),
    );
    const seller = await listen(app);
    try {
      for (const levels of LEVELS) {
        const { paymentPayload } = v2BodyOf(await makePayment(opened.chain));
        const header = Buffer.from(JSON.stringify({ ...paymentPayload, extensions: identifierWith(doublingSchema(levels), `${ID}_${levels}`) })).toString("base64");
        now = Number((await opened.chain.publicClient.getBlock()).timestamp) * 1000 + 1_000;
        const response = await fetch(`${seller.url}/paid`, { headers: { "PAYMENT-SIGNATURE": header } });
        const answer = (await response.json()) as { served?: boolean; payment?: { to: string; value: string } };
        expect([response.status, answer.served, answer.payment?.to, answer.payment?.value], `${levels} levels`).to.deep.equal([200, true, opened.seller.address, "1000000"]);
        expect(decodeBase64Json(response.headers.get("PAYMENT-RESPONSE")).success).to.equal(true);
      }
    } finally {
      await seller.close();
      await facilitator.close();
      await opened.facilitator.close();
    }
  });

  it("the catalog takes a declaration whose schema is the doubling one as data (never run): settled, listed with the schema as sent", async () => {
    const opened = await openFacilitator("cronos-testnet");
    try {
      for (const levels of LEVELS) {
        const body = v2BodyOf(await makePayment(opened.chain));
        const bazaar = { info: { input: { type: "http", method: "GET", queryParams: { levels: String(levels) } } }, schema: doublingSchema(levels) };
        const extra = { ...body.paymentRequirements.extra, resource: { url: `https://seller.example/bomb/${levels}` }, bazaar };
        const declared = { ...body, paymentRequirements: { ...body.paymentRequirements, extra } };
        const answer = await request(opened.app).post("/v2/x402/settle").send(declared);
        expect([answer.status, answer.body.success], `${levels} levels`).to.deep.equal([200, true]);
      }
      const listed = await request(opened.app).get("/v2/x402/discovery/resources");
      expect(listed.body.items.map((item: { resource: string; extensions: { bazaar: { schema: unknown } } }) => [item.resource, item.extensions.bazaar.schema])).to.deep.equal([
        ["https://seller.example/bomb/60", doublingSchema(60)],
        ["https://seller.example/bomb/30", doublingSchema(30)],
      ]);
    } finally {
      await opened.facilitator.close();
    }
  });
});
