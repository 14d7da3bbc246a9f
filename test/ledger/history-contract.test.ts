import { expect } from "chai";
import type { Hex } from "viem";
import type { Ledger, SettlementRecord } from "../../src/ledger/types.js";
import { claimInput, nonceOf, PAYEE, PAYER, postgresBackend, RELAYER, signedTx, sqliteFileBackend, sqliteMemoryBackend, TestClock, TOKEN, type LedgerStore } from "../helpers/ledger.js";

// A change of a chain's history sets rows aside and deletes nothing (migration 0013): undone, every row is back as it
// was. Held to the same contract on every backend.

const GENESIS = `0x${"11".repeat(32)}` as Hex;
const OTHER_GENESIS = `0x${"22".repeat(32)}` as Hex;
const block = (number: number, tag = "a"): { number: bigint; hash: Hex } => ({ number: BigInt(number), hash: nonceOf(`block-${tag}-${number}`) });
const scope = { chainId: 338, token: TOKEN };
const mainnet = { chainId: 25, token: TOKEN };

for (const backend of [sqliteFileBackend(), sqliteMemoryBackend(), postgresBackend()]) {
  describe(`ledger contract, changes of a chain's history undone: ${backend.name}`, function () {
    this.timeout(60_000);
    let clock: TestClock;
    let store: LedgerStore;
    let ledger: Ledger;

    before(() => backend.setUp());
    after(() => backend.tearDown());
    beforeEach(async () => {
      clock = new TestClock();
      store = await backend.store(clock);
      ledger = await store.open();
    });
    afterEach(() => store.dispose());

    /** A settled row of `label` on `chainId`, mined in block `at`. */
    async function settledRow(label: string, at: number, chainId = 338): Promise<SettlementRecord> {
      const claimed = await ledger.claim({ ...claimInput({ label }), key: { ...claimInput({ label }).key, chainId } });
      if (claimed.outcome !== "claimed") throw new Error(`expected a claim, got ${claimed.outcome}`);
      await ledger.acquireLease(RELAYER, "instance-a", 60_000);
      const tx = signedTx(`${chainId}:${label}`);
      await ledger.recordBroadcast({ id: claimed.record.id, owner: "instance-a", hash: tx.hash, raw: tx.raw, relayer: RELAYER, relayerNonce: at, checkAfterMs: 5_000 });
      return ledger.markSettled(claimed.record.id, { txHash: tx.hash, blockNumber: BigInt(at), blockTimestamp: BigInt(at) });
    }
    const catalogEntry = (resource: string, at: string) => ({
      entry: { resource, type: "http", x402Version: 2, accepts: [{ scheme: "exact", network: "eip155:338", payTo: PAYEE, amount: "10000" }], lastUpdated: at },
      payTo: PAYEE,
      payer: PAYER,
      words: ["weather", "forecast"],
    });
    const bounds = { maxEntries: 100, maxEntriesPerSeller: 100 };
    /** Everything the ledger serves of chain 338 (and 25), read whole. */
    async function served(ids: readonly number[]) {
      return {
        rows: await Promise.all(ids.map((id) => ledger.getById(id))),
        penalty: await ledger.activePenalty(scope, [{ kind: "payer", subject: PAYER }], 0n),
        binding: await ledger.paymentIdentifierBinding(scope, PAYER, "pay_history_1"),
        listed: (await ledger.listDiscoveryResources({ limit: 10, offset: 0, maxBytes: 1 << 20 })).items,
        total: (await ledger.listDiscoveryResources({ limit: 10, offset: 0, maxBytes: 1 << 20, filter: { network: "eip155:338" } })).total,
        found: (await ledger.searchDiscoveryResources({ words: ["forecast"], limit: 10, offset: 0, maxBytes: 1 << 20 })).items,
        nonces: await ledger.indexedNonces(scope, { limit: 10 }),
        progress: await ledger.nonceIndexProgress(scope),
        elsewhere: await ledger.indexedNonces(mainnet, { limit: 10 }),
      };
    }
    /** A chain with every kind of row: settled (with its transaction) and in-flight rows, a penalty, an identifier, a catalog entry, the index's nonces. */
    async function busyChain(): Promise<number[]> {
      await ledger.adoptChainHistory({ chainId: 338, genesisHash: GENESIS, common: block(0), epoch: undefined, reason: "first sight" });
      const settled = await settledRow("settled", 7);
      const claimed = await ledger.claim(claimInput({ label: "in-flight" }));
      if (claimed.outcome !== "claimed") throw new Error("not claimed");
      clock.advance(1_000);
      await ledger.penalize({ ...scope, kind: "payer", subject: PAYER, until: 9_999_999_999n, txHash: signedTx("penalty").hash });
      await ledger.bindPaymentIdentifier(scope, PAYER, "pay_history_1", { nonce: nonceOf("settled"), digest: nonceOf("digest") });
      await ledger.recordDiscoveryPayment(catalogEntry("https://s.example/weather", new Date(clock.now).toISOString()), bounds);
      await ledger.recordDiscoveryPayment({ ...catalogEntry("https://s.example/weather", new Date(clock.now).toISOString()), payer: PAYEE }, bounds);
      await ledger.openNonceIndex(scope, 1n);
      await ledger.recordIndexedNonces(scope, [5, 7].map((n) => ({ authorizer: PAYER, nonce: nonceOf(`spent-${n}`), blockNumber: BigInt(n) })), { fromBlock: 1n, throughBlock: 8n, throughHash: block(8).hash });
      await ledger.openNonceIndex(mainnet, 1n);
      await ledger.recordIndexedNonces(mainnet, [{ authorizer: PAYER, nonce: nonceOf("mainnet"), blockNumber: 3n }], { fromBlock: 1n, throughBlock: 4n });
      return [settled.id, claimed.record.id];
    }

    it("with nothing in common: keeps the change whole, and undone brings every row back as it was, the genesis too; the epoch grows", async () => {
      const ids = await busyChain();
      const before = await served(ids);
      expect(before.listed).to.have.length(1);
      const trail = (await ledger.chainHistory(338))!.checkpoints;
      clock.advance(1_000);
      expect(await ledger.adoptChainHistory({ chainId: 338, genesisHash: OTHER_GENESIS, epoch: 1, reason: "another genesis" })).to.deep.equal({
        adopted: true,
        epoch: 2,
        settlements: 2,
        penalties: 1,
        paymentIdentifiers: 1,
        catalogEntries: 1,
        indexedNonces: 2,
      });
      const aside = await served(ids);
      expect(aside).to.deep.equal({ rows: [undefined, undefined], penalty: undefined, binding: undefined, listed: [], total: 0, found: [], nonces: [], progress: undefined, elsewhere: before.elsewhere });
      const [change, ...others] = await ledger.pendingHistoryChanges(338, { limit: 10 });
      expect(others).to.deep.equal([]);
      expect(change).to.deep.include({ chainId: 338, genesisHash: GENESIS, everything: true, reason: "another genesis", changedAt: clock.now, trail, disproven: [] });
      expect((await ledger.setAsideRows({ chainId: 338 })).every((row) => row.changeId === change!.id)).to.equal(true);

      expect(await ledger.restoreChainHistory(338, change!.id, { epoch: 2 })).to.deep.equal({
        restored: true,
        epoch: 3,
        settlements: 2,
        penalties: 1,
        paymentIdentifiers: 1,
        catalogEntries: 1,
        indexedNonces: 2,
        leftAside: 0,
      });
      expect(await served(ids)).to.deep.equal(before);
      expect(await ledger.chainHistory(338)).to.deep.equal({ chainId: 338, genesisHash: GENESIS, epoch: 3, checkpoints: trail });
      expect(await ledger.setAsideRows({ chainId: 338 })).to.deep.equal([]);
      expect(await ledger.pendingHistoryChanges(338, { limit: 10 })).to.deep.equal([]);
      // Once: a change undone is no longer pending, and the ids go on after the rows that came back.
      expect(await ledger.restoreChainHistory(338, change!.id, { epoch: 3 })).to.deep.equal({ restored: false });
      expect((await settledRow("after", 9)).id).to.be.greaterThan(Math.max(...ids));
    });

    it("with a common block: undone brings back the rows after it, the index's progress and nonces, and the trail's checkpoints", async () => {
      const ids = await busyChain();
      await ledger.recordCheckpoint(338, block(6));
      const before = await served(ids);
      const trail = (await ledger.chainHistory(338))!.checkpoints;
      const since = clock.now - 1;
      clock.advance(1_000);
      const adopted = await ledger.adoptChainHistory({
        chainId: 338,
        genesisHash: GENESIS,
        common: block(6),
        since,
        commonTime: since,
        disproven: [ids[0]!],
        epoch: 1,
        reason: "reverted",
      });
      expect(adopted).to.deep.equal({ adopted: true, epoch: 1, settlements: 1, penalties: 1, paymentIdentifiers: 1, catalogEntries: 1, indexedNonces: 1 });
      expect(await ledger.nonceIndexProgress(scope)).to.deep.equal({ fromBlock: 1n, throughBlock: 6n });
      const [change] = await ledger.pendingHistoryChanges(338, { limit: 10 });
      expect(change).to.deep.include({ everything: false, common: block(6), trail: trail.filter((c) => c.number > 6n) });
      expect(change!.disproven.map((row) => [row.id, row.txHash, row.blockNumber])).to.deep.equal([[ids[0], before.rows[0]!.txHash, 7n]]);
      // The index went on meanwhile: a nonce it read again, and its progress.
      await ledger.recordIndexedNonces(scope, [{ authorizer: PAYER, nonce: nonceOf("spent-7"), blockNumber: 7n }], { fromBlock: 7n, throughBlock: 7n });

      const restored = await ledger.restoreChainHistory(338, change!.id, { epoch: 1 });
      expect(restored).to.deep.equal({ restored: true, epoch: 2, settlements: 1, penalties: 1, paymentIdentifiers: 1, catalogEntries: 1, indexedNonces: 0, leftAside: 0 });
      expect(await served(ids)).to.deep.equal(before);
      expect((await ledger.chainHistory(338))!.checkpoints).to.deep.equal(trail);
    });

    it("leaves aside a row whose place is taken since (the authorization claimed afresh, the identifier bound again, the entry listed again), keeps a penalty's later end", async () => {
      const ids = await busyChain();
      await ledger.adoptChainHistory({ chainId: 338, genesisHash: OTHER_GENESIS, epoch: 1, reason: "another genesis" });
      clock.advance(1_000);
      const again = await ledger.claim(claimInput({ label: "settled" }));
      expect(again.outcome).to.equal("claimed");
      await ledger.bindPaymentIdentifier(scope, PAYER, "pay_history_1", { nonce: nonceOf("new") });
      await ledger.penalize({ ...scope, kind: "payer", subject: PAYER, until: 5n });
      await ledger.recordDiscoveryPayment({ ...catalogEntry("https://s.example/weather", new Date(clock.now).toISOString()), words: ["new"] }, bounds);
      const [change] = await ledger.pendingHistoryChanges(338, { limit: 1 });
      // Refused on a stale epoch, changing nothing.
      expect(await ledger.restoreChainHistory(338, change!.id, { epoch: 1 })).to.deep.equal({ restored: false });
      expect(await ledger.restoreChainHistory(338, change!.id, { epoch: 2 })).to.deep.include({ restored: true, settlements: 1, penalties: 1, paymentIdentifiers: 0, catalogEntries: 0, leftAside: 4 });
      expect((await ledger.getById(again.outcome === "claimed" ? again.record.id : 0))?.status).to.equal("claimed");
      expect((await ledger.getById(ids[0]!))).to.equal(undefined);
      expect((await ledger.getById(ids[1]!))?.status).to.equal("claimed");
      expect(await ledger.paymentIdentifierBinding(scope, PAYER, "pay_history_1")).to.deep.equal({ nonce: nonceOf("new") });
      expect((await ledger.activePenalty(scope, [{ kind: "payer", subject: PAYER }], 0n))?.until).to.equal(9_999_999_999n);
      expect((await ledger.searchDiscoveryResources({ words: ["new"], limit: 10, offset: 0, maxBytes: 1 << 20 })).items).to.have.length(1);
      expect((await ledger.listDiscoveryResources({ limit: 10, offset: 0, maxBytes: 1 << 20 })).total).to.equal(1);
      // Kept aside, never lost: the settlement and its transaction, the identifier, the entry.
      expect((await ledger.setAsideRows({ chainId: 338 })).map((row) => row.kind).sort()).to.deep.equal(["catalog_entry", "payment_identifier", "settlement", "settlement_transaction"]);
      expect(await ledger.pendingHistoryChanges(338, { limit: 1 })).to.deep.equal([]);
    });
  });
}
