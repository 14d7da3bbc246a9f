import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import pg from "pg";
import type { Hex } from "viem";
import { deleteExpiredSettlements } from "../../src/facilitator/retention.js";
import { startTestPostgres, type TestPostgres } from "../../src/harness/postgres.js";
import { openPostgresLedger } from "../../src/ledger/postgres.js";
import { FIND_BY_TX_HASH } from "../../src/ledger/sql/settlements.js";
import { openSqliteLedger } from "../../src/ledger/sqlite.js";
import type { Ledger, SettlementRecord } from "../../src/ledger/types.js";
import { claimInput, openDatabaseFile, openPostgresTestLedger, openSqliteTestLedger, RELAYER, signedTx, TestClock } from "../helpers/ledger.js";

const DAY = 86_400_000;
const HASH = `0x${"ab".repeat(32)}`;

/** The query plan's scans that read rows without an index condition (a full scan, however it is done). */
type PlanNode = { "Node Type": string; "Relation Name"?: string; "Index Cond"?: string; Plans?: PlanNode[] };
function unindexedScans(node: PlanNode): string[] {
  const own =
    node["Node Type"] === "Seq Scan" || (/^(Index Scan|Index Only Scan|Bitmap Index Scan)$/.test(node["Node Type"]) && node["Index Cond"] === undefined)
      ? [`${node["Node Type"]} on ${node["Relation Name"] ?? "?"}`]
      : [];
  return [...own, ...(node.Plans ?? []).flatMap(unindexedScans)];
}

/** A row claimed, sent and then settled, or failed (`outcome`), at the clock's time; its transaction's hash. */
async function finishedRow(ledger: Ledger, label: string, outcome: "settled" | "failed" | "sent"): Promise<SettlementRecord & { hash: Hex }> {
  const claimed = await ledger.claim(claimInput({ label, owner: "a" }));
  if (claimed.outcome !== "claimed") throw new Error(`not claimed: ${claimed.outcome}`);
  await ledger.acquireLease(RELAYER, "a", 60_000);
  const tx = signedTx(label);
  await ledger.recordBroadcast({ id: claimed.record.id, owner: "a", hash: tx.hash, raw: tx.raw, relayer: RELAYER, relayerNonce: 1, checkAfterMs: 5_000 });
  if (outcome === "settled") await ledger.markSettled(claimed.record.id, { txHash: tx.hash, blockNumber: 1n, blockTimestamp: 1n });
  if (outcome === "failed") await ledger.markFailed(claimed.record.id, { code: "failedOnChain", owner: "a" });
  return { ...(await ledger.getById(claimed.record.id))!, hash: tx.hash };
}

describe("settlement lookups by hash use indexes only; retention deletes old finished rows, never rows in flight", function () {
  this.timeout(120_000);
  let server: TestPostgres;
  const dir = mkdtempSync(join(tmpdir(), "x402-lookup-"));
  before(async () => {
    server = await startTestPostgres();
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("SQLite: the plan of the lookup by hash searches indexes and scans no table", async () => {
    const location = join(dir, "plan.db");
    const ledger = openSqliteLedger({ location });
    try {
      const db = openDatabaseFile(location);
      const plan = (db.prepare(`EXPLAIN QUERY PLAN ${FIND_BY_TX_HASH}`).all(HASH, HASH) as Array<{ detail: string }>).map((row) => row.detail);
      db.close();
      expect(plan.filter((detail) => /^SEARCH /.test(detail))).to.have.length(3);
      expect(plan.filter((detail) => /^SCAN /.test(detail)), plan.join("\n")).to.deep.equal([]);
    } finally {
      await ledger.close();
    }
  });

  it("PostgreSQL: the plan of the lookup by hash has an index condition on every scan (seq scans disabled to see what indexes allow)", async () => {
    const url = await server.createDatabase();
    const ledger = await openPostgresLedger({ url, poolSize: 2 });
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query("SET enable_seqscan = off");
      const sql = FIND_BY_TX_HASH.replace(/\?/g, `'${HASH}'`);
      const planOf = async (text: string) => ((await client.query(`EXPLAIN (FORMAT JSON) ${text}`)).rows[0] as { "QUERY PLAN": Array<{ Plan: PlanNode }> })["QUERY PLAN"][0]!.Plan;
      const plan = await planOf(sql);
      expect(unindexedScans(plan), JSON.stringify(plan)).to.deep.equal([]);
      // The form it replaced reads every row, however it is planned.
      const old = `SELECT * FROM settlements WHERE id IN (SELECT settlement_id FROM settlement_transactions WHERE hash = '${HASH}') OR tx_hash = '${HASH}' ORDER BY id LIMIT 1`;
      expect(unindexedScans(await planOf(old))).to.not.deep.equal([]);
    } finally {
      await client.end();
      await ledger.close();
    }
  });

  for (const backend of ["sqlite", "postgres"] as const) {
    it(`${backend}: retention deletes settled and failed rows last changed before the cut-off, with their transactions, in batches; never a row in flight or a recent one`, async () => {
      const clock = new TestClock();
      const ledger =
        backend === "sqlite"
          ? openSqliteTestLedger({ location: join(dir, `retention-${backend}.db`), clock: clock.read })
          : await openPostgresTestLedger({ url: await server.createDatabase(), clock: clock.read, poolSize: 2 });
      try {
        const oldSettled = await finishedRow(ledger, "old-settled", "settled");
        const oldFailed = await finishedRow(ledger, "old-failed", "failed");
        const oldSent = await finishedRow(ledger, "old-sent", "sent");
        const other = await finishedRow(ledger, "old-settled-2", "settled");
        clock.advance(31 * DAY);
        const recent = await finishedRow(ledger, "recent", "settled");
        // Retention off: nothing goes.
        expect(await deleteExpiredSettlements(ledger, 0, clock.now)).to.equal(0);
        // One batch at a time, the oldest first.
        expect(await ledger.deleteFinishedSettlements(clock.now - 30 * DAY, 1)).to.equal(1);
        expect(await ledger.getById(oldSettled.id)).to.equal(undefined);
        expect(await ledger.findByTxHash(oldSettled.hash)).to.equal(undefined);
        expect(await deleteExpiredSettlements(ledger, 30, clock.now)).to.equal(2);
        for (const gone of [oldFailed, other]) expect(await ledger.getById(gone.id)).to.equal(undefined);
        // The row in flight and the recent one stay, and are still found by hash.
        expect((await ledger.findByTxHash(oldSent.hash))?.status).to.equal("sent");
        expect((await ledger.findByTxHash(recent.hash))?.id).to.equal(recent.id);
        expect(await deleteExpiredSettlements(ledger, 30, clock.now)).to.equal(0);
        // A deleted authorization can be claimed afresh (the chain then says whether it was used).
        expect((await ledger.claim(claimInput({ label: "old-settled", owner: "a" }))).outcome).to.equal("claimed");
      } finally {
        await ledger.close();
      }
    });
  }
});
