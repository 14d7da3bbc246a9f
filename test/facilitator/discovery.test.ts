import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect } from "chai";
import express from "express";
import request from "supertest";
import { privateKeyToAccount } from "viem/accounts";
import type { Address, Hex } from "viem";
import { discoveryRoutes, MAX_PAGE_BYTES } from "../../src/facilitator/discovery.js";
import { localAccount } from "../../src/harness/accounts.js";
import { openLedger } from "../../src/ledger/open.js";
import { DISCOVERY_CANDIDATES_PER_WORD, type DiscoveryEntry, type DiscoveryPayment, type Ledger } from "../../src/ledger/types.js";
import { HARDHAT_KEYS, makePayment, openFacilitator, recordingLogger, v2BodyOf } from "../helpers/facilitator.js";
import { listen } from "../helpers/http.js";
import { ROOT } from "../helpers/processes.js";
import { waitUntil } from "../helpers/wait.js";

const run = promisify(execFile);
const SELLER_KEY = "seller-a-0123456789abcdef";
/** The third funded buyer, in the attacker's role. */
const ATTACKER = privateKeyToAccount(localAccount(4).privateKey);
/** An address of the attacker's own (it needs no key to be paid). */
const ATTACKER_WALLET: Address = "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc";

type Opened = Awaited<ReturnType<typeof openFacilitator>>;
type Made = Awaited<ReturnType<typeof makePayment>>;

/** A v2 verify/settle body for `made` whose seller declares its resource for discovery in its requirements' `extra`. */
function declared(made: Made, url = "https://seller.example/weather?city=Oslo", description = "Weather in Oslo", info?: Record<string, unknown>) {
  const body = v2BodyOf(made);
  const bazaar = { info: info ?? { input: { type: "http", method: "GET", queryParams: { city: "Oslo" } }, output: { type: "json", example: { forecast: "snow" } } }, schema: {} };
  const extra = { ...body.paymentRequirements.extra, resource: { url, description, mimeType: "application/json" }, bazaar };
  return { ...body, paymentRequirements: { ...body.paymentRequirements, extra } };
}

const listed = async (opened: Opened, query = "") => (await request(opened.app).get(`/v2/x402/discovery/resources${query}`)).body as { items: DiscoveryEntry[]; pagination: { total: number } };
const searched = async (app: express.Express, query: string) => (await request(app).get(`/v2/x402/discovery/search?query=${encodeURIComponent(query)}`)).body as { resources: DiscoveryEntry[]; partialResults?: boolean };
const settle = async (opened: Opened, body: object) => {
  const answer = await request(opened.app).post("/v2/x402/settle").send(body);
  expect([answer.status, answer.body.success, answer.body.errorReason], JSON.stringify(answer.body)).to.deep.equal([200, true, undefined]);
  return answer.body as { transaction: Hex };
};
/** The block time of a settle's transaction, as the catalog records it. */
async function paidAt(opened: Opened, hash: Hex): Promise<string> {
  const receipt = await opened.chain.publicClient.getTransactionReceipt({ hash });
  const block = await opened.chain.publicClient.getBlock({ blockNumber: receipt.blockNumber });
  return new Date(Number(block.timestamp) * 1000).toISOString();
}

