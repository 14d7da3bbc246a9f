import { expect } from "chai";
import {
  DISCOVERY_CANDIDATES_PER_WORD,
  DISCOVERY_MAX_PAYERS,
  type DiscoveryBounds,
  type DiscoveryEntry,
  type DiscoveryPageRequest,
  type DiscoveryPayment,
  type Ledger,
} from "../../src/ledger/types.js";
import { PAYEE, PAYER, postgresBackend, sqliteFileBackend, sqliteMemoryBackend, TestClock, type LedgerStore } from "../helpers/ledger.js";

const SELLER = "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65";
const ATTACKER = "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc";
const WIDE: DiscoveryBounds = { maxEntries: 100_000, maxEntriesPerSeller: 1_000 };
/** A payer address per number (distinct payers). */
const payerNo = (n: number) => `0x${(0xa0000 + n).toString(16).padStart(40, "0")}`;
const minute = (m: number) => new Date(Date.UTC(2026, 10, 24, 10, m)).toISOString();

interface Paid {
  resource?: string;
  network?: string;
  payTo?: string;
  payer?: string;
  at?: number;
  description?: string;
  method?: string;
  type?: string;
  toolName?: string;
  words?: string[];
}

/** A settled payment's catalog entry, as the facilitator builds it (one way of paying, the block's time). */
function paid(options: Paid = {}): DiscoveryPayment {
  const { resource = "https://seller.example/weather", network = "eip155:338", payTo = SELLER, payer = PAYER, at = 0, method = "GET", type = "http" } = options;
  const input = type === "mcp" ? { type, toolName: options.toolName ?? "tool", inputSchema: { type: "object" } } : { type, method };
  const entry: DiscoveryEntry = {
    resource,
    type,
    x402Version: 2,
    accepts: [{ scheme: "exact", network, payTo, amount: "10000" }],
    lastUpdated: minute(at),
    ...(options.description !== undefined ? { description: options.description } : {}),
    extensions: { bazaar: { info: { input } } },
  };
  return { entry, payTo, payer, words: options.words ?? (options.description ?? "").toLowerCase().split(/\s+/).filter(Boolean) };
}

const ALL = (extra: Partial<DiscoveryPageRequest> = {}): DiscoveryPageRequest => ({ limit: 1_000, offset: 0, maxBytes: 1 << 20, ...extra });
const entries = async (ledger: Ledger, extra: Partial<DiscoveryPageRequest> = {}) => (await ledger.listDiscoveryResources(ALL(extra))).items.map((item) => JSON.parse(item) as DiscoveryEntry);
const found = async (ledger: Ledger, words: string[], extra: Partial<DiscoveryPageRequest> = {}) => {
  const page = await ledger.searchDiscoveryResources({ ...ALL({ limit: 100 }), ...extra, words });
  return { ...page, entries: page.items.map((item) => JSON.parse(item) as DiscoveryEntry) };
};
/** Each filter's total (kept by the writes) against the entries it lists: they must agree. */
async function totalsAgree(ledger: Ledger): Promise<void> {
  for (const filter of [{}, { network: "eip155:338" }, { network: "cronos-mainnet" }, { type: "mcp" }, { type: "http", network: "eip155:25" }, { type: "http" }]) {
    const page = await ledger.listDiscoveryResources(ALL({ filter }));
    expect(page.total, JSON.stringify(filter)).to.equal(page.items.length);
  }
}
const payTos = (list: DiscoveryEntry[]) => list.map((e) => [e.resource, String(e.accepts[0]!.payTo)]);

