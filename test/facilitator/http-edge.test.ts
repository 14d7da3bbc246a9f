import { createHash } from "node:crypto";
import { expect } from "chai";
import { MemoryStore } from "express-rate-limit";
import request from "supertest";
import { privateKeyToAccount } from "viem/accounts";
import type { OutcomeRecord } from "../../src/facilitator/http/app.js";
import { HARDHAT_KEYS, makePayment, openFacilitator } from "../helpers/facilitator.js";
import { withoutTimestamp } from "../helpers/time.js";

type Opened = Awaited<ReturnType<typeof openFacilitator>>;

const SELLER_KEY = "seller-a-0123456789abcdef";
const OTHER_SELLER_KEY = "seller-b-0123456789abcdef";
const idOf = (key: string) => createHash("sha256").update(key).digest("hex").slice(0, 12);

describe("facilitator HTTP edge: content type", () => {
  let opened: Opened;
  const records: OutcomeRecord[] = [];
  before(async () => {
    opened = await openFacilitator("cronos-testnet", {}, { onOutcome: (r) => records.push(r) });
  });

  for (const route of ["verify", "settle"] as const) {
    for (const type of ["text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx"]) {
      it(`answers ${route} 415 JSON for a ${type} body, before reading it`, async () => {
        const { body } = await makePayment(opened.chain);
        records.length = 0;
        const response = await request(opened.app).post(`/v2/x402/${route}`).set("Content-Type", type).send(JSON.stringify(body));
        expect(response.status).to.equal(415);
        expect(response.headers["content-type"]).to.equal("application/json; charset=utf-8");
        expect(response.body).to.deep.equal({ error: "Unsupported Media Type: the body must be application/json" });
        expect(records.map(({ durationMs: _d, requestId: _r, ...rest }) => rest)).to.deep.equal([
          { route, dialect: "unknown", status: 415, network: "unknown", outcome: "Unsupported Media Type: the body must be application/json", code: "unsupported_media_type", edge: true },
        ]);
      });
    }

    it(`answers ${route} 415 JSON for a body without any Content-Type`, async () => {
      const response = await request(opened.app).post(`/v2/x402/${route}`).set("Content-Length", "2").send(Buffer.from("{}"));
      expect(response.status).to.equal(415);
      expect(response.body).to.deep.equal({ error: "Unsupported Media Type: the body must be application/json" });
    });

    it(`reads ${route} bodies of application/json with any letter case and charset parameter`, async () => {
      for (const type of ["application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"]) {
        const { body } = await makePayment(opened.chain);
        const response = await request(opened.app).post(`/v2/x402/${route}`).set("Content-Type", type).send(JSON.stringify(body));
        expect(response.status, type).to.equal(200);
      }
    });

    it(`answers ${route} 415 JSON for application/json in a charset other than UTF-8`, async () => {
      const { body } = await makePayment(opened.chain);
      const response = await request(opened.app).post(`/v2/x402/${route}`).set("Content-Type", "application/json; charset=latin1").send(JSON.stringify(body));
      expect(response.status).to.equal(415);
      expect(response.body).to.deep.equal({ error: "Unsupported Media Type: the body must be UTF-8 JSON" });
    });

    it(`answers a ${route} POST without a body 400 in the endpoint's own shape`, async () => {
      const response = await request(opened.app).post(`/v2/x402/${route}`);
      expect(response.status).to.equal(400);
      const expected = route === "verify"
        ? { isValid: false, invalidReason: "Invalid request: body must be a JSON object" }
        : { x402Version: 1, event: "payment.failed", network: "unknown", error: "Invalid request: body must be a JSON object" };
      expect(route === "verify" ? response.body : withoutTimestamp(response.body)).to.deep.equal(expected);
    });
  }

  it("settles nothing for a text/plain settle: the same payment then settles once, as application/json", async () => {
    const payment = await makePayment(opened.chain);
    const plain = await request(opened.app).post("/v2/x402/settle").set("Content-Type", "text/plain").send(JSON.stringify(payment.body));
    expect(plain.status).to.equal(415);
    expect(await opened.chain.contract.read.authorizationState([payment.payer.address, payment.message.nonce])).to.equal(false);
    const json = await request(opened.app).post("/v2/x402/settle").send(payment.body);
    expect(json.body.event).to.equal("payment.settled");
  });

  it("logs a line for a 413 and for a body that is not JSON", async () => {
    records.length = 0;
    const { body } = await makePayment(opened.chain);
    await request(opened.app).post("/v2/x402/verify").send({ ...body, padding: "x".repeat(70 * 1024) });
    await request(opened.app).post("/v2/x402/settle").set("Content-Type", "application/json").send("{not json");
    expect(records.map(({ durationMs: _d, requestId: _r, ...rest }) => rest)).to.deep.equal([
      { route: "verify", dialect: "unknown", status: 413, network: "unknown", outcome: "Payload too large: the limit is 65536 bytes", code: "payload_too_large", edge: true },
      { route: "settle", dialect: "unknown", status: 400, network: "unknown", outcome: "Invalid request: body is not valid JSON", code: "invalid_request", edge: true },
    ]);
  });
});