describe("discovery catalog (x402 bazaar): entries only from settled payments, owned by the payTo paid", function () {
  this.timeout(120_000);

  it("a valid verify catalogs nothing; a settle catalogs the resource under the payTo, amount, asset, network and time of its settlement", async () => {
    const opened = await openFacilitator("cronos-testnet");
    const good = declared(await makePayment(opened.chain));
    expect((await request(opened.app).post("/v2/x402/verify").send(good)).body.isValid).to.equal(true);
    expect((await listed(opened)).items).to.deep.equal([]);
    const { transaction } = await settle(opened, good);
    const { items } = await listed(opened);
    expect(items).to.deep.equal([
      {
        resource: "https://seller.example/weather",
        type: "http",
        x402Version: 2,
        description: "Weather in Oslo",
        mimeType: "application/json",
        extensions: { bazaar: good.paymentRequirements.extra.bazaar },
        accepts: [{ ...good.paymentRequirements, extra: { name: good.paymentRequirements.extra.name, version: good.paymentRequirements.extra.version }, network: "eip155:338", payTo: opened.seller.address, asset: opened.chain.token, amount: "1000000" }],
        lastUpdated: await paidAt(opened, transaction),
      },
    ]);
    // A declaration that is not one (no input type) is paid as usual and not listed.
    const odd = declared(await makePayment(opened.chain), "https://other.example/x");
    (odd.paymentRequirements.extra.bazaar.info.input as Record<string, unknown>).type = "ftp";
    await settle(opened, odd);
    expect((await listed(opened)).pagination.total).to.equal(1);
  });

  it("takeover by verify: a verified self-payment naming the seller's URL changes nothing and creates nothing", async () => {
    const opened = await openFacilitator("cronos-testnet");
    await settle(opened, declared(await makePayment(opened.chain)));
    const before = await listed(opened);
    for (const url of ["https://seller.example/weather", "https://seller.example/premium"]) {
      const poison = declared(await makePayment(opened.chain, { payer: ATTACKER, payTo: ATTACKER.address }), url, "Pay here instead");
      expect((await request(opened.app).post("/v2/x402/verify").send(poison)).body.isValid, url).to.equal(true);
    }
    expect(await listed(opened)).to.deep.equal(before);
  });

  it("takeover by settle: a payment to the attacker's own payTo naming the seller's URL is listed apart under that payTo, the seller's entry unchanged; one to itself is not listed", async () => {
    const opened = await openFacilitator("cronos-testnet");
    await settle(opened, declared(await makePayment(opened.chain)));
    const [genuine] = (await listed(opened)).items;
    // From the attacker to itself: money moved (the relayer paid the gas), but nobody paid for anything.
    await settle(opened, declared(await makePayment(opened.chain, { payer: ATTACKER, payTo: ATTACKER.address, amount: 1n }), "https://seller.example/weather", "Pay here instead"));
    expect((await listed(opened)).items).to.deep.equal([genuine]);
    // From the attacker to another address of its own: an entry of that payTo, beside the seller's.
    await settle(opened, declared(await makePayment(opened.chain, { payer: ATTACKER, payTo: ATTACKER_WALLET, amount: 1n }), "https://seller.example/weather", "Pay here instead"));
    const after = (await listed(opened)).items;
    expect(after.map((e) => [e.resource, e.accepts.map((a) => [a.payTo, a.amount]), e.description])).to.deep.equal([
      ["https://seller.example/weather", [[ATTACKER_WALLET, "1"]], "Pay here instead"],
      ["https://seller.example/weather", [[opened.seller.address, "1000000"]], "Weather in Oslo"],
    ]);
    expect(after[1]).to.deep.equal(genuine);
    expect((await listed(opened, `?payTo=${opened.seller.address}`)).items).to.deep.equal([genuine]);
  });

  it("a flood of self-funded entries neither ranks first for the seller's words nor evicts the seller's entry: bounds per payTo and in all", async () => {
    const opened = await openFacilitator("cronos-testnet", { CATALOG_MAX_ENTRIES: "6", CATALOG_MAX_ENTRIES_PER_SELLER: "3" });
    // The seller's resource, paid by two buyers.
    for (const key of [HARDHAT_KEYS.buyer, HARDHAT_KEYS.buyer2]) await settle(opened, declared(await makePayment(opened.chain, { payer: privateKeyToAccount(key) })));
    // The attacker pays its own addresses 1 unit each, later, naming weather resources (to itself too).
    const spam = async (payTo: Address, i: number) =>
      settle(opened, declared(await makePayment(opened.chain, { payer: ATTACKER, payTo, amount: 1n }), `https://spam.example/weather/${i}`, "Weather in Oslo, cheaper"));
    for (let i = 0; i < 4; i++) await spam(ATTACKER_WALLET, i);
    for (let i = 0; i < 4; i++) await spam(ATTACKER.address, 10 + i);
    for (let i = 0; i < 6; i++) await spam(`0x${(0xcafe00 + i).toString(16).padStart(40, "0")}`, 20 + i);
    const { items, pagination } = await listed(opened);
    expect(pagination.total).to.equal(6);
    // Self-payments are not listed; one payTo keeps at most its bound; the one-payer entries went first.
    expect(items.filter((e) => e.accepts[0]!.payTo === ATTACKER.address)).to.deep.equal([]);
    expect(items.filter((e) => e.accepts[0]!.payTo === ATTACKER_WALLET).length).to.be.at.most(3);
    expect(items.filter((e) => e.accepts[0]!.payTo === opened.seller.address).map((e) => e.resource)).to.deep.equal(["https://seller.example/weather"]);
    for (const query of ["weather oslo", "weather", "Oslo"]) {
      expect((await searched(opened.app, query)).resources[0]!.accepts[0]!.payTo, query).to.equal(opened.seller.address);
    }
  });

  it("deep or oversized JSON: a declaration nested 5,000 levels verifies valid and settles, unlisted (refused by its depth, not by a fault); so does one over 16 KiB", async () => {
    const { logger, lines } = recordingLogger();
    const opened = await openFacilitator("cronos-testnet", {}, { logger });
    // Written as text: JSON.stringify itself overflows the stack near 5,000 levels.
    const deep = `${'{"a":'.repeat(5_000)}"snow"${"}".repeat(5_000)}`;
    const nested = JSON.stringify(declared(await makePayment(opened.chain), "https://deep.example/x", "deep", { input: { type: "http", method: "GET", queryParams: "DEEP" } })).replace('"DEEP"', deep);
    for (const route of ["verify", "settle"]) {
      const answer = await request(opened.app).post(`/v2/x402/${route}`).set("Content-Type", "application/json").send(nested);
      expect([answer.status, answer.body.isValid ?? answer.body.success], route).to.deep.equal([200, true]);
    }
    const large = declared(await makePayment(opened.chain), "https://large.example/x", "large", { input: { type: "http", method: "GET", queryParams: { blob: "x".repeat(17_000) } } });
    await settle(opened, large);
    expect((await listed(opened)).items).to.deep.equal([]);
    expect(lines.filter((line) => line.message?.startsWith("discovery catalog"))).to.deep.equal([]);
  });

  it("a catalog write that fails or hangs never changes the settle's answer: logged, or answered while the write still hangs", async () => {
    const { logger, lines } = recordingLogger();
    const ledger = await openLedger();
    let hang = false;
    let hanging = 0;
    const frozen = new Proxy(ledger, {
      get(target, key) {
        if (key === "recordDiscoveryPayment") {
          return () => (hang ? (hanging++, new Promise(() => {})) : Promise.reject(new Error("disk full")));
        }
        const value = Reflect.get(target, key) as unknown;
        return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    }) as Ledger;
    try {
      const opened = await openFacilitator("cronos-testnet", {}, { ledger: frozen, logger });
      await settle(opened, declared(await makePayment(opened.chain)));
      expect(lines.filter((line) => line.message === "discovery catalog: entry not recorded").map((line) => line.fields.err)).to.deep.equal(["Error: disk full"]);
      hang = true;
      // The write never ends: the paid answer comes all the same (CATALOG_WAIT_MS bounds the wait; `settle` asserts it).
      await settle(opened, declared(await makePayment(opened.chain)));
      expect(hanging, "catalog writes begun and never ended").to.equal(1);
      await opened.facilitator.close();
    } finally {
      await ledger.close();
    }
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

  it("search matches the declaration's values, never its JSON keys or the fields every entry has; a limit over 100 asks for 100; more than 8 words is a 400; scheme and extensions filters", async () => {
    const opened = await openFacilitator("cronos-testnet");
    await settle(opened, declared(await makePayment(opened.chain)));
    const found = async (query: string) => (await searched(opened.app, query)).resources.length;
    // Values: the description, the URL's host and path, an example input and output.
    for (const query of ["weather", "Oslo", "seller", "snow"]) expect(await found(query), query).to.equal(1);
    // Keys and what every declaration says: no match.
    for (const query of ["type", "input", "http", "https", "json", "get", "queryParams", "city", "output", "forecast", "info", "schema"]) {
      expect(await found(query), query).to.equal(0);
    }
    const many = await request(opened.app).get("/v2/x402/discovery/search?query=weather&limit=500");
    expect([many.status, many.body.pagination, many.body.partialResults]).to.deep.equal([200, { limit: 100, cursor: null }, undefined]);
    expect((await request(opened.app).get("/v2/x402/discovery/search?query=weather&limit=ten")).status).to.equal(400);
    const wordy = await request(opened.app).get(`/v2/x402/discovery/search?query=${encodeURIComponent("a b c d e f g h i")}`);
    expect([wordy.status, wordy.body]).to.deep.equal([400, { error: "Invalid request: query must have at most 8 distinct words" }]);
    // Only the bazaar extension is ever listed, and only payments by `exact` (the one scheme settled).
    expect((await request(opened.app).get("/v2/x402/discovery/search?query=weather&extensions=bazaar&scheme=exact")).body.resources).to.have.length(1);
    expect((await request(opened.app).get("/v2/x402/discovery/search?query=weather&extensions=payment-identifier")).body.resources).to.deep.equal([]);
    expect((await request(opened.app).get("/v2/x402/discovery/search?query=weather&scheme=upto")).body.resources).to.deep.equal([]);
    expect((await listed(opened, "?scheme=exact&extensions=bazaar")).pagination.total).to.equal(1);
    expect(await listed(opened, "?scheme=upto")).to.deep.equal({ x402Version: 2, items: [], pagination: { limit: 100, offset: 0, total: 0 } });
  });

  describe("over a catalog of its own ledger", () => {
    let ledger: Ledger;
    let app: express.Express;
    beforeEach(async () => {
      ledger = await openLedger();
      app = express().use(discoveryRoutes({ ledger, guards: [] }));
    });
    afterEach(() => ledger.close());
    const entry = (i: number, description: string, payTo = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65"): DiscoveryPayment => ({
      entry: {
        resource: `https://s.example/${i}`,
        type: "http",
        x402Version: 2,
        accepts: [{ scheme: "exact", network: "eip155:338", payTo, amount: "1" }],
        lastUpdated: new Date(Date.UTC(2026, 10, 24, 10, 0, i)).toISOString(),
        description,
      },
      payTo,
      payer: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
      words: description.split(" "),
    });

    it(`search says partialResults when a word matched more entries than one search reads (${DISCOVERY_CANDIDATES_PER_WORD})`, async () => {
      const bounds = { maxEntries: 10_000, maxEntriesPerSeller: 10_000 };
      for (let i = 0; i < DISCOVERY_CANDIDATES_PER_WORD; i++) await ledger.recordDiscoveryPayment(entry(i, "weather"), bounds);
      expect((await searched(app, "weather")).partialResults).to.equal(undefined);
      await ledger.recordDiscoveryPayment(entry(DISCOVERY_CANDIDATES_PER_WORD, "weather"), bounds);
      const answer = await request(app).get("/v2/x402/discovery/search?query=weather");
      expect([answer.body.partialResults, answer.body.resources.length, answer.body.pagination]).to.deep.equal([true, 20, { limit: 20, cursor: "20" }]);
      expect((await searched(app, "rain")).partialResults).to.equal(undefined);
    });

    it("a flood of reads against a frozen ledger holds one read and 32 waiting; one more is answered 503 at once; all answer once it thaws", async () => {
      await ledger.recordDiscoveryPayment(entry(1, "weather"), { maxEntries: 10, maxEntriesPerSeller: 10 });
      let thaw!: () => void;
      const frozen = new Promise<void>((resolve) => (thaw = resolve));
      let reads = 0;
      let arrived = 0;
      const slow = express().use(
        (_req, _res, next) => (arrived++, next()),
        discoveryRoutes({
          ledger: {
            listDiscoveryResources: async (request) => (reads++, await frozen, ledger.listDiscoveryResources(request)),
            searchDiscoveryResources: async (request) => (reads++, await frozen, ledger.searchDiscoveryResources(request)),
          },
          guards: [],
        }),
      );
      const server = await listen(slow);
      const base = server.url;
      try {
        const held = Array.from({ length: 33 }, (_, i) => fetch(`${base}/v2/x402/discovery/${i % 2 ? "resources" : "search?query=weather"}`));
        // All 33 reached the routes (each was admitted or queued as it arrived): one reads, 32 wait.
        await waitUntil(() => arrived === 33);
        expect(reads).to.equal(1);
        const refused = await fetch(`${base}/v2/x402/discovery/resources`);
        expect([refused.status, refused.headers.get("retry-after"), await refused.json()]).to.deep.equal([503, "1", { error: "Service unavailable: too many catalog reads at once", retryAfter: 1 }]);
        thaw();
        const answers = await Promise.all(held);
        expect(answers.map((answer) => answer.status)).to.deep.equal(Array(33).fill(200));
        expect(reads).to.equal(33);
      } finally {
        await server.close();
      }
    });

    it(`pages stay within ${MAX_PAGE_BYTES / 1024} KiB: a listing cut short says the limit it served, and paging by offset + limit loses nothing`, async () => {
      const bounds = { maxEntries: 10_000, maxEntriesPerSeller: 10_000 };
      const filler = "x".repeat(20_000);
      for (let i = 0; i < 60; i++) await ledger.recordDiscoveryPayment(entry(i, `weather ${filler}`), bounds);
      const seen: string[] = [];
      for (let offset = 0; offset < 60; ) {
        const page = await request(app).get(`/v2/x402/discovery/resources?limit=1000&offset=${offset}`);
        expect(page.text.length).to.be.at.most(MAX_PAGE_BYTES + 1_000);
        expect(page.body.pagination.limit).to.equal(page.body.items.length < 60 - offset ? page.body.items.length : 1000);
        seen.push(...page.body.items.map((e: DiscoveryEntry) => e.resource));
        offset += page.body.pagination.limit;
      }
      expect(new Set(seen).size).to.equal(60);
      const first = await request(app).get("/v2/x402/discovery/search?query=weather&limit=100");
      expect(first.body.resources.length).to.be.below(60);
      expect(first.body.pagination.cursor).to.equal(String(first.body.resources.length));
    });
  });

  it("cronos-x402 catalog lists the catalog of the ledger named by LEDGER_FILE and removes an entry (exit 1 when it is not there)", async function () {
    // Six runs of the CLI, each a Node start-up with tsx: minutes on a loaded machine.
    this.timeout(240_000);
    const dir = await mkdtemp(join(tmpdir(), "x402-catalog-"));
    const file = join(dir, "ledger.db");
    const payTo = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
    try {
      const ledger = await openLedger({ file });
      const entry = (resource: string, at: string): DiscoveryPayment => ({
        entry: { resource, type: "http", x402Version: 2, accepts: [{ scheme: "exact", network: "eip155:338", payTo }], lastUpdated: at, description: "d" },
        payTo,
        payer: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
        words: ["d"],
      });
      const bounds = { maxEntries: 10, maxEntriesPerSeller: 10 };
      await ledger.recordDiscoveryPayment(entry("https://a.example/one", "2026-11-24T10:00:00.000Z"), bounds);
      await ledger.recordDiscoveryPayment(entry("https://a.example/two", "2026-11-24T11:00:00.000Z"), bounds);
      await ledger.close();
      const cli = (...args: string[]) =>
        run(process.execPath, ["--import", "tsx", "src/cli/bin.ts", "catalog", ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? "", LEDGER_FILE: file } }).then(
          ({ stdout }) => ({ code: 0, stdout }),
          (error: { code?: number; stdout?: string }) => ({ code: error.code, stdout: error.stdout ?? "" }),
        );
      expect(await cli("list")).to.deep.equal({
        code: 0,
        stdout: `https://a.example/two\t${payTo}\thttp\t2026-11-24T11:00:00.000Z\td\nhttps://a.example/one\t${payTo}\thttp\t2026-11-24T10:00:00.000Z\td\n`,
      });
      expect(await cli("remove", "https://a.example/two", "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65")).to.deep.equal({ code: 1, stdout: "not in the catalog: https://a.example/two\n" });
      expect(await cli("remove", "https://a.example/two", payTo)).to.deep.equal({ code: 0, stdout: "removed https://a.example/two\n" });
      expect(await cli("remove", "https://a.example/two")).to.deep.equal({ code: 1, stdout: "not in the catalog: https://a.example/two\n" });
      expect(await cli("list")).to.deep.equal({ code: 0, stdout: `https://a.example/one\t${payTo}\thttp\t2026-11-24T10:00:00.000Z\td\n` });
      expect((await cli("remove")).code).to.equal(2);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
