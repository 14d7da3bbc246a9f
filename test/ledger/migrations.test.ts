import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { expect } from "chai";
import { keccak256, toHex } from "viem";
import { MIGRATIONS, SQLITE_SCHEMA } from "../../src/ledger/schema.js";
import { openSqliteLedger } from "../../src/ledger/sqlite.js";
import type { Ledger } from "../../src/ledger/types.js";
import { PAYEE, PAYER, RELAYER, TOKEN, TestClock, nonceOf, openDatabaseFile } from "../helpers/ledger.js";

// Ledger files written by earlier facilitators open in this one with their rows intact and take the new
// state: one from before migration 0002 (transactions could not be `replaced`), one from before 0005, one from
// before 0007.

const hashOf = (label: string) => keccak256(toHex(`tx:${label}`));

describe("ledger migrations: embedded files written by earlier versions", () => {
  let dir: string;
  let ledger: Ledger | undefined;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "x402-migrate-"));
  });
  afterEach(async () => {
    await ledger?.close();
    ledger = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  it("a file from before 0002 (replaced transactions) keeps every row and transaction id, continues the ids after them, and records a replaced version", async () => {
    const clock = new TestClock();
    const location = join(dir, "ledger.db");
    const old = openDatabaseFile(location);
    for (const statement of MIGRATIONS[0]!.statements(SQLITE_SCHEMA)) old.exec(statement);
    old.exec("PRAGMA user_version = 1");
    const now = clock.now;
    old
      .prepare(
        `INSERT INTO settlements (id, chain_id, token, authorizer, nonce, network, payee, value, valid_before, status, owner, tx_hash, relayer,
           relayer_nonce, created_at, updated_at) VALUES (3, 338, ?, ?, ?, 'cronos-testnet', ?, '1000000', '99999999999', 'sent', 'instance-a', ?, ?, 7, ?, ?)`,
      )
      .run(TOKEN.toLowerCase(), PAYER.toLowerCase(), nonceOf("old"), PAYEE.toLowerCase(), hashOf("first"), RELAYER.toLowerCase(), now, now);
    old
      .prepare(
        `INSERT INTO settlement_transactions (id, hash, settlement_id, chain_id, relayer, relayer_nonce, raw, state, fee_cap, created_at, updated_at)
         VALUES (41, ?, 3, 338, ?, 7, '0x01', 'accepted', '1000', ?, ?)`,
      )
      .run(hashOf("first"), RELAYER.toLowerCase(), now, now);
    old.close();

    ledger = openSqliteLedger({ location, clock: clock.read });
    expect((await ledger.health()).migrations).to.deep.equal({ applied: MIGRATIONS.length, expected: MIGRATIONS.length });
    const before = (await ledger.getById(3))!;
    expect(before).to.deep.include({ status: "sent", txHash: hashOf("first"), relayerNonce: 7 });
    expect(before.transactions.map((t) => [t.hash, t.state, t.feeCap])).to.deep.equal([[hashOf("first"), "accepted", 1000n]]);

    await ledger.acquireLease(RELAYER, "instance-a", 60_000);
    const replacement = { id: 3, holder: "instance-a", hash: hashOf("second"), raw: "0x02" as const, relayer: RELAYER, relayerNonce: 7, feeCap: 1125n };
    expect(await ledger.recordReplacement(replacement)).to.equal(true);
    const settled = await ledger.markSettled(3, { txHash: hashOf("second"), blockNumber: 9n, blockTimestamp: 10n });
    expect(settled.transactions.map((t) => [t.hash, t.state])).to.deep.equal([
      [hashOf("first"), "replaced"],
      [hashOf("second"), "mined"],
    ]);
    const file = new DatabaseSync(location, { readOnly: true });
    try {
      expect(file.prepare(`SELECT id FROM settlement_transactions ORDER BY id`).all().map((row) => Number(row.id))).to.deep.equal([41, 42]);
    } finally {
      file.close();
    }
  });

  // A ledger file written before migration 0005 (the nonce index) opens with its rows, and an empty index.
  it("a file from before 0005 (nonce index) keeps its payment identifiers and opens, records and pages the nonce index", async () => {
    const clock = new TestClock();
    const location = join(dir, "ledger.db");
    const scope = { chainId: 338, token: TOKEN };
    const old = openDatabaseFile(location);
    for (const migration of MIGRATIONS.slice(0, 4)) for (const statement of migration.statements(SQLITE_SCHEMA)) old.exec(statement);
    old.exec("PRAGMA user_version = 4");
    old
      .prepare(`INSERT INTO payment_identifiers (chain_id, token, payer, id, nonce, created_at) VALUES (338, ?, ?, 'pay_0123456789abcdef', ?, ?)`)
      .run(TOKEN.toLowerCase(), PAYER.toLowerCase(), nonceOf("old"), clock.now);
    old.close();

    ledger = openSqliteLedger({ location, clock: clock.read });
    expect((await ledger.health()).migrations).to.deep.equal({ applied: MIGRATIONS.length, expected: MIGRATIONS.length });
    expect(await ledger.paymentIdentifierBinding(scope, PAYER, "pay_0123456789abcdef")).to.deep.equal({ nonce: nonceOf("old") });
    expect(await ledger.nonceIndexProgress(scope)).to.equal(undefined);
    expect(await ledger.openNonceIndex(scope, 10n)).to.deep.equal({ fromBlock: 10n, throughBlock: 9n });
    expect(await ledger.recordIndexedNonces(scope, [{ authorizer: PAYER, nonce: nonceOf("used"), blockNumber: 12n }], { fromBlock: 0n, throughBlock: 20n })).to.deep.equal({
      fromBlock: 10n,
      throughBlock: 20n,
    });
    expect(await ledger.indexedNonces(scope, { limit: 10 })).to.deep.equal([{ authorizer: PAYER, nonce: nonceOf("used"), blockNumber: 12n }]);
  });
  // A ledger file written before migration 0007 (the catalog owned by its sellers): its old catalog is not carried
  // over (its entries may have come from verifies), its settlements are, and the new catalog takes entries.
  it("a file from before 0007 (owned catalog) drops the old catalog's rows, keeps its settlements, and records and finds new entries", async () => {
    const clock = new TestClock();
    const location = join(dir, "ledger.db");
    const old = openDatabaseFile(location);
    const before = MIGRATIONS.findIndex((migration) => migration.name.endsWith("_owned_catalog"));
    for (const migration of MIGRATIONS.slice(0, before)) for (const statement of migration.statements(SQLITE_SCHEMA)) old.exec(statement);
    old.exec(`PRAGMA user_version = ${before}`);
    old
      .prepare(`INSERT INTO discovery_resources (resource, method, type, entry, last_updated) VALUES ('https://victim.example/weather', 'GET', 'http', ?, 1)`)
      .run(JSON.stringify({ resource: "https://victim.example/weather", type: "http", x402Version: 2, accepts: [{ payTo: PAYEE }], lastUpdated: "2026-01-01T00:00:00.000Z" }));
    old
      .prepare(
        `INSERT INTO settlements (chain_id, token, authorizer, nonce, network, payee, value, valid_before, status, tx_hash, created_at, updated_at)
         VALUES (338, ?, ?, ?, 'cronos-testnet', ?, '1', '2000000000', 'settled', ?, 1, 1)`,
      )
      .run(TOKEN.toLowerCase(), PAYER.toLowerCase(), nonceOf("kept"), PAYEE.toLowerCase(), hashOf("kept"));
    old.close();

    ledger = openSqliteLedger({ location, clock: clock.read });
    expect((await ledger.health()).migrations).to.deep.equal({ applied: MIGRATIONS.length, expected: MIGRATIONS.length });
    expect(await ledger.listDiscoveryResources({ limit: 10, offset: 0, maxBytes: 1 << 20 })).to.deep.equal({ items: [], total: 0 });
    expect((await ledger.findByTxHash(hashOf("kept")))?.status).to.equal("settled");
    const entry = { resource: "https://seller.example/weather", type: "http", x402Version: 2, accepts: [{ scheme: "exact", network: "eip155:338", payTo: PAYEE }], lastUpdated: "2026-01-01T00:00:00.000Z" };
    await ledger.recordDiscoveryPayment({ entry, payTo: PAYEE, payer: PAYER, words: ["weather"] }, { maxEntries: 10, maxEntriesPerSeller: 10 });
    expect((await ledger.searchDiscoveryResources({ words: ["weather"], limit: 10, offset: 0, maxBytes: 1 << 20 })).items.map((item) => JSON.parse(item).resource)).to.deep.equal([
      "https://seller.example/weather",
    ]);
    expect(await ledger.deleteFinishedSettlements(2, 10)).to.equal(1);
  });

  // A ledger file written before the chain-identity migration opens with its rows, knowing no chain's history yet.
  it("a file from before chain identity keeps its settlements and nonce index, and knows no chain's history until one is adopted", async () => {
    const clock = new TestClock();
    const location = join(dir, "ledger.db");
    const scope = { chainId: 338, token: TOKEN };
    const old = openDatabaseFile(location);
    const before = MIGRATIONS.findIndex((migration) => migration.name.endsWith("_chain_identity"));
    for (const migration of MIGRATIONS.slice(0, before)) for (const statement of migration.statements(SQLITE_SCHEMA)) old.exec(statement);
    old.exec(`PRAGMA user_version = ${before}`);
    old
      .prepare(
        `INSERT INTO settlements (id, chain_id, token, authorizer, nonce, network, payee, value, valid_before, status, tx_hash, block_number, block_timestamp,
           created_at, updated_at) VALUES (1, 338, ?, ?, ?, 'cronos-testnet', ?, '1000000', '99999999999', 'settled', ?, 12, 13, ?, ?)`,
      )
      .run(TOKEN.toLowerCase(), PAYER.toLowerCase(), nonceOf("old"), PAYEE.toLowerCase(), hashOf("old"), clock.now, clock.now);
    old.prepare(`INSERT INTO nonce_index_progress (chain_id, token, from_block, through_block, updated_at) VALUES (338, ?, 1, 20, ?)`).run(TOKEN.toLowerCase(), clock.now);
    old.close();

    ledger = openSqliteLedger({ location, clock: clock.read });
    expect((await ledger.health()).migrations).to.deep.equal({ applied: MIGRATIONS.length, expected: MIGRATIONS.length });
    expect((await ledger.getById(1))?.status).to.equal("settled");
    expect(await ledger.nonceIndexProgress(scope)).to.deep.equal({ fromBlock: 1n, throughBlock: 20n });
    expect(await ledger.chainHistory(338)).to.equal(undefined);
    expect((await ledger.settledAfter(338, { afterBlock: 11n, limit: 5 })).map((r) => r.id)).to.deep.equal([1]);
  });
});