describe("facilitator HTTP edge: seller API keys", () => {
  let opened: Opened;
  const records: OutcomeRecord[] = [];
  before(async () => {
    opened = await openFacilitator(
      "cronos-testnet",
      { API_KEYS: `${SELLER_KEY},${OTHER_SELLER_KEY}`, RATE_LIMIT_KEY_VERIFY_PER_MINUTE: "3", RATE_LIMIT_KEY_SETTLE_PER_MINUTE: "0", RATE_LIMIT_VERIFY_PER_MINUTE: "1" },
      { onOutcome: (r) => records.push(r) },
    );
  });

  for (const route of ["verify", "settle"] as const) {
    it(`answers ${route} 401 JSON with a Bearer challenge when the key is missing, and reads nothing`, async () => {
      records.length = 0;
      const response = await request(opened.app).post(`/v2/x402/${route}`).set("Content-Type", "text/plain").send("not even JSON");
      expect(response.status).to.equal(401);
      expect(response.headers["www-authenticate"]).to.equal('Bearer realm="x402-facilitator"');
      expect(response.body).to.deep.equal({ error: "Unauthorized: an API key is required (Authorization: Bearer <key>)" });
      expect(records.map((r) => [r.status, r.code])).to.deep.equal([[401, "unauthorized"]]);
    });

    it(`answers ${route} 401 JSON for an unknown key or another scheme, never echoing what was sent`, async () => {
      const { body } = await makePayment(opened.chain);
      for (const authorization of [`Bearer ${SELLER_KEY}x`, `Basic ${SELLER_KEY}`, "Bearer", `Bearer ${SELLER_KEY} ${SELLER_KEY}`]) {
        const response = await request(opened.app).post(`/v2/x402/${route}`).set("Authorization", authorization).send(body);
        expect(response.status, authorization).to.equal(401);
        expect(response.headers["www-authenticate"]).to.equal('Bearer realm="x402-facilitator", error="invalid_token"');
        expect(response.body).to.deep.equal({ error: "Unauthorized: unknown API key" });
        expect(response.text).not.to.include("seller-a");
      }
    });
  }

  it("answers a known key as before, and keeps supported and healthcheck open", async () => {
    const { body } = await makePayment(opened.chain);
    const verify = await request(opened.app).post("/v2/x402/verify").set("Authorization", `Bearer ${OTHER_SELLER_KEY}`).send(body);
    expect(verify.status).to.equal(200);
    expect(verify.body).to.deep.equal({ isValid: true, invalidReason: null });
    const settle = await request(opened.app).post("/v2/x402/settle").set("Authorization", `bearer ${OTHER_SELLER_KEY}`).send(body);
    expect(settle.body.event).to.equal("payment.settled");
    expect((await request(opened.app).get("/v2/x402/supported")).status).to.equal(200);
    expect((await request(opened.app).get("/healthcheck")).status).to.equal(200);
  });

  it("gives each key its own quota instead of the client IP's", async () => {
    const { body } = await makePayment(opened.chain);
    const verify = (key: string) => request(opened.app).post("/v2/x402/verify").set("Authorization", `Bearer ${key}`).send(body);
    // RATE_LIMIT_VERIFY_PER_MINUTE is 1 per IP, yet each key gets RATE_LIMIT_KEY_VERIFY_PER_MINUTE (3) from this one IP.
    const first = await verify(SELLER_KEY);
    expect(first.headers["ratelimit-policy"]).to.match(/^"verify"; q=3; w=60; pk=:[A-Za-z0-9+/=]+:$/);
    expect([first.status, (await verify(SELLER_KEY)).status, (await verify(SELLER_KEY)).status]).to.deep.equal([200, 200, 200]);
    const limited = await verify(SELLER_KEY);
    expect(limited.status).to.equal(429);
    expect(limited.body).to.deep.equal({ error: "Too many requests", retryAfter: limited.body.retryAfter });
    // The other seller's key still has its quota (it used one verify in the previous test).
    expect((await verify(OTHER_SELLER_KEY)).status).to.equal(200);
  });
});

