import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect } from "chai";
import express from "express";
import request from "supertest";
import { discoveryRoutes } from "../../src/facilitator/discovery.js";
import { openLedger } from "../../src/ledger/open.js";
import { makePayment, openFacilitator, v2BodyOf } from "../helpers/facilitator.js";
import { ROOT } from "../helpers/processes.js";

const run = promisify(execFile);
const SELLER_KEY = "seller-a-0123456789abcdef";

/** A v2 verify/settle body for `made`, declaring its resource for discovery as `@x402/extensions` does. */
function declared(made: Awaited<ReturnType<typeof makePayment>>, url = "https://seller.example/weather?city=Oslo") {
  const body = v2BodyOf(made);
  const bazaar = { info: { input: { type: "http", method: "GET", queryParams: { city: "Oslo" } }, output: { type: "json", example: { forecast: "snow" } } }, schema: {} };
  return { ...body, paymentPayload: { ...body.paymentPayload, resource: { url, description: "Weather in Oslo", mimeType: "application/json" }, extensions: { bazaar } } };
}

describe("discovery catalog (x402 bazaar): only paid resources, behind the keys", () => {
  it("a refused verify's declaration is not cataloged; a valid verify's is, under its origin and path", async () => {
    const opened = await openFacilitator("cronos-testnet");
    const expired = declared(await makePayment(opened.chain, { validBefore: 1n }));
    const refused = await request(opened.app).post("/v2/x402/verify").send(expired);
    expect(refused.body.isValid).to.equal(false);
    expect((await request(opened.app).get("/v2/x402/discovery/resources")).body.items).to.deep.equal([]);

    const good = declared(await makePayment(opened.chain));
    expect((await request(opened.app).post("/v2/x402/verify").send(good)).body.isValid).to.equal(true);
    const listed = await request(opened.app).get("/v2/x402/discovery/resources");
    expect(listed.body.items.map((item: { resource: string; description: string; accepts: unknown[] }) => [item.resource, item.description, item.accepts])).to.deep.equal([
      ["https://seller.example/weather", "Weather in Oslo", [good.paymentRequirements]],
    ]);
    // A declaration that is not one (no input type) is paid as usual and not listed.
    const odd = declared(await makePayment(opened.chain), "https://other.example/x");
    (odd.paymentPayload.extensions.bazaar.info.input as Record<string, unknown>).type = "ftp";
    expect((await request(opened.app).post("/v2/x402/verify").send(odd)).body.isValid).to.equal(true);
    expect((await request(opened.app).get("/v2/x402/discovery/resources")).body.pagination.total).to.equal(1);
  });

  it("a verify alone cannot point a cataloged resource at another payTo: a self-payment verified under the seller's URL leaves its entry as it was", async () => {
    const opened = await openFacilitator("cronos-testnet");
    const genuine = declared(await makePayment(opened.chain));
    expect((await request(opened.app).post("/v2/x402/settle").send(genuine)).body.success).to.equal(true);
    const before = (await request(opened.app).get("/v2/x402/discovery/resources")).body;
    expect(before.items.map((item: { accepts: Array<{ payTo: string }> }) => item.accepts.map((a) => a.payTo))).to.deep.equal([[opened.seller.address]]);
    // The payer verifies a payment to itself (nothing moves) naming the seller's URL, with its own description.
    const poison = declared(await makePayment(opened.chain, { payTo: opened.buyer.address }));
    poison.paymentPayload.resource.description = "Pay here instead";
    expect((await request(opened.app).post("/v2/x402/verify").send(poison)).body.isValid).to.equal(true);
    expect((await request(opened.app).get("/v2/x402/discovery/resources")).body).to.deep.equal(before);
  });

  it("with API keys configured, listing and searching need a key (401 without), as the status lookups do", async () => {
    const opened = await openFacilitator("cronos-testnet", { API_KEYS: SELLER_KEY });
    for (const path of ["/v2/x402/discovery/resources", "/v2/x402/discovery/search?query=weather"]) {
      const anonymous = await request(opened.app).get(path);
      expect([anonymous.status, anonymous.body], path).to.deep.equal([401, { error: "Unauthorized: an API key is required (Authorization: Bearer <key>)" }]);
      expect((await request(opened.app).get(path).set("Authorization", `Bearer ${SELLER_KEY}`)).status, path).to.equal(200);
    }
  });

  it("limits listing and searching per client with the status lookups' quota (429), and labels them in metrics by route", async () => {
    const opened = await openFacilitator("cronos-testnet", { RATE_LIMIT_VERIFY_PER_MINUTE: "2" });
    const statuses = [];
    for (const path of ["/v2/x402/discovery/resources", "/v2/x402/discovery/search?query=weather", "/v2/x402/discovery/resources"]) {
      statuses.push((await request(opened.app).get(path)).status);
    }
    expect(statuses).to.deep.equal([200, 200, 429]);
    const limited = await request(opened.app).get("/v2/x402/discovery/search?query=weather");
    expect([limited.status, limited.body.error]).to.deep.equal([429, "Too many requests"]);
    const text = await opened.facilitator.metrics.registry.metrics();
    expect(text).to.include('x402_http_requests_total{route="/v2/x402/discovery/resources",status="200"} 1');
    expect(text).to.include('x402_http_requests_total{route="/v2/x402/discovery/resources",status="429"} 1');
    expect(text).to.include('x402_http_requests_total{route="/v2/x402/discovery/search",status="200"} 1');
    expect(text).to.include('x402_http_requests_total{route="/v2/x402/discovery/search",status="429"} 1');
  });

  it("search matches the declaration's values, never its JSON keys or the fields every entry has; a limit over 100 asks for 100", async () => {
    const opened = await openFacilitator("cronos-testnet");
    expect((await request(opened.app).post("/v2/x402/settle").send(declared(await makePayment(opened.chain)))).body.success).to.equal(true);
    const found = async (query: string) => (await request(opened.app).get(`/v2/x402/discovery/search?query=${encodeURIComponent(query)}`)).body.resources.length;
    // Values: the description, the URL's host and path, an example input and output.
    for (const query of ["weather", "Oslo", "seller", "snow"]) expect(await found(query), query).to.equal(1);
    // Keys and what every declaration says: no match.
    for (const query of ["type", "input", "http", "https", "json", "get", "queryParams", "city", "output", "forecast", "info", "schema"]) {
      expect(await found(query), query).to.equal(0);
    }
    const many = await request(opened.app).get("/v2/x402/discovery/search?query=weather&limit=500");
    expect([many.status, many.body.pagination, many.body.partialResults]).to.deep.equal([200, { limit: 100, cursor: null }, undefined]);
    expect((await request(opened.app).get("/v2/x402/discovery/search?query=weather&limit=ten")).status).to.equal(400);
  });

  it("search says partialResults when the catalog held more entries than it looked at", async () => {
    const entry = { resource: "https://s.example/weather", type: "http", x402Version: 2, accepts: [], lastUpdated: "2026-11-24T10:00:00.000Z", description: "weather" };
    for (const truncated of [true, false]) {
      const app = express().use(discoveryRoutes({ ledger: { discoveryResources: async () => ({ entries: [entry], truncated }) }, guards: [] }));
      const answer = await request(app).get("/v2/x402/discovery/search?query=weather");
      expect(answer.body, String(truncated)).to.deep.equal({
        x402Version: 2,
        resources: [entry],
        ...(truncated ? { partialResults: true } : {}),
        pagination: { limit: 20, cursor: null },
      });
    }
  });

  it("cronos-x402 catalog lists the catalog of the ledger named by LEDGER_FILE and removes an entry (exit 1 when it is not there)", async function () {
    this.timeout(60_000);
    const dir = await mkdtemp(join(tmpdir(), "x402-catalog-"));
    const file = join(dir, "ledger.db");
    try {
      const ledger = await openLedger({ file });
      const entry = (resource: string, at: string) => ({ resource, type: "http", x402Version: 2, accepts: [{ scheme: "exact", network: "eip155:338", payTo: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" }], lastUpdated: at, description: "d" });
      await ledger.upsertDiscoveryResource(entry("https://a.example/one", "2026-11-24T10:00:00.000Z"), { settled: true });
      await ledger.upsertDiscoveryResource(entry("https://a.example/two", "2026-11-24T11:00:00.000Z"), { settled: true });
      await ledger.close();
      const cli = (...args: string[]) =>
        run(process.execPath, ["--import", "tsx", "src/cli/bin.ts", "catalog", ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? "", LEDGER_FILE: file } }).then(
          ({ stdout }) => ({ code: 0, stdout }),
          (error: { code?: number; stdout?: string }) => ({ code: error.code, stdout: error.stdout ?? "" }),
        );
      expect(await cli("list")).to.deep.equal({ code: 0, stdout: "https://a.example/two\thttp\t2026-11-24T11:00:00.000Z\td\nhttps://a.example/one\thttp\t2026-11-24T10:00:00.000Z\td\n" });
      expect(await cli("remove", "https://a.example/two")).to.deep.equal({ code: 0, stdout: "removed https://a.example/two\n" });
      expect(await cli("remove", "https://a.example/two")).to.deep.equal({ code: 1, stdout: "not in the catalog: https://a.example/two\n" });
      expect(await cli("list")).to.deep.equal({ code: 0, stdout: "https://a.example/one\thttp\t2026-11-24T10:00:00.000Z\td\n" });
      expect((await cli("remove")).code).to.equal(2);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
