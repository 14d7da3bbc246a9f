import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import type { Hex } from "viem";
import { startTestPostgres, type TestPostgres } from "../../src/harness/postgres.js";
import { openPostgresLedger } from "../../src/ledger/postgres.js";
import { MIGRATIONS } from "../../src/ledger/schema.js";
import { openSqliteLedger } from "../../src/ledger/sqlite.js";
import type { Ledger } from "../../src/ledger/types.js";
import { nonceOf, PAYER, postgresLedgerBefore, sqliteLedgerBefore, TestClock, TOKEN } from "../helpers/ledger.js";

// A ledger written before migration 0013 holds a chain's history, its trail, rows an earlier version set aside and the
// index's nonces. Migrated, it keeps them all as they were: the rows set aside name no change (an earlier version's
// change cannot be undone: it kept nothing of the history it set aside), and a change made from then on is kept whole
// and undone.

const BEFORE = MIGRATIONS.findIndex((migration) => migration.name === "0013_reversible_history");
const GENESIS = `0x${"11".repeat(32)}` as Hex;
const OTHER_GENESIS = `0x${"22".repeat(32)}` as Hex;

/** A penalty an earlier version set aside, as it kept it. */
const legacyPenalty = (now: number) => ({ chain_id: 338, token: TOKEN.toLowerCase(), kind: "payer", subject: PAYER.toLowerCase(), until_at: 9_999_999_999, tx_hash: null, created_at: now });

/** The rows, as statements both SQL dialects take (literal values: test data only). */
function oldRows(now: number): string[] {
  const token = TOKEN.toLowerCase();
  const payer = PAYER.toLowerCase();
  const legacy = JSON.stringify(legacyPenalty(now));
  return [
    `INSERT INTO chain_histories (chain_id, genesis_hash, epoch, updated_at) VALUES (338, '${GENESIS}', 2, ${now})`,
    `INSERT INTO chain_checkpoints (chain_id, block_number, block_hash, recorded_at) VALUES (338, 8, '${nonceOf("block-8")}', ${now})`,
    `INSERT INTO set_aside_rows (chain_id, genesis_hash, kind, row_data, reason, set_aside_at) VALUES (338, '${OTHER_GENESIS}', 'penalty', '${legacy}', 'another genesis', ${now})`,
    `INSERT INTO indexed_nonces (chain_id, token, authorizer, nonce, block_number) VALUES (338, '${token}', '${payer}', '${nonceOf("spent")}', 5)`,
    `INSERT INTO nonce_index_progress (chain_id, token, from_block, through_block, updated_at) VALUES (338, '${token}', 1, 8, ${now})`,
    `INSERT INTO payment_identifiers (chain_id, token, payer, id, nonce, digest, created_at) VALUES (338, '${token}', '${payer}', 'pay_old_1', '${nonceOf("old")}', NULL, ${now})`,
  ];
}

/** What the migrated ledger holds and does. */
async function expectMigrated(ledger: Ledger, clock: TestClock): Promise<void> {
  const scope = { chainId: 338, token: TOKEN };
  expect((await ledger.health()).migrations).to.deep.equal({ applied: MIGRATIONS.length, expected: MIGRATIONS.length });
  expect(await ledger.chainHistory(338)).to.deep.equal({ chainId: 338, genesisHash: GENESIS, epoch: 2, checkpoints: [{ number: 8n, hash: nonceOf("block-8"), recordedAt: clock.now }] });
  const [legacy] = await ledger.setAsideRows({ chainId: 338 });
  expect(legacy).to.deep.equal({ chainId: 338, genesisHash: OTHER_GENESIS, kind: "penalty", row: legacyPenalty(clock.now), reason: "another genesis", setAsideAt: clock.now });
  expect(await ledger.pendingHistoryChanges(338, { limit: 10 })).to.deep.equal([]);

  // A change from now on is kept whole, and undone: the index's nonce and the identifier back; the earlier row stays aside.
  clock.advance(1_000);
  expect(await ledger.adoptChainHistory({ chainId: 338, genesisHash: OTHER_GENESIS, epoch: 2, reason: "another genesis" })).to.deep.include({ adopted: true, epoch: 3, indexedNonces: 1, paymentIdentifiers: 1 });
  expect(await ledger.indexedNonce(scope, PAYER, nonceOf("spent"))).to.equal(undefined);
  const [change] = await ledger.pendingHistoryChanges(338, { limit: 10 });
  expect(change).to.deep.include({ genesisHash: GENESIS, everything: true, trail: [{ number: 8n, hash: nonceOf("block-8"), recordedAt: clock.now - 1_000 }] });
  expect(await ledger.restoreChainHistory(338, change!.id, { epoch: 3 })).to.deep.include({ restored: true, epoch: 4, indexedNonces: 1, paymentIdentifiers: 1, leftAside: 0 });
  expect(await ledger.indexedNonce(scope, PAYER, nonceOf("spent"))).to.deep.equal({ authorizer: PAYER, nonce: nonceOf("spent"), blockNumber: 5n });
  expect(await ledger.nonceIndexProgress(scope)).to.deep.equal({ fromBlock: 1n, throughBlock: 8n });
  expect(await ledger.paymentIdentifierBinding(scope, PAYER, "pay_old_1")).to.deep.equal({ nonce: nonceOf("old") });
  expect((await ledger.chainHistory(338))!.genesisHash).to.equal(GENESIS);
  expect((await ledger.setAsideRows({ chainId: 338 })).map((row) => [row.kind, row.changeId])).to.deep.equal([["penalty", undefined]]);
}

describe("ledger migration 0013: changes of a chain's history kept whole, to be undone", function () {
  this.timeout(60_000);
  const dir = mkdtempSync(join(tmpdir(), "x402-history-migration-"));
  let server: TestPostgres | undefined;
  const opened: Ledger[] = [];
  after(async () => {
    await Promise.all(opened.map((ledger) => ledger.close()));
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("comes right after 0012 (appended: a ledger that applied 0012 applies it next)", () => {
    expect(MIGRATIONS.map((migration) => migration.name).slice(BEFORE - 1, BEFORE + 1)).to.deep.equal(["0012_error_codes", "0013_reversible_history"]);
  });

  /** Where an earlier version left a ledger holding `rows`, opened by this one. */
  const places: Array<{ name: string; open(clock: TestClock, rows: readonly string[]): Promise<Ledger> }> = [
    {
      name: "an embedded SQLite file",
      async open(clock, rows) {
        const location = join(dir, `ledger-${opened.length}.db`);
        sqliteLedgerBefore(location, BEFORE, rows);
        return openSqliteLedger({ location, clock: clock.read });
      },
    },
    {
      name: "a PostgreSQL database",
      async open(clock, rows) {
        server ??= await startTestPostgres();
        return openPostgresLedger({ url: await postgresLedgerBefore(server, BEFORE, rows), clock: clock.read, pollMs: 20, poolSize: 2 });
      },
    },
  ];
  for (const place of places) {
    it(`keeps what ${place.name} from before 0013 holds (its rows set aside name no change), and keeps and undoes a change made from then on`, async () => {
      const clock = new TestClock();
      const ledger = await place.open(clock, oldRows(clock.now));
      opened.push(ledger);
      await expectMigrated(ledger, clock);
    });
  }
});