describe("facilitator HTTP edge: per-key limits from the key file, per-payer settle limit, shared stores", () => {
  it("applies a key's own verify= and settle= limits from API_KEYS_FILE", async () => {
    const { writeFile, mkdtemp, rm } = await import("node:fs/promises");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const dir = await mkdtemp(join(tmpdir(), "x402-keys-"));
    const file = join(dir, "keys");
    await writeFile(file, `# sellers\n${SELLER_KEY} verify=2 settle=1\n\n${OTHER_SELLER_KEY}\n`);
    // The facilitator reads the file when it opens: the folder can go now, whatever the test's outcome.
    const opened = await openFacilitator("cronos-testnet", { API_KEYS_FILE: file, RATE_LIMIT_KEY_VERIFY_PER_MINUTE: "4", RATE_LIMIT_KEY_SETTLE_PER_MINUTE: "4" }).finally(() =>
      rm(dir, { recursive: true, force: true }),
    );
    const { body } = await makePayment(opened.chain);
    const post = (route: string, key: string) => request(opened.app).post(`/v2/x402/${route}`).set("Authorization", `Bearer ${key}`).send(body);
    const statuses = async (route: string, key: string, n: number) => {
      const out: number[] = [];
      for (let i = 0; i < n; i++) out.push((await post(route, key)).status);
      return out;
    };
    expect(await statuses("verify", SELLER_KEY, 3)).to.deep.equal([200, 200, 429]);
    expect(await statuses("settle", SELLER_KEY, 2)).to.deep.equal([200, 429]);
    expect(await statuses("verify", OTHER_SELLER_KEY, 5)).to.deep.equal([200, 200, 200, 200, 429]);
  });

  it("refuses the 3rd settle a minute from one payer with RATE_LIMIT_PAYER_SETTLE_PER_MINUTE=2, whoever sends it", async () => {
    const opened = await openFacilitator("cronos-testnet", { API_KEYS: `${SELLER_KEY},${OTHER_SELLER_KEY}`, RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "2" });
    const settle = async (key: string, payer = opened.buyer) => {
      const { body } = await makePayment(opened.chain, { payer });
      return request(opened.app).post("/v2/x402/settle").set("Authorization", `Bearer ${key}`).send(body);
    };
    const first = await settle(SELLER_KEY);
    expect(first.body.event).to.equal("payment.settled");
    expect((await settle(OTHER_SELLER_KEY)).body.event).to.equal("payment.settled");
    const balance = await opened.chain.contract.read.balanceOf([opened.buyer.address]);
    const limited = await settle(SELLER_KEY);
    expect(limited.status).to.equal(429);
    expect(limited.body).to.deep.equal({ error: "Too many requests", retryAfter: limited.body.retryAfter });
    expect(limited.body.retryAfter).to.be.within(1, 60);
    expect(limited.headers["retry-after"]).to.equal(String(limited.body.retryAfter));
    // Nothing was sent for it.
    expect(await opened.chain.contract.read.balanceOf([opened.buyer.address])).to.equal(balance);
    // Another payer is counted apart.
    const other = await settle(SELLER_KEY, privateKeyToAccount(HARDHAT_KEYS.buyer2));
    expect(other.body.event).to.equal("payment.settled");
    // verify has no per-payer limit.
    const { body } = await makePayment(opened.chain);
    expect((await request(opened.app).post("/v2/x402/verify").set("Authorization", `Bearer ${SELLER_KEY}`).send(body)).status).to.equal(200);
  });

  it("counts every limiter (verify, settle, settlePayer) in the stores it is given; the payer's once per authorization", async () => {
    const stores = { verify: new MemoryStore(), settle: new MemoryStore(), settlePayer: new MemoryStore() };
    const opened = await openFacilitator(
      "cronos-testnet",
      { API_KEYS: SELLER_KEY, RATE_LIMIT_KEY_VERIFY_PER_MINUTE: "5", RATE_LIMIT_KEY_SETTLE_PER_MINUTE: "5", RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "5" },
      { rateLimitStores: stores },
    );
    const { body } = await makePayment(opened.chain);
    await request(opened.app).post("/v2/x402/verify").set("Authorization", `Bearer ${SELLER_KEY}`).send(body);
    const answers = await Promise.all([1, 2].map(() => request(opened.app).post("/v2/x402/settle").set("Authorization", `Bearer ${SELLER_KEY}`).send(body)));
    // One settled it; the copy sent alongside answered from the same authorization's outcome.
    expect(answers.map((a) => a.body.event).sort()).to.deep.equal(["payment.failed", "payment.settled"]);
    expect((await stores.verify.get(`key:${idOf(SELLER_KEY)}`))?.totalHits).to.equal(1);
    expect((await stores.settle.get(`key:${idOf(SELLER_KEY)}`))?.totalHits).to.equal(2);
    expect((await stores.settlePayer.get(`payer:${opened.buyer.address.toLowerCase()}`))?.totalHits).to.equal(1);
  });

});
