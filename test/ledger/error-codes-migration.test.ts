import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { expect } from "chai";
import pg from "pg";
import { keccak256, toHex } from "viem";
import { startTestPostgres, type TestPostgres } from "../../src/harness/postgres.js";
import { migratePostgres, openPostgresLedger } from "../../src/ledger/postgres.js";
import { MIGRATIONS } from "../../src/ledger/schema.js";
import { openSqliteLedger } from "../../src/ledger/sqlite.js";
import type { Ledger } from "../../src/ledger/types.js";
import { settlementStatusOf } from "../../src/facilitator/status.js";
import type { SettlementFailureCode } from "../../src/protocol/reasons.js";
import { claimInput, PAYEE, PAYER, sqliteLedgerBefore, TestClock, TOKEN, nonceOf } from "../helpers/ledger.js";

// A ledger written before migration 0012 holds the spec's sentences in `settlements.error`; once migrated it
// holds codes, and answers every status lookup with the very text it answered before. The sentences are
// written out here as the earlier versions wrote them (never taken from the code under test).

const BEFORE = MIGRATIONS.findIndex((migration) => migration.name === "0012_error_codes");
const UNKNOWN_TEXT = "Service unavailable: a note by an operator, no code of ours";

/** One failed row per text an earlier version recorded, the code it must read as, and the status lookup's `error`. */
const FAILED_ROWS: ReadonlyArray<{ id: number; text: string | null; code: SettlementFailureCode | undefined; answered: string | undefined }> = [
  { id: 1, text: "Authorization already used", code: "alreadyUsed", answered: "Authorization already used" },
  { id: 2, text: "Authorization expired", code: "expired", answered: "Authorization expired" },
  { id: 3, text: "Authorization not yet valid", code: "notYetValid", answered: "Authorization not yet valid" },
  { id: 4, text: "ERC20: transfer amount exceeds balance", code: "insufficientBalance", answered: "ERC20: transfer amount exceeds balance" },
  { id: 5, text: "Invalid signature", code: "invalidSignature", answered: "Invalid signature" },
  { id: 6, text: "Transaction failed on-chain", code: "failedOnChain", answered: "Transaction failed on-chain" },
  {
    id: 7,
    text: "Service unavailable: given up before any transaction was sent",
    code: "notSent",
    answered: "Service unavailable: given up before any transaction was sent",
  },
  // No version wrote another text; one that is there all the same reads as the generic failure, and stays for operators.
  { id: 8, text: UNKNOWN_TEXT, code: "failedOnChain", answered: "Transaction failed on-chain" },
  // A failed row without a text: no code, and the lookup answers no `error` (as before).
  { id: 9, text: null, code: undefined, answered: undefined },
];
const SETTLED_ID = 10;
const hashOf = (id: number) => keccak256(toHex(`error-codes:${id}`));

/** The rows, as INSERT statements both SQL dialects take (literal values: test data only). */
function oldRows(now: number): string[] {
  const row = (id: number, status: string, error: string | null, settled = false) =>
    `INSERT INTO settlements (id, chain_id, token, authorizer, nonce, network, payee, value, valid_before, status, tx_hash, block_number,
       block_timestamp, error, created_at, updated_at)
     VALUES (${id}, 338, '${TOKEN.toLowerCase()}', '${PAYER.toLowerCase()}', '${nonceOf(`old-${id}`)}', 'cronos-testnet', '${PAYEE.toLowerCase()}',
       '1000000', '99999999999', '${status}', '${hashOf(id)}', ${settled ? 12 : "NULL"}, ${settled ? 13 : "NULL"},
       ${error === null ? "NULL" : `'${error}'`}, ${now}, ${now})`;
  return [...FAILED_ROWS.map(({ id, text }) => row(id, "failed", text)), row(SETTLED_ID, "settled", null, true)];
}