for (const backend of [sqliteFileBackend(), sqliteMemoryBackend(), postgresBackend()]) {
  describe(`discovery catalog in the ledger: ${backend.name}`, function () {
    this.timeout(120_000);
    let store: LedgerStore;
    let ledger: Ledger;
    before(() => backend.setUp());
    after(() => backend.tearDown());
    beforeEach(async () => {
      store = await backend.store(new TestClock());
      ledger = await store.open();
    });
    afterEach(() => store.dispose());

    it("an entry belongs to its payTo: a payment naming the same URL to another payTo is another entry and never changes the first", async () => {
      await ledger.recordDiscoveryPayment(paid({ at: 0, description: "Weather in Oslo" }), WIDE);
      const before = await entries(ledger);
      // The attacker is paid (by itself through another address) naming the seller's URL, with its own description.
      const taken = await ledger.recordDiscoveryPayment(paid({ at: 5, payTo: ATTACKER, payer: PAYEE, description: "Pay here instead" }), WIDE);
      expect(taken).to.deep.equal({ created: true, evicted: 0 });
      const after = await entries(ledger);
      expect(payTos(after)).to.deep.equal([
        ["https://seller.example/weather", ATTACKER],
        ["https://seller.example/weather", SELLER],
      ]);
      expect(after[1]).to.deep.equal(before[0]);
      // The seller's filter finds only the seller's entry.
      expect(payTos(await entries(ledger, { filter: { payTo: SELLER.toLowerCase() } }))).to.deep.equal([["https://seller.example/weather", SELLER]]);
      // Removal of one payTo's entry leaves the other's.
      expect(await ledger.removeDiscoveryResource("https://seller.example/weather", undefined, ATTACKER)).to.equal(1);
      expect(await entries(ledger)).to.deep.equal(before);
    });

    it("keys an entry by URL, method and payTo; removal takes one method, or every entry of the URL", async () => {
      for (const method of ["GET", "post", "GET"]) await ledger.recordDiscoveryPayment(paid({ resource: "https://s.example/items", method }), WIDE);
      const methods = async () => (await entries(ledger)).map((e) => (e.extensions!.bazaar as { info: { input: { method: string } } }).info.input.method).sort();
      expect(await methods()).to.deep.equal(["GET", "post"]);
      expect(await ledger.removeDiscoveryResource("https://s.example/items", "POST")).to.equal(1);
      expect(await methods()).to.deep.equal(["GET"]);
      expect(await ledger.removeDiscoveryResource("https://s.example/items")).to.equal(1);
      expect(await ledger.listDiscoveryResources(ALL())).to.deep.equal({ items: [], total: 0 });
    });

    it("keys MCP entries by tool name: two tools at one URL are two entries, removed one at a time by mcp:<toolName>", async () => {
      for (const toolName of ["search", "Search", "search"]) await ledger.recordDiscoveryPayment(paid({ resource: "https://s.example/mcp", type: "mcp", toolName }), WIDE);
      const tools = async () => (await entries(ledger)).map((e) => (e.extensions!.bazaar as { info: { input: { toolName: string } } }).info.input.toolName).sort();
      expect(await tools()).to.deep.equal(["Search", "search"]);
      expect(await ledger.removeDiscoveryResource("https://s.example/mcp", "mcp:search")).to.equal(1);
      expect(await ledger.removeDiscoveryResource("https://s.example/mcp", "MCP:Search")).to.equal(1);
      expect(await tools()).to.deep.equal([]);
    });

    it("keeps one entry per payTo with every way it was paid (latest first), the latest time, lists the most recently paid first, filters and totals", async () => {
      const [a, b] = [ledger, await store.open()];
      await a!.recordDiscoveryPayment(paid({ network: "eip155:338", at: 0 }), WIDE);
      await b!.recordDiscoveryPayment(paid({ network: "eip155:25", at: 5 }), WIDE);
      await a!.recordDiscoveryPayment(paid({ network: "eip155:338", at: 10 }), WIDE);
      // A payment mined earlier than the entry's latest one (recorded late) leaves the entry's time as it was.
      await a!.recordDiscoveryPayment(paid({ network: "eip155:338", at: 8 }), WIDE);
      await b!.recordDiscoveryPayment({ ...paid({ resource: "https://s.example/tool", type: "mcp", network: "eip155:25", at: 7 }), entry: { ...paid({ resource: "https://s.example/tool", type: "mcp", network: "eip155:25", at: 7 }).entry, description: "a tool" } }, WIDE);
      await b!.recordDiscoveryPayment(paid({ resource: "https://s.example/v1", network: "cronos-mainnet", at: 1 }), WIDE);
      const all = await entries(ledger);
      expect(all.map((e) => [e.resource, e.lastUpdated, e.accepts.map((r) => r.network)])).to.deep.equal([
        ["https://seller.example/weather", minute(10), ["eip155:338", "eip155:25"]],
        ["https://s.example/tool", minute(7), ["eip155:25"]],
        ["https://s.example/v1", minute(1), ["cronos-mainnet"]],
      ]);
      // Either dialect's name of a network finds entries recorded under the other's.
      for (const network of ["cronos-mainnet", "eip155:25"]) {
        expect((await entries(ledger, { filter: { network } })).map((e) => e.resource), network).to.deep.equal(["https://seller.example/weather", "https://s.example/tool", "https://s.example/v1"]);
        expect((await ledger.listDiscoveryResources(ALL({ filter: { network } }))).total).to.equal(3);
      }
      expect((await entries(ledger, { filter: { type: "mcp" } })).map((e) => e.description)).to.deep.equal(["a tool"]);
      expect((await entries(ledger, { filter: { payTo: SELLER.toLowerCase(), scheme: "exact", network: "eip155:338" } })).map((e) => e.resource)).to.deep.equal(["https://seller.example/weather"]);
      // A filter value is matched as a whole, its LIKE wildcards as plain characters.
      for (const filter of [{ network: "%" }, { network: "eip155:3_8" }, { scheme: "ex%" }, { payTo: PAYEE }]) {
        expect(await ledger.listDiscoveryResources(ALL({ filter })), JSON.stringify(filter)).to.deep.equal({ items: [], total: 0 });
      }
      expect(await ledger.listDiscoveryResources(ALL({ limit: 1, offset: 1 }))).to.deep.include({ total: 3 });
      expect((await entries(ledger, { limit: 1, offset: 1 })).map((e) => e.resource)).to.deep.equal(["https://s.example/tool"]);
      expect((await entries(ledger, { limit: 1, offset: 1, filter: { network: "eip155:25" } })).map((e) => e.resource)).to.deep.equal(["https://s.example/tool"]);
      await totalsAgree(ledger);
      // The tool paid on another network: counted under both networks, once in all.
      await b!.recordDiscoveryPayment(paid({ resource: "https://s.example/tool", type: "mcp", network: "eip155:338", at: 30 }), WIDE);
      expect((await ledger.listDiscoveryResources(ALL({ filter: { type: "mcp", network: "eip155:338" } }))).total).to.equal(1);
      await totalsAgree(ledger);
      expect(await ledger.removeDiscoveryResource("https://s.example/tool")).to.equal(1);
      await totalsAgree(ledger);
      expect((await ledger.listDiscoveryResources(ALL())).total).to.equal(2);
    });

    it("keeps every way of paying when payments of one resource are recorded at once from two handles (20 rounds)", async () => {
      const [a, b] = [ledger, await store.open()];
      for (let round = 0; round < 20; round++) {
        const resource = `https://s.example/race/${round}`;
        await Promise.all([a!.recordDiscoveryPayment(paid({ resource, network: "eip155:338" }), WIDE), b!.recordDiscoveryPayment(paid({ resource, network: "eip155:25" }), WIDE)]);
      }
      const networks = (await entries(ledger)).map((e) => [e.resource, e.accepts.map((r) => String(r.network)).sort()]);
      expect(networks.sort()).to.deep.equal(Array.from({ length: 20 }, (_, round) => [`https://s.example/race/${round}`, ["eip155:25", "eip155:338"]]).sort());
      expect((await ledger.listDiscoveryResources(ALL())).total).to.equal(20);
    });

    it("search: more of the query's words first, then more distinct payers, then the most recently paid; one payer paying again counts once", async () => {
      const weather = (resource: string, description: string, payer: string, at: number) => paid({ resource, description, payer, at, payTo: resource.includes("spam") ? ATTACKER : SELLER });
      await ledger.recordDiscoveryPayment(weather("https://seller.example/oslo", "weather oslo", payerNo(1), 0), WIDE);
      await ledger.recordDiscoveryPayment(weather("https://seller.example/oslo", "weather oslo", payerNo(2), 1), WIDE);
      // The spam: newer, one payer paying again and again.
      for (let i = 0; i < 5; i++) await ledger.recordDiscoveryPayment(weather("https://spam.example/oslo", "weather oslo", payerNo(9), 10 + i), WIDE);
      await ledger.recordDiscoveryPayment(weather("https://seller.example/lima", "weather lima", payerNo(3), 20), WIDE);
      const ranked = async (words: string[]) => (await found(ledger, words)).entries.map((e) => e.resource);
      expect(await ranked(["weather", "oslo"])).to.deep.equal(["https://seller.example/oslo", "https://spam.example/oslo", "https://seller.example/lima"]);
      expect(await ranked(["lima"])).to.deep.equal(["https://seller.example/lima"]);
      expect(await ranked(["nothing"])).to.deep.equal([]);
      // Two payers outrank one; the most recently paid breaks ties.
      expect(await ranked(["weather"])).to.deep.equal(["https://seller.example/oslo", "https://seller.example/lima", "https://spam.example/oslo"]);
      // Filters apply to the matches.
      expect((await found(ledger, ["weather"], { filter: { payTo: ATTACKER } })).entries.map((e) => e.resource)).to.deep.equal(["https://spam.example/oslo"]);
      expect((await found(ledger, ["weather"], { filter: { type: "mcp" } })).entries).to.deep.equal([]);
    });

    it(`search reads the best ${DISCOVERY_CANDIDATES_PER_WORD} entries of a word and says partial beyond; a seller's own entries are all searched with its payTo`, async function () {
      // A real seller's entry, paid by two buyers, then more spam entries of the same word (one payer each) than one search reads.
      await ledger.recordDiscoveryPayment(paid({ resource: "https://seller.example/weather", description: "weather", payer: payerNo(1), at: 0 }), WIDE);
      await ledger.recordDiscoveryPayment(paid({ resource: "https://seller.example/weather", description: "weather", payer: payerNo(2), at: 0 }), WIDE);
      await ledger.recordDiscoveryPayment(paid({ resource: "https://seller.example/old", description: "weather", payer: payerNo(3), at: 0 }), WIDE);
      for (let i = 0; i < DISCOVERY_CANDIDATES_PER_WORD; i++) {
        await ledger.recordDiscoveryPayment(paid({ resource: `https://spam.example/${i}`, description: "weather", payTo: ATTACKER, payer: PAYEE, at: 30 }), WIDE);
      }
      const page = await found(ledger, ["weather"], { limit: 5 });
      expect([page.partial, page.more, page.entries[0]!.resource]).to.deep.equal([true, true, "https://seller.example/weather"]);
      // The seller's one-payer entry is older than every spam entry: beyond what one search reads…
      const everything = await found(ledger, ["weather"], { limit: 1_000 });
      expect(everything.entries).to.have.length(DISCOVERY_CANDIDATES_PER_WORD);
      expect(everything.entries.map((e) => e.resource)).not.to.include("https://seller.example/old");
      // …but a search within the seller's payTo reads all of the seller's entries.
      const own = await found(ledger, ["weather"], { filter: { payTo: SELLER } });
      expect([own.partial, own.entries.map((e) => e.resource)]).to.deep.equal([false, ["https://seller.example/weather", "https://seller.example/old"]]);
    });

    it("pages search and listing by count and by bytes: the first entry always, then no more than maxBytes", async () => {
      for (let i = 0; i < 5; i++) await ledger.recordDiscoveryPayment(paid({ resource: `https://s.example/${i}`, description: `weather ${"x".repeat(1_000)}`, at: i }), WIDE);
      const size = (await ledger.listDiscoveryResources(ALL({ limit: 1 }))).items[0]!.length;
      const bounded = await ledger.listDiscoveryResources(ALL({ maxBytes: size * 2 + 10 }));
      expect([bounded.items.length, bounded.total]).to.deep.equal([2, 5]);
      expect((await ledger.listDiscoveryResources(ALL({ maxBytes: 1 }))).items).to.have.length(1);
      const searched = await ledger.searchDiscoveryResources({ ...ALL({ maxBytes: size * 3 + 10 }), words: ["weather"] });
      expect([searched.items.length, searched.more]).to.deep.equal([3, true]);
      const rest = await ledger.searchDiscoveryResources({ ...ALL({ offset: 3 }), words: ["weather"] });
      expect([rest.items.length, rest.more]).to.deep.equal([2, false]);
      const byCount = await ledger.searchDiscoveryResources({ ...ALL({ limit: 2 }), words: ["weather"] });
      expect([byCount.items.length, byCount.more]).to.deep.equal([2, true]);
    });

    it(`counts distinct payers up to ${DISCOVERY_MAX_PAYERS} and keeps the bounds: a seller's own over its bound, then the whole catalog, the fewest payers and least recently paid first`, async () => {
      const bounds: DiscoveryBounds = { maxEntries: 6, maxEntriesPerSeller: 3 };
      // The seller's entry paid by many buyers (standing DISCOVERY_MAX_PAYERS), an older one by two.
      for (let n = 0; n < DISCOVERY_MAX_PAYERS + 4; n++) await ledger.recordDiscoveryPayment(paid({ resource: "https://seller.example/a", payer: payerNo(n), at: 0 }), bounds);
      for (const n of [1, 2]) await ledger.recordDiscoveryPayment(paid({ resource: "https://seller.example/b", payer: payerNo(n), at: 0 }), bounds);
      // A flood of one-payer entries to one attacker payTo: only its own bound of them stays, its least recently paid go.
      let evicted = 0;
      for (let i = 0; i < 5; i++) evicted += (await ledger.recordDiscoveryPayment(paid({ resource: `https://spam.example/${i}`, payTo: ATTACKER, payer: PAYEE, at: 10 + i }), bounds)).evicted;
      expect(evicted).to.equal(2);
      const listed = async () => (await entries(ledger)).map((e) => e.resource).sort();
      expect(await listed()).to.deep.equal(["https://seller.example/a", "https://seller.example/b", "https://spam.example/2", "https://spam.example/3", "https://spam.example/4"]);
      // Flooded from many payTos, the whole catalog keeps its bound: the one-payer entries go first, the seller's stay.
      for (let i = 0; i < 6; i++) {
        const payTo = `0x${(0xbb000 + i).toString(16).padStart(40, "0")}`;
        await ledger.recordDiscoveryPayment(paid({ resource: `https://spam${i}.example/x`, payTo, payer: PAYEE, at: 20 + i }), bounds);
      }
      const after = await listed();
      expect(after).to.have.length(6);
      expect(after.filter((r) => r.startsWith("https://seller.example/"))).to.deep.equal(["https://seller.example/a", "https://seller.example/b"]);
      expect((await ledger.listDiscoveryResources(ALL())).total).to.equal(6);
      await totalsAgree(ledger);
    });

    it(`distinct payers count up to ${DISCOVERY_MAX_PAYERS}: an entry paid by more ranks with one paid by exactly that many, the more recently paid first`, async () => {
      for (let n = 0; n < DISCOVERY_MAX_PAYERS + 4; n++) await ledger.recordDiscoveryPayment(paid({ resource: "https://s.example/many", description: "quotes", payer: payerNo(n), at: 0 }), WIDE);
      for (let n = 0; n < DISCOVERY_MAX_PAYERS; n++) await ledger.recordDiscoveryPayment(paid({ resource: "https://s.example/enough", description: "quotes", payer: payerNo(n), at: 1 }), WIDE);
      for (let n = 0; n < DISCOVERY_MAX_PAYERS - 1; n++) await ledger.recordDiscoveryPayment(paid({ resource: "https://s.example/fewer", description: "quotes", payer: payerNo(n), at: 2 }), WIDE);
      expect((await found(ledger, ["quotes"])).entries.map((e) => e.resource)).to.deep.equal(["https://s.example/enough", "https://s.example/many", "https://s.example/fewer"]);
    });
  });
}