/** What the migrated ledger answers for every row, and what its columns hold. */
async function expectMigrated(ledger: Ledger, columns: () => Promise<Array<{ id: number; error: string | null; error_code: string | null }>>): Promise<void> {
  for (const { id, code, answered } of FAILED_ROWS) {
    const record = (await ledger.getById(id))!;
    expect([record.status, record.errorCode], `row ${id}`).to.deep.equal(["failed", code]);
    const status = settlementStatusOf(record, "cronos-testnet");
    expect(status.error, `row ${id}: the status lookup's error`).to.equal(answered);
    expect("error" in status, `row ${id}`).to.equal(answered !== undefined);
  }
  const settled = (await ledger.getById(SETTLED_ID))!;
  expect([settled.status, settled.errorCode, settlementStatusOf(settled, "cronos-testnet").error]).to.deep.equal(["settled", undefined, undefined]);

  // The codes are stored; the known sentences are gone from `error`, the unknown one stays readable.
  expect(await columns()).to.deep.equal([
    ...FAILED_ROWS.map(({ id, text, code }) => ({ id, error: text === UNKNOWN_TEXT ? UNKNOWN_TEXT : null, error_code: code ?? null })),
    { id: SETTLED_ID, error: null, error_code: null },
  ]);

  // A migrated row behaves as a new one: the one given up before anything was sent is claimed again, code and text cleared.
  const again = await ledger.claim(claimInput({ key: { chainId: 338, token: TOKEN, authorizer: PAYER, nonce: nonceOf("old-7") } }));
  expect(again.outcome).to.equal("claimed");
  expect(again.outcome === "claimed" && [again.record.id, again.record.attempts, again.record.errorCode]).to.deep.equal([7, 2, undefined]);
  const unknown = await ledger.claim(claimInput({ key: { chainId: 338, token: TOKEN, authorizer: PAYER, nonce: nonceOf("old-8") } }));
  expect(unknown.outcome).to.equal("claimed");
  expect((await columns()).find((row) => row.id === 8)).to.deep.equal({ id: 8, error: null, error_code: null });
}

const COLUMNS = `SELECT id, error, error_code FROM settlements ORDER BY id`;

describe("ledger migration 0012: failed rows store codes, and answer the texts they answered before", () => {
  it("comes right after 0011 (appended: a ledger that applied 0011 applies it next)", () => {
    expect(MIGRATIONS.map((migration) => migration.name).slice(BEFORE - 1, BEFORE + 1)).to.deep.equal(["0011_chain_identity", "0012_error_codes"]);
  });

  describe("embedded SQLite", () => {
    let dir: string;
    let ledger: Ledger | undefined;
    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), "x402-error-codes-"));
    });
    afterEach(async () => {
      await ledger?.close();
      ledger = undefined;
      rmSync(dir, { recursive: true, force: true });
    });

    it("maps every sentence a file from before 0012 holds to its code, keeps an unknown text, and answers each lookup as before", async () => {
      const clock = new TestClock();
      const location = join(dir, "ledger.db");
      sqliteLedgerBefore(location, BEFORE, oldRows(clock.now));

      ledger = openSqliteLedger({ location, clock: clock.read });
      expect((await ledger.health()).migrations).to.deep.equal({ applied: MIGRATIONS.length, expected: MIGRATIONS.length });
      await expectMigrated(ledger, async () => {
        const file = new DatabaseSync(location, { readOnly: true });
        try {
          return file.prepare(COLUMNS).all().map((row) => ({ id: Number(row.id), error: row.error as string | null, error_code: row.error_code as string | null }));
        } finally {
          file.close();
        }
      });
    });

    it("reads a code it does not know (written by hand) as the generic on-chain failure", async () => {
      const clock = new TestClock();
      const location = join(dir, "ledger.db");
      ledger = openSqliteLedger({ location, clock: clock.read });
      const claimed = await ledger.claim(claimInput({ label: "hand" }));
      if (claimed.outcome !== "claimed") throw new Error("not claimed");
      await ledger.markFailed(claimed.record.id, { code: "expired" });
      const file = new DatabaseSync(location);
      file.prepare(`UPDATE settlements SET error_code = 'meltedDown' WHERE id = ?`).run(claimed.record.id);
      file.close();
      expect((await ledger.getById(claimed.record.id))?.errorCode).to.equal("failedOnChain");
    });
  });

  describe("PostgreSQL", () => {
    let server: TestPostgres;
    let ledger: Ledger | undefined;
    before(async () => {
      server = await startTestPostgres();
    });
    after(async () => {
      await server?.stop();
    });
    afterEach(async () => {
      await ledger?.close();
      ledger = undefined;
    });

    it("maps every sentence a database from before 0012 holds to its code, keeps an unknown text, and answers each lookup as before", async () => {
      const clock = new TestClock();
      const url = await server.createDatabase();
      await migratePostgres(url, { through: MIGRATIONS[BEFORE - 1]!.name });
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const applied = await client.query(`SELECT name FROM x402_ledger_migrations ORDER BY name`);
        expect(applied.rows.map((row) => row.name)).to.deep.equal(MIGRATIONS.slice(0, BEFORE).map((migration) => migration.name));
        for (const statement of oldRows(clock.now)) await client.query(statement);

        ledger = await openPostgresLedger({ url, clock: clock.read, pollMs: 20, poolSize: 2 });
        expect((await ledger.health()).migrations).to.deep.equal({ applied: MIGRATIONS.length, expected: MIGRATIONS.length });
        await expectMigrated(ledger, async () =>
          (await client.query(COLUMNS)).rows.map((row) => ({ id: Number(row.id), error: row.error as string | null, error_code: row.error_code as string | null })),
        );
      } finally {
        await client.end();
      }
    });
  });
});
