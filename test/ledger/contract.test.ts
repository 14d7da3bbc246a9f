import { expect } from "chai";
import type { Address, Hex } from "viem";
import { CHECKPOINT_LIMIT, IllegalTransitionError, LedgerError, type IndexedNonce, type Ledger, type SettlementRecord, type TokenScope } from "../../src/ledger/types.js";
import { MIGRATIONS } from "../../src/ledger/schema.js";
import {
  claimInput,
  nonceOf,
  PAYER,
  PAYEE,
  postgresBackend,
  RELAYER,
  signedTx,
  sqliteFileBackend,
  sqliteMemoryBackend,
  TestClock,
  TOKEN,
  type LedgerStore,
} from "../helpers/ledger.js";

const OTHER_RELAYER = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955" as const;
const OTHER_PAYER: Address = "0x90F79bf6EB2c4f870365E785982E1f101E93b906";

/** Claims as instance-a, takes the relayer's lease and records one transaction: the row is `sent`. */
async function sentRow(ledger: Ledger, label: string | number, owner = "instance-a"): Promise<SettlementRecord & { hash: Hex }> {
  const claimed = await ledger.claim(claimInput({ label, owner }));
  if (claimed.outcome !== "claimed") throw new Error(`expected a claim, got ${claimed.outcome}`);
  await ledger.acquireLease(RELAYER, owner, 60_000);
  const tx = signedTx(label);
  const recorded = await ledger.recordBroadcast({ id: claimed.record.id, owner, hash: tx.hash, raw: tx.raw, relayer: RELAYER, relayerNonce: 7, checkAfterMs: 5_000 });
  expect(recorded).to.equal(true);
  return { ...(await ledger.getById(claimed.record.id))!, hash: tx.hash };
}

for (const backend of [sqliteFileBackend(), sqliteMemoryBackend(), postgresBackend()]) {
  describe(`ledger contract: ${backend.name}`, function () {
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

    /** Three handles on one store (three connection pools where the backend has them). */
    const threeHandles = async () => [ledger, await store.open(), await store.open()];
    /**
     * `ms` pass (the ledger's clock) and `holder`'s lease of `relayer` lapses with them: by the clock where leases go by
     * the ledger's (SQLite); where they go by the database's (PostgreSQL), which a test cannot move, the lease is cut to
     * end now (taken again with no time to live).
     */
    async function lapse(holder: string, ms: number, relayer: Address = RELAYER): Promise<void> {
      clock.advance(ms);
      if (backend.leaseClock === "database") expect(await ledger.acquireLease(relayer, holder, 0)).to.deep.include({ holder });
    }

    describe("claims", () => {
      it("claims a new authorization and reads it back exactly", async () => {
        const input = claimInput({ label: "exact" });
        const result = await ledger.claim(input);
        expect(result.outcome).to.equal("claimed");
        if (result.outcome !== "claimed") return;
        const { id, createdAt, updatedAt, ...rest } = result.record;
        expect(id).to.be.a("number");
        expect(createdAt).to.equal(clock.now);
        expect(updatedAt).to.equal(clock.now);
        expect(rest).to.deep.equal({
          key: { chainId: 338, token: TOKEN, authorizer: PAYER, nonce: nonceOf("exact") },
          network: "cronos-testnet",
          payee: PAYEE,
          value: 1_000_000n,
          validBefore: 2_000_000_000n,
          status: "claimed",
          owner: "instance-a",
          ownerExpiresAt: clock.now + 30_000,
          deadlineAt: clock.now + 120_000,
          call: { to: TOKEN, data: "0xe3ee160e", gas: 90_000n },
          attempts: 1,
          transactions: [],
        });
        expect(await ledger.getById(id)).to.deep.equal(result.record);
        expect(await ledger.get(input.key)).to.deep.equal(result.record);
      });

      it("matches keys case-insensitively: a checksummed and a lower-case address are one authorization", async () => {
        const first = await ledger.claim(claimInput({ label: "case" }));
        const input = claimInput({ label: "case" });
        const second = await ledger.claim({ ...input, key: { ...input.key, authorizer: PAYER.toLowerCase() as Hex, nonce: input.key.nonce.toUpperCase().replace("0X", "0x") as Hex } });
        expect(first.outcome).to.equal("claimed");
        expect(second.outcome).to.equal("exists");
        if (first.outcome === "claimed" && second.outcome === "exists") expect(second.record.id).to.equal(first.record.id);
      });

      it("answers a second claim of the same authorization with the existing row and keeps one row", async () => {
        const first = await ledger.claim(claimInput({ label: "twice" }));
        const second = await ledger.claim(claimInput({ label: "twice", owner: "instance-b" }));
        expect(second.outcome).to.equal("exists");
        if (first.outcome !== "claimed" || second.outcome !== "exists") return;
        expect(second.record).to.deep.equal(first.record);
        expect(await ledger.findByAuthorization(338, PAYER, nonceOf("twice"))).to.have.length(1);
      });

      it("lets exactly one of 50 concurrent claims of one authorization over three handles win", async () => {
        const handles = await threeHandles();
        const results = await Promise.all(
          Array.from({ length: 50 }, (_, i) => handles[i % 3]!.claim(claimInput({ label: "race", owner: `instance-${i % 3}` }))),
        );
        const winners = results.filter((r) => r.outcome === "claimed");
        expect(winners).to.have.length(1);
        const id = winners[0]!.outcome === "claimed" ? winners[0]!.record.id : -1;
        const others = results.filter((r) => r.outcome === "exists");
        expect(others).to.have.length(49);
        expect(new Set(others.map((r) => (r.outcome === "exists" ? r.record.id : -1)))).to.deep.equal(new Set([id]));
        expect(await ledger.findByAuthorization(338, PAYER, nonceOf("race"))).to.have.length(1);
      });

      it("refuses a claim whose value and the payer's settlements in flight exceed the balance read", async () => {
        expect((await ledger.claim(claimInput({ label: "r1", value: 6n, balance: 10n }))).outcome).to.equal("claimed");
        expect(await ledger.claim(claimInput({ label: "r2", value: 5n, balance: 10n }))).to.deep.equal({ outcome: "overBalance", inFlight: 6n });
        expect((await ledger.claim(claimInput({ label: "r3", value: 4n, balance: 10n }))).outcome).to.equal("claimed");
        // Another token or chain is another reservation; a claim without a balance is not checked.
        const other = claimInput({ label: "r4", value: 10n, balance: 10n });
        expect((await ledger.claim({ ...other, key: { ...other.key, chainId: 25 } })).outcome).to.equal("claimed");
        expect((await ledger.claim(claimInput({ label: "r5", value: 10n }))).outcome).to.equal("claimed");
      });

      it("counts a settlement mined after the block the balance was read at, which that balance does not show", async () => {
        const first = await sentRow(ledger, "m1");
        await ledger.markSettled(first.id, { txHash: first.hash, blockNumber: 11n, blockTimestamp: 1n });
        // value 1_000_000 each: the balance read at block 10 still holds the first payment's funds.
        expect(await ledger.claim(claimInput({ label: "m2", balance: 1_500_000n, balanceBlock: 10n }))).to.deep.equal({ outcome: "overBalance", inFlight: 1_000_000n });
        expect((await ledger.claim(claimInput({ label: "m2", balance: 1_500_000n, balanceBlock: 11n }))).outcome).to.equal("claimed");
      });

      it("releases a reservation when its settlement fails or settles", async () => {
        const first = await ledger.claim(claimInput({ label: "f1", value: 10n, balance: 10n }));
        expect((await ledger.claim(claimInput({ label: "f2", value: 10n, balance: 10n }))).outcome).to.equal("overBalance");
        if (first.outcome !== "claimed") return;
        await ledger.markFailed(first.record.id, { code: "failedOnChain" });
        expect((await ledger.claim(claimInput({ label: "f2", value: 10n, balance: 10n }))).outcome).to.equal("claimed");
      });

      it("reserves atomically: of five concurrent claims each for the whole balance, over three handles, one wins", async () => {
        const handles = await threeHandles();
        const results = await Promise.all(
          Array.from({ length: 5 }, (_, i) => handles[i % 3]!.claim(claimInput({ label: `whole-${i}`, value: 100n, balance: 100n }))),
        );
        expect(results.filter((r) => r.outcome === "claimed")).to.have.length(1);
        expect(results.filter((r) => r.outcome === "overBalance")).to.have.length(4);
      });

      it("claims a failed row again, keeping its transactions as history", async () => {
        const row = await sentRow(ledger, "again");
        await ledger.markFailed(row.id, { code: "failedOnChain" });
        clock.advance(1_000);
        const again = await ledger.claim(claimInput({ label: "again", owner: "instance-b" }));
        expect(again.outcome).to.equal("claimed");
        if (again.outcome !== "claimed") return;
        expect(again.record.id).to.equal(row.id);
        expect(again.record.attempts).to.equal(2);
        expect(again.record.owner).to.equal("instance-b");
        expect(again.record.status).to.equal("claimed");
        expect(again.record.errorCode).to.equal(undefined);
        expect(again.record.txHash).to.equal(undefined);
        expect(again.record.transactions.map((t) => t.hash)).to.deep.equal([row.hash]);
      });
    });

    describe("state transitions", () => {
      it("moves claimed → sent → settled, recording the transaction before its broadcast", async () => {
        const row = await sentRow(ledger, "life");
        expect(row.status).to.equal("sent");
        expect(row.txHash).to.equal(row.hash);
        expect(row.relayer).to.equal(RELAYER);
        expect(row.relayerNonce).to.equal(7);
        expect(row.transactions).to.have.length(1);
        expect(row.transactions[0]).to.deep.include({ hash: row.hash, relayer: RELAYER, relayerNonce: 7, raw: signedTx("life").raw, state: "signed" });
        await ledger.markTransaction(row.hash, "accepted");
        expect((await ledger.getById(row.id))!.transactions[0]!.state).to.equal("accepted");
        const settled = await ledger.markSettled(row.id, { txHash: row.hash, blockNumber: 42n, blockTimestamp: 1_767_225_600n });
        expect(settled).to.deep.include({ status: "settled", txHash: row.hash, blockNumber: 42n, blockTimestamp: 1_767_225_600n });
        expect(settled.transactions[0]!.state).to.equal("mined");
      });

      it("keeps every transaction hash recorded for a row, and finds the row by each", async () => {
        const row = await sentRow(ledger, "many");
        const replacement = signedTx("many-replacement");
        expect(
          await ledger.recordBroadcast({ id: row.id, owner: "instance-a", ...replacement, relayer: RELAYER, relayerNonce: 7, feeCap: 2_000n, priorityFee: 100n, checkAfterMs: 5_000 }),
        ).to.equal(true);
        const record = (await ledger.getById(row.id))!;
        expect(record.txHash).to.equal(replacement.hash);
        expect(record.transactions.map((t) => t.hash)).to.deep.equal([row.hash, replacement.hash]);
        expect(record.transactions[1]).to.deep.include({ feeCap: 2_000n, priorityFee: 100n });
        expect((await ledger.findByTxHash(row.hash))?.id).to.equal(row.id);
        expect((await ledger.findByTxHash(replacement.hash.toUpperCase().replace("0X", "0x") as Hex))?.id).to.equal(row.id);
        expect(await ledger.findByTxHash(signedTx("unknown").hash)).to.equal(undefined);
      });

      it("records a replacement at the same relayer and nonce for the key's lease holder, whoever owns the row", async () => {
        const row = await sentRow(ledger, "replaced");
        const replacement = signedTx("replaced-2");
        const input = { id: row.id, holder: "instance-a", ...replacement, relayer: RELAYER, relayerNonce: 7, feeCap: 3_000n, priorityFee: 200n };
        // Another nonce or relayer is not a replacement of the row's transaction.
        expect(await ledger.recordReplacement({ ...input, relayerNonce: 8 })).to.equal(false);
        expect(await ledger.recordReplacement({ ...input, relayer: OTHER_RELAYER })).to.equal(false);
        // Not the key's lease holder (the row's owner does not matter).
        expect(await ledger.recordReplacement({ ...input, holder: "instance-b" })).to.equal(false);
        expect((await ledger.getById(row.id))!.transactions).to.have.length(1);
        // The lease moved to instance-b (the owner's instance died): instance-b may re-price it, instance-a no longer.
        await lapse("instance-a", 60_000);
        await ledger.acquireLease(RELAYER, "instance-b", 60_000);
        expect(await ledger.recordReplacement(input)).to.equal(false);
        expect(await ledger.recordReplacement({ ...input, holder: "instance-b" })).to.equal(true);
        const record = (await ledger.getById(row.id))!;
        expect(record).to.deep.include({ status: "sent", txHash: replacement.hash, owner: "instance-a", relayerNonce: 7 });
        expect(record.transactions.map((t) => [t.hash, t.state, t.feeCap, t.priorityFee])).to.deep.equal([
          [row.hash, "signed", undefined, undefined],
          [replacement.hash, "signed", 3_000n, 200n],
        ]);
        // The first version was mined after all: the replacement can never be, and says so.
        const settled = await ledger.markSettled(row.id, { txHash: row.hash, blockNumber: 3n, blockTimestamp: 4n });
        expect(settled.transactions.map((t) => [t.hash, t.state])).to.deep.equal([
          [row.hash, "mined"],
          [replacement.hash, "replaced"],
        ]);
        // Final rows take no replacement.
        expect(await ledger.recordReplacement({ ...input, holder: "instance-b", ...signedTx("replaced-3") })).to.equal(false);
        expect((await ledger.getById(row.id))!.txHash).to.equal(row.hash);
      });

      it("settles idempotently with the same hash and refuses another hash on a settled row", async () => {
        const row = await sentRow(ledger, "idem");
        const settled = await ledger.markSettled(row.id, { txHash: row.hash, blockNumber: 5n, blockTimestamp: 10n });
        expect(await ledger.markSettled(row.id, { txHash: row.hash, blockNumber: 5n, blockTimestamp: 10n })).to.deep.equal(settled);
        const error = await ledger.markSettled(row.id, { txHash: signedTx("other").hash, blockNumber: 5n, blockTimestamp: 10n }).catch((e: unknown) => e);
        expect(error).to.be.instanceOf(IllegalTransitionError);
        expect(error).to.deep.include({ from: "settled", to: "settled", code: "illegal_transition" });
      });

      it("refuses settled → failed, failed → settled and a broadcast on a final row", async () => {
        const settled = await sentRow(ledger, "s");
        await ledger.markSettled(settled.id, { txHash: settled.hash, blockNumber: 1n, blockTimestamp: 1n });
        const toFailed = await ledger.markFailed(settled.id, { code: "failedOnChain" }).catch((e: unknown) => e);
        expect(toFailed).to.be.instanceOf(IllegalTransitionError).and.deep.include({ from: "settled", to: "failed" });
        const late = signedTx("late");
        expect(await ledger.recordBroadcast({ id: settled.id, owner: "instance-a", ...late, relayer: RELAYER, relayerNonce: 8, checkAfterMs: 1 })).to.equal(false);

        const failed = await sentRow(ledger, "f");
        await ledger.markFailed(failed.id, { code: "failedOnChain" });
        const toSettled = await ledger.markSettled(failed.id, { txHash: failed.hash, blockNumber: 1n, blockTimestamp: 1n }).catch((e: unknown) => e);
        expect(toSettled).to.be.instanceOf(IllegalTransitionError).and.deep.include({ from: "failed", to: "settled" });
        expect(await ledger.recordBroadcast({ id: failed.id, owner: "instance-a", ...signedTx("f2"), relayer: RELAYER, relayerNonce: 9, checkAfterMs: 1 })).to.equal(false);
        expect((await ledger.getById(failed.id))!.transactions).to.have.length(1);
        expect((await ledger.getById(settled.id))!.transactions).to.have.length(1);
      });

      it("fails a claimed row with its code, and failing it again changes nothing", async () => {
        const claimed = await ledger.claim(claimInput({ label: "cf" }));
        if (claimed.outcome !== "claimed") throw new Error("not claimed");
        clock.advance(10);
        const failed = await ledger.markFailed(claimed.record.id, { code: "expired" });
        expect(failed).to.deep.include({ status: "failed", errorCode: "expired", updatedAt: clock.now });
        clock.advance(10);
        expect(await ledger.markFailed(claimed.record.id, { code: "alreadyUsed" })).to.deep.equal(failed);
      });

      it("fails a row for its owner only when the owner is given", async () => {
        const claimed = await ledger.claim(claimInput({ label: "own", owner: null }));
        if (claimed.outcome !== "claimed") throw new Error("not claimed");
        expect(await ledger.markFailed(claimed.record.id, { code: "failedOnChain", owner: "instance-b" })).to.equal(undefined);
        expect((await ledger.getById(claimed.record.id))!.status).to.equal("claimed");
        // null: only while it still waits for a key holder.
        expect(await ledger.markFailed(claimed.record.id, { code: "notSent", owner: null })).to.deep.include({ status: "failed", errorCode: "notSent" });
        const taken = await ledger.claim(claimInput({ label: "own2", owner: null }));
        if (taken.outcome !== "claimed") throw new Error("not claimed");
        await ledger.takeQueued({ owner: "holder", chainIds: [338], limit: 1, ownerTtlMs: 1_000 });
        expect(await ledger.markFailed(taken.record.id, { code: "notSent", owner: null })).to.equal(undefined);
      });

      it("withdraws a claim on which nothing was recorded, for its owner only, and never a sent row", async () => {
        const queued = await ledger.claim(claimInput({ label: "wd1", owner: null }));
        if (queued.outcome !== "claimed") throw new Error("not claimed");
        expect(await ledger.withdraw(queued.record.id, { code: "notSent", owner: "instance-a" })).to.equal(undefined);
        expect(await ledger.withdraw(queued.record.id, { code: "notSent", owner: null })).to.deep.include({ status: "failed", errorCode: "notSent" });
        const sent = await sentRow(ledger, "wd2");
        expect(await ledger.withdraw(sent.id, { code: "notSent", owner: "instance-a" })).to.equal(undefined);
        expect((await ledger.getById(sent.id))!.status).to.equal("sent");
      });

      it("throws not_found for a row that does not exist", async () => {
        const error = await ledger.markSettled(999_999, { txHash: signedTx(1).hash, blockNumber: 1n, blockTimestamp: 1n }).catch((e: unknown) => e);
        expect(error).to.be.instanceOf(LedgerError).and.deep.include({ code: "not_found" });
      });

      it("refuses the write-ahead record of an instance that no longer owns the row", async () => {
        const claimed = await ledger.claim(claimInput({ label: "fence" }));
        if (claimed.outcome !== "claimed") throw new Error("not claimed");
        await ledger.acquireLease(RELAYER, "instance-b", 60_000);
        const tx = signedTx("fence");
        expect(await ledger.recordBroadcast({ id: claimed.record.id, owner: "instance-b", ...tx, relayer: RELAYER, relayerNonce: 1, checkAfterMs: 1 })).to.equal(false);
        expect((await ledger.getById(claimed.record.id))!.status).to.equal("claimed");
      });

      it("refuses the write-ahead record when the owner does not hold the relayer key's lease", async () => {
        const claimed = await ledger.claim(claimInput({ label: "lease" }));
        if (claimed.outcome !== "claimed") throw new Error("not claimed");
        const input = { id: claimed.record.id, owner: "instance-a", ...signedTx("lease"), relayerNonce: 1, checkAfterMs: 1 };
        // Nobody holds it; then another instance holds it; then ours lapsed.
        expect(await ledger.recordBroadcast({ ...input, relayer: RELAYER })).to.equal(false);
        await ledger.acquireLease(OTHER_RELAYER, "instance-b", 60_000);
        expect(await ledger.recordBroadcast({ ...input, relayer: OTHER_RELAYER })).to.equal(false);
        await ledger.acquireLease(RELAYER, "instance-a", 1_000);
        await lapse("instance-a", 1_000);
        expect(await ledger.recordBroadcast({ ...input, relayer: RELAYER })).to.equal(false);
        expect((await ledger.getById(claimed.record.id))!.transactions).to.deep.equal([]);
      });
    });

    describe("hand-off to relayer key holders", () => {
      it("queues a claim with no owner, tells listeners, and lets one key holder take it", async () => {
        const handles = await threeHandles();
        let unsubscribe = () => {};
        const heard = new Promise<void>((resolve) => (unsubscribe = handles[2]!.onQueued(resolve)));
        const queued = await ledger.claim(claimInput({ label: "q", owner: null }));
        if (queued.outcome !== "claimed") throw new Error("not claimed");
        expect(queued.record.owner).to.equal(undefined);
        await heard; // the suite's time-out fails the test if no notification comes
        unsubscribe();
        const taken = await Promise.all(handles.map((h, i) => h.takeQueued({ owner: `holder-${i}`, chainIds: [338], limit: 10, ownerTtlMs: 30_000 })));
        const all = taken.flat();
        expect(all).to.have.length(1);
        expect(all[0]).to.deep.include({ id: queued.record.id, ownerExpiresAt: clock.now + 30_000 });
        expect(all[0]!.owner).to.match(/^holder-\d$/);
      });

      it("gives each queued row to exactly one of several concurrent key holders", async () => {
        const handles = await threeHandles();
        for (let i = 0; i < 12; i++) await ledger.claim(claimInput({ label: `many-${i}`, owner: null }));
        const taken = await Promise.all(
          Array.from({ length: 6 }, (_, i) => handles[i % 3]!.takeQueued({ owner: `holder-${i}`, chainIds: [338], limit: 3, ownerTtlMs: 30_000 })),
        );
        const ids = taken.flat().map((r) => r.id);
        expect(ids).to.have.length(12);
        expect(new Set(ids).size).to.equal(12);
      });

      it("takes no row of another chain, and none past its deadline", async () => {
        await ledger.claim(claimInput({ label: "late", owner: null, deadlineMs: 1_000 }));
        const other = claimInput({ label: "chain25", owner: null });
        await ledger.claim({ ...other, key: { ...other.key, chainId: 25 } });
        clock.advance(1_000);
        expect(await ledger.takeQueued({ owner: "h", chainIds: [338], limit: 10, ownerTtlMs: 1 })).to.deep.equal([]);
        expect((await ledger.takeQueued({ owner: "h", chainIds: [25], limit: 10, ownerTtlMs: 1 })).map((r) => r.key.chainId)).to.deep.equal([25]);
      });

      it("puts a claimed row back in the queue for its owner only", async () => {
        const claimed = await ledger.claim(claimInput({ label: "rq" }));
        if (claimed.outcome !== "claimed") throw new Error("not claimed");
        expect(await ledger.requeue(claimed.record.id, "instance-b")).to.equal(false);
        expect(await ledger.requeue(claimed.record.id, "instance-a")).to.equal(true);
        expect((await ledger.getById(claimed.record.id))!.owner).to.equal(undefined);
        expect((await ledger.takeQueued({ owner: "holder", chainIds: [338], limit: 1, ownerTtlMs: 1 })).map((r) => r.id)).to.deep.equal([claimed.record.id]);
      });
    });

    describe("reconciler work and lookups", () => {
      it("hands each due row to exactly one of several concurrent checkers and postpones it", async () => {
        const handles = await threeHandles();
        const rows = [];
        for (let i = 0; i < 9; i++) rows.push(await sentRow(ledger, `due-${i}`));
        clock.advance(5_000);
        const taken = await Promise.all(Array.from({ length: 6 }, (_, i) => handles[i % 3]!.takeDue({ chainIds: [338], limit: 2, recheckMs: 10_000 })));
        const ids = taken.flat().map((r) => r.id);
        expect(ids).to.have.length(9);
        expect(new Set(ids)).to.deep.equal(new Set(rows.map((r) => r.id)));
        expect(await ledger.takeDue({ chainIds: [338], limit: 100, recheckMs: 10_000 })).to.deep.equal([]);
        clock.advance(10_000);
        expect(await ledger.takeDue({ chainIds: [338], limit: 100, recheckMs: 10_000 })).to.have.length(9);
      });

      it("does not hand out a row before its check time, nor a final row", async () => {
        const followed = await sentRow(ledger, "followed");
        const settled = await sentRow(ledger, "done");
        await ledger.markSettled(settled.id, { txHash: settled.hash, blockNumber: 1n, blockTimestamp: 1n });
        await ledger.deferCheck(followed.id, clock.now + 60_000);
        clock.advance(30_000);
        expect(await ledger.takeDue({ chainIds: [338], limit: 10, recheckMs: 1 })).to.deep.equal([]);
        clock.advance(30_000);
        expect((await ledger.takeDue({ chainIds: [338], limit: 10, recheckMs: 1 })).map((r) => r.id)).to.deep.equal([followed.id]);
      });

      it("lists pending rows oldest first and summarises them", async () => {
        expect(await ledger.pendingSummary()).to.deep.equal({ count: 0 });
        const first = await sentRow(ledger, "p1");
        const firstAt = clock.now;
        clock.advance(100);
        const second = await ledger.claim(claimInput({ label: "p2" }));
        const done = await sentRow(ledger, "p3");
        await ledger.markSettled(done.id, { txHash: done.hash, blockNumber: 1n, blockTimestamp: 1n });
        expect((await ledger.listPending()).map((r) => r.id)).to.deep.equal([first.id, second.outcome === "claimed" ? second.record.id : -1]);
        expect(await ledger.pendingSummary()).to.deep.equal({ count: 2, oldestCreatedAt: firstAt });
        expect(await ledger.listPending({ chainIds: [25] })).to.deep.equal([]);
      });

      it("finds a row by chain, authorizer and nonce whatever the case", async () => {
        const row = await sentRow(ledger, "lookup");
        const found = await ledger.findByAuthorization(338, PAYER.toLowerCase() as Hex, nonceOf("lookup"));
        expect(found.map((r) => r.id)).to.deep.equal([row.id]);
        expect(await ledger.findByAuthorization(25, PAYER, nonceOf("lookup"))).to.deep.equal([]);
        expect(await ledger.get({ chainId: 338, token: TOKEN, authorizer: PAYER, nonce: nonceOf("absent") })).to.equal(undefined);
        expect(await ledger.getById(123_456)).to.equal(undefined);
      });
    });

    describe("waiting for an outcome", () => {
      it("wakes a waiter (on any handle) when the row settles", async () => {
        const handles = await threeHandles();
        const row = await sentRow(ledger, "wait");
        // Waiting from before the change (its first read is already under way): a notification or its next poll finds it.
        const waiting = handles[1]!.waitForOutcome(row.id, 30_000);
        await handles[2]!.markSettled(row.id, { txHash: row.hash, blockNumber: 3n, blockTimestamp: 4n });
        expect(await waiting).to.deep.include({ status: "settled", txHash: row.hash, blockNumber: 3n });
      });

      it("answers at once for a final row, with the pending row at the end of the wait, and undefined for no row", async () => {
        const row = await sentRow(ledger, "w2");
        expect(await ledger.waitForOutcome(row.id, 0)).to.deep.include({ status: "sent", txHash: row.hash });
        const aborted = new AbortController();
        const waiting = ledger.waitForOutcome(row.id, 60_000, aborted.signal);
        aborted.abort();
        expect(await waiting).to.deep.include({ status: "sent" });
        await ledger.markFailed(row.id, { code: "failedOnChain" });
        expect(await ledger.waitForOutcome(row.id, 60_000)).to.deep.include({ status: "failed", errorCode: "failedOnChain" });
        expect(await ledger.waitForOutcome(987_654, 60_000)).to.equal(undefined);
      });
    });

    describe("relayer key leases and instances", () => {
      /** What a lease's times are: the ledger's clock now, or (the database's clock) `ttl` apart around the real time. */
      const leaseTimes = (lease: { acquiredAt: number; expiresAt: number } | undefined, ttl: number, acquired = clock.now) => {
        if (backend.leaseClock === "ledger") return expect(lease).to.deep.include({ acquiredAt: acquired, expiresAt: clock.now + ttl });
        expect(lease!.expiresAt - ttl).to.be.within(Date.now() - 60_000, Date.now() + 60_000);
        return expect(lease!.acquiredAt).to.be.at.most(lease!.expiresAt - ttl);
      };

      it("gives a free key to one holder, refuses a second while the lease lives, and hands it over after it lapses", async () => {
        const first = await ledger.acquireLease(RELAYER, "instance-a", 10_000);
        expect(first).to.deep.include({ address: RELAYER, holder: "instance-a", epoch: 1 });
        leaseTimes(first, 10_000);
        expect(await ledger.acquireLease(RELAYER, "instance-b", 10_000)).to.equal(undefined);
        clock.advance(9_999);
        expect(await ledger.acquireLease(RELAYER, "instance-b", 10_000)).to.equal(undefined);
        await lapse("instance-a", 1);
        const taken = await ledger.acquireLease(RELAYER, "instance-b", 10_000);
        expect(taken).to.deep.include({ address: RELAYER, holder: "instance-b", epoch: 2 });
        leaseTimes(taken, 10_000);
        expect(await ledger.renewLeases("instance-a", 10_000)).to.deep.equal([]);
      });

      it("renews the holder's leases, and a released key is free at once", async () => {
        const started = clock.now;
        await ledger.acquireLease(RELAYER, "instance-a", 10_000);
        await ledger.acquireLease(OTHER_RELAYER, "instance-a", 10_000);
        const acquired = await ledger.leases();
        clock.advance(5_000);
        const renewed = await ledger.renewLeases("instance-a", 10_000);
        expect(renewed.map((l) => [l.address, l.epoch])).to.have.deep.members([
          [RELAYER, 1],
          [OTHER_RELAYER, 1],
        ]);
        for (const lease of renewed) {
          leaseTimes(lease, 10_000, started);
          expect(lease.acquiredAt).to.equal(acquired.find((l) => l.address === lease.address)!.acquiredAt);
        }
        expect((await ledger.acquireLease(RELAYER, "instance-a", 10_000))?.epoch).to.equal(1);
        await ledger.releaseLease(RELAYER, "instance-b");
        expect(await ledger.acquireLease(RELAYER, "instance-b", 10_000)).to.equal(undefined);
        await ledger.releaseLease(RELAYER, "instance-a");
        expect(await ledger.acquireLease(RELAYER, "instance-b", 10_000)).to.deep.include({ holder: "instance-b", epoch: 2 });
        expect((await ledger.leases()).map((l) => [l.address, l.holder])).to.have.deep.members([
          [RELAYER, "instance-b"],
          [OTHER_RELAYER, "instance-a"],
        ]);
      });

      it("lets exactly one of 50 concurrent lease attempts on one key over three handles win", async () => {
        const handles = await threeHandles();
        const results = await Promise.all(Array.from({ length: 50 }, (_, i) => handles[i % 3]!.acquireLease(RELAYER, `instance-${i}`, 10_000)));
        expect(results.filter(Boolean)).to.have.length(1);
      });

      it("lists instances whose heartbeat is live and forgets removed ones", async () => {
        // Instance-a's heartbeat lives 10 s (the ledger's clock), or none at all (the database's: a test cannot move it).
        const ttlA = backend.leaseClock === "ledger" ? 10_000 : 0;
        await ledger.heartbeat("instance-a", ttlA === 0 ? 60_000 : ttlA, { pid: 1 });
        const first = (await ledger.instances())[0]!;
        clock.advance(5_000);
        await ledger.heartbeat("instance-b", 10_000, { pid: 2 });
        expect((await ledger.instances()).map((i) => [i.id, i.info])).to.deep.equal([
          ["instance-a", { pid: 1 }],
          ["instance-b", { pid: 2 }],
        ]);
        clock.advance(5_000);
        if (ttlA === 0) await ledger.heartbeat("instance-a", 0, { pid: 1 });
        expect((await ledger.instances()).map((i) => i.id)).to.deep.equal(["instance-b"]);
        await ledger.heartbeat("instance-a", 10_000, { pid: 1 });
        const revived = (await ledger.instances()).find((i) => i.id === "instance-a")!;
        expect(revived.startedAt).to.equal(first.startedAt);
        if (backend.leaseClock === "ledger") expect([revived.startedAt, revived.heartbeatAt]).to.deep.equal([clock.now - 10_000, clock.now]);
        else expect(revived.heartbeatAt).to.be.at.least(first.heartbeatAt);
        await ledger.removeInstance("instance-b");
        expect((await ledger.instances()).map((i) => i.id)).to.deep.equal(["instance-a"]);
      });
    });

    describe("the write-ahead fence: the relayer key's lease and its generation", () => {
      /** Instance-a's lease lapses, instance-b takes the key and gives it back, and instance-a takes it again: generation 3. */
      async function backAtTheSameInstance(): Promise<void> {
        await lapse("instance-a", 60_000);
        expect(await ledger.acquireLease(RELAYER, "instance-b", 60_000)).to.deep.include({ epoch: 2 });
        await ledger.releaseLease(RELAYER, "instance-b");
        expect(await ledger.acquireLease(RELAYER, "instance-a", 60_000)).to.deep.include({ holder: "instance-a", epoch: 3 });
      }

      it("refuses a first send or a replacement signed under an earlier generation, even once the key is back at the same instance", async () => {
        const row = await sentRow(ledger, "generation");
        const claimed = await ledger.claim(claimInput({ label: "generation-2" }));
        if (claimed.outcome !== "claimed") throw new Error("not claimed");
        const replacement = { id: row.id, holder: "instance-a", relayer: RELAYER, relayerNonce: 7 };
        const first = { id: claimed.record.id, owner: "instance-a", relayer: RELAYER, relayerNonce: 8, checkAfterMs: 1 };
        expect(await ledger.recordReplacement({ ...replacement, ...signedTx("generation-r1"), leaseEpoch: 1 })).to.equal(true);
        await backAtTheSameInstance();
        // Signed before the key changed hands: the holder's state (its nonces) may be stale, so the record is refused.
        expect(await ledger.recordReplacement({ ...replacement, ...signedTx("generation-r2"), leaseEpoch: 1 })).to.equal(false);
        expect(await ledger.recordBroadcast({ ...first, ...signedTx("generation-f1"), leaseEpoch: 1 })).to.equal(false);
        expect((await ledger.getById(claimed.record.id))!).to.deep.include({ status: "claimed", transactions: [] });
        // Signed under the lease it holds now.
        expect(await ledger.recordReplacement({ ...replacement, ...signedTx("generation-r3"), leaseEpoch: 3 })).to.equal(true);
        expect(await ledger.recordBroadcast({ ...first, ...signedTx("generation-f2"), leaseEpoch: 3 })).to.equal(true);
        expect((await ledger.getById(row.id))!.transactions.map((t) => t.hash)).to.deep.equal([row.hash, signedTx("generation-r1").hash, signedTx("generation-r3").hash]);
        expect((await ledger.getById(claimed.record.id))!.transactions.map((t) => t.hash)).to.deep.equal([signedTx("generation-f2").hash]);
      });

      it("records a gap filler only for the key's holder under that generation, while the lease lives", async () => {
        const filler = (label: string, overrides: Partial<Parameters<Ledger["recordFiller"]>[0]> = {}) => ({
          chainId: 338,
          holder: "instance-a",
          leaseEpoch: 1,
          relayer: RELAYER,
          relayerNonce: 5,
          feeCap: 2_000n,
          priorityFee: 100n,
          ...signedTx(label),
          ...overrides,
        });
        // Nobody holds the key yet.
        expect(await ledger.recordFiller(filler("nobody"))).to.equal(false);
        await ledger.acquireLease(RELAYER, "instance-a", 10_000);
        expect(await ledger.recordFiller(filler("other-holder", { holder: "instance-b" }))).to.equal(false);
        expect(await ledger.recordFiller(filler("other-generation", { leaseEpoch: 2 }))).to.equal(false);
        expect(await ledger.recordFiller(filler("other-key", { relayer: OTHER_RELAYER }))).to.equal(false);
        expect(await ledger.recordFiller(filler("held"))).to.equal(true);
        // The same signed filler recorded again is still one record.
        expect(await ledger.recordFiller(filler("held"))).to.equal(true);
        const replacing = filler("held-2", { feeCap: 3_000n, replaces: signedTx("held").hash });
        expect(await ledger.recordFiller(replacing)).to.equal(true);
        await lapse("instance-a", 10_000);
        expect(await ledger.recordFiller(filler("lapsed"))).to.equal(false);
        const kept = await ledger.pendingFillers({ chainId: 338, relayer: RELAYER, fromNonce: 0, limit: 10 });
        expect(kept.map((f) => [f.hash, f.relayerNonce, f.holder, f.leaseEpoch, f.state, f.feeCap, f.replaces])).to.deep.equal([
          [signedTx("held").hash, 5, "instance-a", 1, "signed", 2_000n, undefined],
          [signedTx("held-2").hash, 5, "instance-a", 1, "signed", 3_000n, signedTx("held").hash],
        ]);
        expect(kept[0]).to.deep.include({ chainId: 338, relayer: RELAYER, raw: signedTx("held").raw, priorityFee: 100n });
      });

      it("lists a key's gap fillers for its next holder: from its mined count on, by nonce, without refused ones, at most the limit", async () => {
        await ledger.acquireLease(RELAYER, "instance-a", 60_000);
        await ledger.acquireLease(OTHER_RELAYER, "instance-a", 60_000);
        const record = (label: string, relayerNonce: number, relayer: Address = RELAYER, chainId = 338) =>
          ledger.recordFiller({ chainId, holder: "instance-a", leaseEpoch: 1, relayer, relayerNonce, feeCap: 1n, ...signedTx(label) });
        for (const [label, nonce] of [["n9", 9], ["n3", 3], ["n4", 4], ["n6", 6], ["n5", 5]] as const) expect(await record(label, nonce)).to.equal(true);
        expect(await record("other-key", 5, OTHER_RELAYER)).to.equal(true);
        expect(await record("other-chain", 5, RELAYER, 25)).to.equal(true);
        await ledger.markFillerRefused(signedTx("n6").hash);
        const listed = async (fromNonce: number, limit = 10) => (await ledger.pendingFillers({ chainId: 338, relayer: RELAYER, fromNonce, limit })).map((f) => f.relayerNonce);
        expect(await listed(0)).to.deep.equal([3, 4, 5, 9]);
        expect(await listed(4)).to.deep.equal([4, 5, 9]);
        expect(await listed(0, 2)).to.deep.equal([3, 4]);
        expect(await listed(10)).to.deep.equal([]);
        // A week on, the records are gone (their nonces were mined long since).
        clock.advance(7 * 86_400_000);
        await ledger.prune();
        expect(await listed(0)).to.deep.equal([]);
      });
    });

    describe("revert penalties", () => {
      const scope = { chainId: 338, token: TOKEN };
      const code = "0x" + "ab".repeat(32);
      const subjects = [
        { kind: "payer" as const, subject: PAYER },
        { kind: "code" as const, subject: code },
      ];

      it("reports the penalty that lasts longest past the chain's time among the subjects, and none once over", async () => {
        await ledger.penalize({ ...scope, kind: "payer", subject: PAYER, until: 1_000n, txHash: signedTx("p").hash });
        await ledger.penalize({ ...scope, kind: "code", subject: code, until: 5_000n });
        expect(await ledger.activePenalty(scope, subjects, 900n)).to.deep.equal({ ...scope, kind: "code", subject: code, until: 5_000n });
        expect(await ledger.activePenalty(scope, subjects.slice(0, 1), 900n)).to.deep.equal({
          ...scope,
          kind: "payer",
          subject: PAYER.toLowerCase(),
          until: 1_000n,
          txHash: signedTx("p").hash,
        });
        expect(await ledger.activePenalty(scope, subjects.slice(0, 1), 1_000n)).to.equal(undefined);
        expect(await ledger.activePenalty(scope, subjects, 5_000n)).to.equal(undefined);
      });

      it("keeps penalties apart per chain and token", async () => {
        await ledger.penalize({ ...scope, kind: "payer", subject: PAYER, until: 5_000n });
        expect(await ledger.activePenalty({ chainId: 25, token: TOKEN }, subjects, 0n)).to.equal(undefined);
        expect(await ledger.activePenalty({ chainId: 338, token: PAYEE }, subjects, 0n)).to.equal(undefined);
        expect(await ledger.activePenalty(scope, [], 0n)).to.equal(undefined);
      });

      it("keeps the later end when a penalty is recorded again", async () => {
        await ledger.penalize({ ...scope, kind: "payer", subject: PAYER, until: 5_000n });
        await ledger.penalize({ ...scope, kind: "payer", subject: PAYER, until: 1_000n });
        expect((await ledger.activePenalty(scope, subjects, 0n))?.until).to.equal(5_000n);
        await ledger.penalize({ ...scope, kind: "payer", subject: PAYER, until: 9_000n });
        expect((await ledger.activePenalty(scope, subjects, 0n))?.until).to.equal(9_000n);
      });
    });

    describe("payment identifiers", () => {
      const scope = { chainId: 338, token: TOKEN };
      const NONCE_A = ("0x" + "0a".repeat(32)) as Hex;
      const NONCE_B = ("0x" + "0b".repeat(32)) as Hex;
      const A = { nonce: NONCE_A, digest: ("0x" + "a1".repeat(32)) as Hex };
      const B = { nonce: NONCE_B, digest: ("0x" + "b1".repeat(32)) as Hex };
      // Another payment re-signed under A's nonce (another payee or value): another digest.
      const A2 = { nonce: NONCE_A, digest: ("0x" + "a2".repeat(32)) as Hex };

      it("binds an id to the first payment it came with, for every handle; a later payment gets the first one back", async () => {
        const [a, b, c] = await threeHandles();
        expect(await a!.paymentIdentifierBinding(scope, PAYER, "pay_0123456789abcdef")).to.equal(undefined);
        // At once from three handles with two payments: one binding wins, and all three are told the same one.
        const bound = await Promise.all([a!.bindPaymentIdentifier(scope, PAYER, "pay_0123456789abcdef", A), b!.bindPaymentIdentifier(scope, PAYER, "pay_0123456789abcdef", B), c!.bindPaymentIdentifier(scope, PAYER, "pay_0123456789abcdef", A)]);
        expect(bound[1]).to.deep.equal(bound[0]);
        expect(bound[2]).to.deep.equal(bound[0]);
        expect([A, B]).to.deep.include(bound[0]);
        expect(await c!.bindPaymentIdentifier(scope, PAYER, "pay_0123456789abcdef", bound[0]!.nonce === NONCE_B ? A : B)).to.deep.equal(bound[0]);
        expect(await b!.paymentIdentifierBinding(scope, PAYER, "pay_0123456789abcdef")).to.deep.equal(bound[0]);
      });

      it("keeps the whole payment bound: another payment under the same nonce gets the first one's digest back", async () => {
        expect(await ledger.bindPaymentIdentifier(scope, PAYER, "pay_0123456789abcdef", A)).to.deep.equal(A);
        expect(await ledger.bindPaymentIdentifier(scope, PAYER, "pay_0123456789abcdef", A2)).to.deep.equal(A);
        expect(await ledger.paymentIdentifierBinding(scope, PAYER, "pay_0123456789abcdef")).to.deep.equal(A);
        // A binding given without a digest (as those recorded before migration 0004) answers with the nonce only.
        expect(await ledger.bindPaymentIdentifier(scope, PAYER, "pay_without_digest_01", { nonce: NONCE_B })).to.deep.equal({ nonce: NONCE_B });
        expect(await ledger.paymentIdentifierBinding(scope, PAYER, "pay_without_digest_01")).to.deep.equal({ nonce: NONCE_B });
      });

      it("keeps ids apart per payer, token and chain, and compares them as sent (case-sensitive)", async () => {
        expect(await ledger.bindPaymentIdentifier(scope, PAYER, "pay_0123456789abcdef", A)).to.deep.equal(A);
        expect(await ledger.bindPaymentIdentifier(scope, OTHER_PAYER, "pay_0123456789abcdef", B)).to.deep.equal(B);
        expect(await ledger.bindPaymentIdentifier({ ...scope, chainId: 25 }, PAYER, "pay_0123456789abcdef", B)).to.deep.equal(B);
        expect(await ledger.bindPaymentIdentifier(scope, PAYER, "PAY_0123456789ABCDEF", B)).to.deep.equal(B);
        expect(await ledger.paymentIdentifierBinding(scope, PAYER.toLowerCase() as Address, "pay_0123456789abcdef")).to.deep.equal(A);
      });
    });

    describe("nonce index", () => {
      const scope = { chainId: 338, token: TOKEN };
      const authorizers = [PAYER, OTHER_PAYER, PAYEE];
      /** Indexed nonce `i`: its authorizer one of three in turn, its block 100 + i. */
      const indexed = (i: number): IndexedNonce => ({ authorizer: authorizers[i % 3]!, nonce: nonceOf(`indexed-${i}`), blockNumber: BigInt(100 + i) });
      const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => indexed(from + i));
      /** As the index stores them: one per key, in (authorizer, nonce) order of their stored (lower-case) forms. */
      const ordered = (nonces: readonly IndexedNonce[]) => {
        const key = (n: IndexedNonce) => `${n.authorizer.toLowerCase()}:${n.nonce}`;
        const unique = [...new Map(nonces.map((n) => [key(n), n])).values()];
        return unique.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
      };
      /** Every stored nonce, page by page; the page sizes too. */
      async function pages(handle: Ledger, of: TokenScope, limit: number): Promise<{ nonces: IndexedNonce[]; sizes: number[] }> {
        const nonces: IndexedNonce[] = [];
        const sizes: number[] = [];
        for (;;) {
          const last = nonces.at(-1);
          const page = await handle.indexedNonces(of, { limit, ...(last ? { after: { authorizer: last.authorizer, nonce: last.nonce } } : {}) });
          sizes.push(page.length);
          nonces.push(...page);
          if (page.length < limit) return { nonces, sizes };
        }
      }

      it("has no progress before it is opened; opening creates (fromBlock, fromBlock - 1)", async () => {
        expect(await ledger.nonceIndexProgress(scope)).to.equal(undefined);
        expect(await ledger.openNonceIndex(scope, 1_000n)).to.deep.equal({ fromBlock: 1_000n, throughBlock: 999n });
        expect(await ledger.nonceIndexProgress(scope)).to.deep.equal({ fromBlock: 1_000n, throughBlock: 999n });
        expect(await ledger.indexedNonces(scope, { limit: 10 })).to.deep.equal([]);
      });

      it("leaves the progress as it is when opened again at the same or a later block", async () => {
        await ledger.openNonceIndex(scope, 1_000n);
        await ledger.recordIndexedNonces(scope, [], { fromBlock: 0n, throughBlock: 1_500n });
        expect(await ledger.openNonceIndex(scope, 1_000n)).to.deep.equal({ fromBlock: 1_000n, throughBlock: 1_500n });
        expect(await ledger.openNonceIndex(scope, 1_200n)).to.deep.equal({ fromBlock: 1_000n, throughBlock: 1_500n });
        expect(await ledger.nonceIndexProgress(scope)).to.deep.equal({ fromBlock: 1_000n, throughBlock: 1_500n });
      });

      it("starts the progress over when opened at an earlier block, keeping the nonces stored", async () => {
        await ledger.openNonceIndex(scope, 1_000n);
        await ledger.recordIndexedNonces(scope, range(0, 3), { fromBlock: 0n, throughBlock: 1_500n });
        expect(await ledger.openNonceIndex(scope, 800n)).to.deep.equal({ fromBlock: 800n, throughBlock: 799n });
        expect(await ledger.nonceIndexProgress(scope)).to.deep.equal({ fromBlock: 800n, throughBlock: 799n });
        expect(await ledger.indexedNonces(scope, { limit: 10 })).to.deep.equal(ordered(range(0, 3)));
      });

      it("stores nonces and raises throughBlock, never lowering it", async () => {
        await ledger.openNonceIndex(scope, 1_000n);
        expect(await ledger.recordIndexedNonces(scope, range(0, 2), { fromBlock: 0n, throughBlock: 1_100n })).to.deep.equal({ fromBlock: 1_000n, throughBlock: 1_100n });
        // A lower throughBlock leaves it; its nonces are stored all the same (they are true).
        expect(await ledger.recordIndexedNonces(scope, range(2, 1), { fromBlock: 0n, throughBlock: 1_050n })).to.deep.equal({ fromBlock: 1_000n, throughBlock: 1_100n });
        expect(await ledger.recordIndexedNonces(scope, [], { fromBlock: 0n, throughBlock: 1_100n })).to.deep.equal({ fromBlock: 1_000n, throughBlock: 1_100n });
        expect(await ledger.recordIndexedNonces(scope, [], { fromBlock: 0n, throughBlock: 1_200n })).to.deep.equal({ fromBlock: 1_000n, throughBlock: 1_200n });
        expect(await ledger.nonceIndexProgress(scope)).to.deep.equal({ fromBlock: 1_000n, throughBlock: 1_200n });
        const stored = await ledger.indexedNonces(scope, { limit: 10 });
        expect(stored).to.deep.equal(ordered(range(0, 3)));
        expect(stored.map((n) => n.authorizer)).to.have.members([PAYER, OTHER_PAYER, PAYEE]); // checksummed
      });

      it("raises throughBlock only over a range that joins the stored one (an index started over earlier meanwhile), storing its nonces all the same", async () => {
        await ledger.openNonceIndex(scope, 1_000n);
        expect(await ledger.recordIndexedNonces(scope, range(0, 1), { fromBlock: 1_000n, throughBlock: 1_099n })).to.deep.equal({ fromBlock: 1_000n, throughBlock: 1_099n });
        // Another instance starts the index over at block 500: a backfiller still reading from 1,100 must not cover 500..1,099.
        await ledger.openNonceIndex(scope, 500n);
        expect(await ledger.recordIndexedNonces(scope, range(1, 1), { fromBlock: 1_100n, throughBlock: 1_199n })).to.deep.equal({ fromBlock: 500n, throughBlock: 499n });
        expect(await ledger.recordIndexedNonces(scope, [], { fromBlock: 500n, throughBlock: 1_199n })).to.deep.equal({ fromBlock: 500n, throughBlock: 1_199n });
        // A range inside the stored one raises nothing either.
        expect(await ledger.recordIndexedNonces(scope, range(2, 1), { fromBlock: 600n, throughBlock: 700n })).to.deep.equal({ fromBlock: 500n, throughBlock: 1_199n });
        expect(await ledger.indexedNonces(scope, { limit: 10 })).to.deep.equal(ordered(range(0, 3)));
      });

      it("stores a nonce given twice once, in one call or across calls, whatever its case: the first one given stays", async () => {
        await ledger.openNonceIndex(scope, 1n);
        const nonce = nonceOf("twice");
        const upper = nonce.toUpperCase().replace("0X", "0x") as Hex;
        await ledger.recordIndexedNonces(
          scope,
          [
            { authorizer: PAYER, nonce: upper, blockNumber: 5n },
            { authorizer: PAYER.toLowerCase() as Address, nonce, blockNumber: 6n },
          ],
          { fromBlock: 0n, throughBlock: 10n },
        );
        await ledger.recordIndexedNonces(scope, [{ authorizer: PAYER.toUpperCase().replace("0X", "0x") as Address, nonce: upper, blockNumber: 7n }], { fromBlock: 0n, throughBlock: 20n });
        expect(await ledger.indexedNonces(scope, { limit: 10 })).to.deep.equal([{ authorizer: PAYER, nonce, blockNumber: 5n }]);
      });

      it("looks one stored nonce up whatever its case, and nothing of another token, chain or authorizer", async () => {
        await ledger.openNonceIndex(scope, 1n);
        await ledger.recordIndexedNonces(scope, range(0, 3), { fromBlock: 0n, throughBlock: 200n });
        const one = indexed(1);
        expect(await ledger.indexedNonce(scope, one.authorizer, one.nonce)).to.deep.equal(one);
        const upper = (value: string) => value.toUpperCase().replace("0X", "0x") as Hex;
        expect(await ledger.indexedNonce(scope, upper(one.authorizer) as Address, upper(one.nonce))).to.deep.equal(one);
        expect(await ledger.indexedNonce(scope, PAYER, one.nonce)).to.equal(undefined);
        expect(await ledger.indexedNonce({ chainId: 25, token: TOKEN }, one.authorizer, one.nonce)).to.equal(undefined);
        expect(await ledger.indexedNonce({ chainId: 338, token: PAYEE }, one.authorizer, one.nonce)).to.equal(undefined);
      });

      it("pages through 1,234 nonces in (authorizer, nonce) order, each exactly once, the page boundary compared in any case", async () => {
        await ledger.openNonceIndex(scope, 100n);
        const all = range(0, 1_234);
        for (let at = 0; at < all.length; at += 300) await ledger.recordIndexedNonces(scope, all.slice(at, at + 300), { fromBlock: 0n, throughBlock: BigInt(100 + at + 299) });
        const { nonces, sizes } = await pages(ledger, scope, 500);
        expect(sizes).to.deep.equal([500, 500, 234]);
        expect(nonces).to.deep.equal(ordered(all));
        const boundary = nonces[499]!;
        const lowerCase = await ledger.indexedNonces(scope, { after: { authorizer: boundary.authorizer.toLowerCase() as Address, nonce: boundary.nonce }, limit: 1 });
        expect(lowerCase).to.deep.equal([nonces[500]]);
        expect(await ledger.indexedNonces(scope, { after: { authorizer: nonces[1_233]!.authorizer, nonce: nonces[1_233]!.nonce }, limit: 500 })).to.deep.equal([]);
      });

      it("records 1,200 nonces in one call", async () => {
        await ledger.openNonceIndex(scope, 100n);
        const all = range(0, 1_200);
        expect(await ledger.recordIndexedNonces(scope, all, { fromBlock: 0n, throughBlock: 1_299n })).to.deep.equal({ fromBlock: 100n, throughBlock: 1_299n });
        expect(await ledger.indexedNonces(scope, { limit: 2_000 })).to.deep.equal(ordered(all));
      });

      it("refuses to record before the index is opened (not_found), storing nothing", async () => {
        const error = await ledger.recordIndexedNonces(scope, range(0, 2), { fromBlock: 0n, throughBlock: 10n }).catch((e: unknown) => e);
        expect(error).to.be.instanceOf(LedgerError).and.deep.include({ code: "not_found" });
        expect(await ledger.nonceIndexProgress(scope)).to.equal(undefined);
        await ledger.openNonceIndex(scope, 1n);
        expect(await ledger.indexedNonces(scope, { limit: 10 })).to.deep.equal([]);
      });

      it("keeps each token's and chain's index apart", async () => {
        const otherChain = { chainId: 25, token: TOKEN };
        const otherToken = { chainId: 338, token: PAYEE };
        await ledger.openNonceIndex(scope, 1_000n);
        await ledger.recordIndexedNonces(scope, range(0, 3), { fromBlock: 0n, throughBlock: 2_000n });
        for (const other of [otherChain, otherToken]) {
          expect(await ledger.nonceIndexProgress(other)).to.equal(undefined);
          expect(await ledger.indexedNonces(other, { limit: 10 })).to.deep.equal([]);
          expect(await ledger.recordIndexedNonces(other, [], { fromBlock: 0n, throughBlock: 1n }).catch((e: unknown) => e)).to.be.instanceOf(LedgerError).and.deep.include({ code: "not_found" });
        }
        expect(await ledger.openNonceIndex(otherChain, 0n)).to.deep.equal({ fromBlock: 0n, throughBlock: -1n });
        await ledger.recordIndexedNonces(otherChain, range(3, 1), { fromBlock: 0n, throughBlock: 50n });
        expect(await ledger.indexedNonces(otherChain, { limit: 10 })).to.deep.equal(range(3, 1));
        expect(await ledger.nonceIndexProgress(scope)).to.deep.equal({ fromBlock: 1_000n, throughBlock: 2_000n });
        expect(await ledger.indexedNonces(scope, { limit: 10 })).to.deep.equal(ordered(range(0, 3)));
        expect(await ledger.indexedNonces(otherToken, { limit: 10 })).to.deep.equal([]);
      });

      it("ends with every nonce stored once and the highest throughBlock when three handles open and record at once", async () => {
        const handles = await threeHandles();
        // Each handle records 4 batches of 150; neighbouring handles' batches overlap by 100 nonces.
        await Promise.all(
          handles.map(async (handle, h) => {
            await handle.openNonceIndex(scope, 100n);
            for (let k = 0; k < 4; k++) await handle.recordIndexedNonces(scope, range(h * 500 + k * 150, 150), { fromBlock: 0n, throughBlock: BigInt(1_000 + h * 10 + k) });
          }),
        );
        const expected = ordered(handles.flatMap((_, h) => range(h * 500, 600)));
        expect(expected).to.have.length(1_600);
        expect(await ledger.nonceIndexProgress(scope)).to.deep.equal({ fromBlock: 100n, throughBlock: 1_023n });
        expect((await pages(handles[1]!, scope, 500)).nonces).to.deep.equal(expected);
      });
    });

    describe("chain history: rows bound to the chain they were learned on", () => {
      const GENESIS = `0x${"11".repeat(32)}` as Hex;
      const OTHER_GENESIS = `0x${"22".repeat(32)}` as Hex;
      const block = (number: number, tag = "a"): { number: bigint; hash: Hex } => ({ number: BigInt(number), hash: nonceOf(`block-${tag}-${number}`) });
      const scope = { chainId: 338, token: TOKEN };
      const mainnet = { chainId: 25, token: TOKEN };
      /** A settled row of `label` on `chainId`, mined in block `at`. */
      async function settledRow(label: string, at: number, chainId = 338): Promise<SettlementRecord & { hash: Hex }> {
        const owner = "instance-a";
        const claimed = await ledger.claim({ ...claimInput({ label, owner }), key: { ...claimInput({ label }).key, chainId } });
        if (claimed.outcome !== "claimed") throw new Error(`expected a claim, got ${claimed.outcome}`);
        await ledger.acquireLease(RELAYER, owner, 60_000);
        const tx = signedTx(`${chainId}:${label}`);
        await ledger.recordBroadcast({ id: claimed.record.id, owner, hash: tx.hash, raw: tx.raw, relayer: RELAYER, relayerNonce: at, checkAfterMs: 5_000 });
        await ledger.markSettled(claimed.record.id, { txHash: tx.hash, blockNumber: BigInt(at), blockTimestamp: BigInt(at) });
        return { ...(await ledger.getById(claimed.record.id))!, hash: tx.hash };
      }
      /** A settled payment of a catalog entry (the seller PAYEE, paid by PAYER). */
      const paid = (entry: ReturnType<typeof catalogEntry>) =>
        ledger.recordDiscoveryPayment({ entry, payTo: PAYEE, payer: PAYER, words: ["weather"] }, { maxEntries: 100, maxEntriesPerSeller: 100 });
      const listed = async () => (await ledger.listDiscoveryResources({ limit: 100, offset: 0, maxBytes: 1 << 20 })).items.map((item) => (JSON.parse(item) as { resource: string }).resource);
      const catalogEntry = (resource: string, networks: string[], at: string) => ({
        resource,
        type: "http",
        x402Version: 2,
        accepts: networks.map((network) => ({ scheme: "exact", network, payTo: PAYEE, amount: "10000" })),
        lastUpdated: at,
      });

      it("knows nothing of a chain at first; adopting records its genesis, epoch 1 and the common block as a checkpoint", async () => {
        expect(await ledger.chainHistory(338)).to.equal(undefined);
        const adopted = await ledger.adoptChainHistory({ chainId: 338, genesisHash: GENESIS, common: block(5), epoch: undefined, reason: "first sight" });
        expect(adopted).to.deep.equal({ adopted: true, epoch: 1, settlements: 0, penalties: 0, paymentIdentifiers: 0, catalogEntries: 0, indexedNonces: 0 });
        expect(await ledger.chainHistory(338)).to.deep.equal({ chainId: 338, genesisHash: GENESIS, epoch: 1, checkpoints: [{ ...block(5), recordedAt: clock.now }] });
        expect(await ledger.chainHistory(25)).to.equal(undefined);
      });

      it("keeps the newest checkpoints (a later hash at the same height replaces the earlier), and records the index's progress as one in the same transaction", async () => {
        await ledger.adoptChainHistory({ chainId: 338, genesisHash: GENESIS, common: block(0), epoch: undefined, reason: "first sight" });
        for (let n = 1; n <= CHECKPOINT_LIMIT + 10; n++) await ledger.recordCheckpoint(338, block(n));
        await ledger.recordCheckpoint(338, block(CHECKPOINT_LIMIT + 10, "b"));
        const { checkpoints } = (await ledger.chainHistory(338))!;
        expect(checkpoints).to.have.length(CHECKPOINT_LIMIT);
        expect(checkpoints[0]).to.deep.include(block(CHECKPOINT_LIMIT + 10, "b"));
        expect(checkpoints.at(-1)!.number).to.equal(11n);
        // A range that raises the progress records its last block; one that does not (a gap before it) records nothing.
        await ledger.openNonceIndex(scope, 1n);
        await ledger.recordIndexedNonces(scope, [], { fromBlock: 1n, throughBlock: 500n, throughHash: block(500).hash });
        await ledger.recordIndexedNonces(scope, [], { fromBlock: 600n, throughBlock: 700n, throughHash: block(700).hash });
        const newest = (await ledger.chainHistory(338))!.checkpoints.map((c) => c.number);
        expect(newest.slice(0, 2)).to.deep.equal([500n, BigInt(CHECKPOINT_LIMIT + 10)]);
      });

      it("with nothing in common, sets aside every row of the chain (but the settled rows proven on it) and starts the index over; another chain's rows stay", async () => {
        await ledger.adoptChainHistory({ chainId: 338, genesisHash: GENESIS, common: block(0), epoch: undefined, reason: "first sight" });
        const old = await settledRow("old", 7);
        const proven = await settledRow("proven", 9);
        const inFlight = await sentRow(ledger, "in-flight");
        const elsewhere = await settledRow("elsewhere", 7, 25);
        await ledger.penalize({ ...scope, kind: "payer", subject: PAYER, until: 9_999_999_999n });
        await ledger.penalize({ ...mainnet, kind: "payer", subject: PAYER, until: 9_999_999_999n });
        await ledger.bindPaymentIdentifier(scope, PAYER, "pay_old_history_1", { nonce: nonceOf("old") });
        await ledger.bindPaymentIdentifier(mainnet, PAYER, "pay_old_history_1", { nonce: nonceOf("old") });
        await paid(catalogEntry("https://s.example/both", ["eip155:338", "cronos-mainnet"], "2026-11-24T10:00:00.000Z"));
        await paid(catalogEntry("https://s.example/testnet", ["cronos-testnet"], "2026-11-24T10:00:00.000Z"));
        await paid(catalogEntry("https://s.example/mainnet", ["cronos-mainnet"], "2026-11-24T10:00:00.000Z"));
        await ledger.openNonceIndex(scope, 1n);
        await ledger.recordIndexedNonces(scope, [{ authorizer: PAYER, nonce: nonceOf("spent"), blockNumber: 6n }], { fromBlock: 1n, throughBlock: 8n, throughHash: block(8).hash });
        await ledger.openNonceIndex(mainnet, 1n);
        await ledger.recordIndexedNonces(mainnet, [{ authorizer: PAYER, nonce: nonceOf("spent"), blockNumber: 6n }], { fromBlock: 1n, throughBlock: 8n });
        clock.advance(1_000);

        const adopted = await ledger.adoptChainHistory({ chainId: 338, genesisHash: OTHER_GENESIS, epoch: 1, keep: [proven.id], reason: "another genesis" });
        expect(adopted).to.deep.equal({ adopted: true, epoch: 2, settlements: 2, penalties: 1, paymentIdentifiers: 1, catalogEntries: 2, indexedNonces: 1 });
        expect(await ledger.chainHistory(338)).to.deep.equal({ chainId: 338, genesisHash: OTHER_GENESIS, epoch: 2, checkpoints: [] });
        // Never served again: by key, by hash, as a penalty, an identifier, a catalog entry, a stored nonce or progress.
        expect(await ledger.get(old.key)).to.equal(undefined);
        expect(await ledger.findByTxHash(old.hash)).to.equal(undefined);
        expect(await ledger.findByTxHash(inFlight.hash)).to.equal(undefined);
        expect(await ledger.listPending({ chainIds: [338] })).to.deep.equal([]);
        expect((await ledger.get(proven.key))?.txHash).to.equal(proven.hash);
        expect(await ledger.activePenalty(scope, [{ kind: "payer", subject: PAYER }], 0n)).to.equal(undefined);
        expect(await ledger.paymentIdentifierBinding(scope, PAYER, "pay_old_history_1")).to.equal(undefined);
        expect(await ledger.nonceIndexProgress(scope)).to.equal(undefined);
        expect(await ledger.indexedNonce(scope, PAYER, nonceOf("spent"))).to.equal(undefined);
        // Catalog entries with a way of paying on the chain go whole (listed again at their seller's next payment).
        expect(await listed()).to.deep.equal(["https://s.example/mainnet"]);
        // Another chain's rows are untouched.
        expect((await ledger.get(elsewhere.key))?.status).to.equal("settled");
        expect(await ledger.activePenalty(mainnet, [{ kind: "payer", subject: PAYER }], 0n)).to.not.equal(undefined);
        expect(await ledger.paymentIdentifierBinding(mainnet, PAYER, "pay_old_history_1")).to.deep.equal({ nonce: nonceOf("old") });
        expect(await ledger.indexedNonce(mainnet, PAYER, nonceOf("spent"))).to.not.equal(undefined);
        // Kept aside: every row as it was, tagged with the history it belonged to.
        const aside = await ledger.setAsideRows({ chainId: 338 });
        const kinds = aside.map((r) => r.kind).sort();
        expect(kinds).to.deep.equal(["catalog_entry", "catalog_entry", "payment_identifier", "penalty", "settlement", "settlement", "settlement_transaction", "settlement_transaction"]);
        expect(aside.every((r) => r.genesisHash === GENESIS && r.reason === "another genesis" && r.setAsideAt === clock.now)).to.equal(true);
        expect(aside.filter((r) => r.kind === "settlement").map((r) => r.row.tx_hash).sort()).to.deep.equal([old.hash, inFlight.hash].sort());
        expect(await ledger.setAsideRows({ chainId: 25 })).to.deep.equal([]);
        // The authorization can be claimed afresh on the chain's new history.
        expect((await ledger.claim(claimInput({ label: "old" }))).outcome).to.equal("claimed");
      });

      it("with a common block, sets aside settled rows mined after it (but those proven), penalties and identifiers written since, catalog entries paid from its time; lowers the index to it", async () => {
        await ledger.adoptChainHistory({ chainId: 338, genesisHash: GENESIS, common: block(0), epoch: undefined, reason: "first sight" });
        const before = await settledRow("before", 10);
        const at = await settledRow("at", 20);
        const after = await settledRow("after", 21);
        const proven = await settledRow("proven", 22);
        const inFlight = await sentRow(ledger, "in-flight");
        await ledger.penalize({ ...scope, kind: "payer", subject: PAYER, until: 9_999_999_999n });
        await ledger.bindPaymentIdentifier(scope, PAYER, "pay_before_1", { nonce: nonceOf("before") });
        await paid(catalogEntry("https://s.example/early", ["eip155:338"], new Date(clock.now).toISOString()));
        await ledger.openNonceIndex(scope, 5n);
        await ledger.recordIndexedNonces(
          scope,
          [5, 20, 21, 30].map((n) => ({ authorizer: PAYER, nonce: nonceOf(`spent-${n}`), blockNumber: BigInt(n) })),
          { fromBlock: 5n, throughBlock: 30n, throughHash: block(30).hash },
        );
        await ledger.recordCheckpoint(338, block(25));
        const since = clock.now;
        clock.advance(1_000);
        await ledger.bindPaymentIdentifier(scope, PAYER, "pay_after_1", { nonce: nonceOf("after") });
        await paid(catalogEntry("https://s.example/late", ["eip155:338"], new Date(clock.now).toISOString()));

        const adopted = await ledger.adoptChainHistory({ chainId: 338, genesisHash: GENESIS, common: block(20), since, commonTime: clock.now, epoch: 1, keep: [proven.id], reason: "reverted" });
        expect(adopted).to.deep.equal({ adopted: true, epoch: 1, settlements: 1, penalties: 0, paymentIdentifiers: 1, catalogEntries: 1, indexedNonces: 2 });
        expect(await ledger.get(after.key)).to.equal(undefined);
        for (const kept of [before, at, proven]) expect((await ledger.get(kept.key))?.status).to.equal("settled");
        expect((await ledger.get(inFlight.key))?.status).to.equal("sent");
        expect(await ledger.activePenalty(scope, [{ kind: "payer", subject: PAYER }], 0n)).to.not.equal(undefined);
        expect(await ledger.paymentIdentifierBinding(scope, PAYER, "pay_before_1")).to.deep.equal({ nonce: nonceOf("before") });
        expect(await ledger.paymentIdentifierBinding(scope, PAYER, "pay_after_1")).to.equal(undefined);
        expect(await listed()).to.deep.equal(["https://s.example/early"]);
        expect(await ledger.nonceIndexProgress(scope)).to.deep.equal({ fromBlock: 5n, throughBlock: 20n });
        expect((await ledger.indexedNonces(scope, { limit: 10 })).map((n) => n.blockNumber).sort((x, y) => Number(x - y))).to.deep.equal([5n, 20n]);
        expect((await ledger.chainHistory(338))!.checkpoints.map((c) => c.number)).to.deep.equal([20n, 0n]);
        // A common block before the index's start lowers it to its start, never below.
        await ledger.adoptChainHistory({ chainId: 338, genesisHash: GENESIS, common: block(2), epoch: 1, reason: "reverted deeper" });
        expect(await ledger.nonceIndexProgress(scope)).to.deep.equal({ fromBlock: 5n, throughBlock: 4n });
      });

      it("refuses a change decided on an epoch that moved meanwhile (another instance adopted first), changing nothing", async () => {
        await ledger.adoptChainHistory({ chainId: 338, genesisHash: GENESIS, common: block(0), epoch: undefined, reason: "first sight" });
        const row = await settledRow("kept", 3);
        const [a, b] = await threeHandles();
        const results = await Promise.all([a!, b!].map((handle) => handle.adoptChainHistory({ chainId: 338, genesisHash: OTHER_GENESIS, epoch: 1, reason: "another genesis" })));
        expect(results.filter((r) => r.adopted)).to.have.length(1);
        expect(results.filter((r) => !r.adopted)).to.deep.equal([{ adopted: false }]);
        expect((await ledger.chainHistory(338))!.epoch).to.equal(2);
        expect(await ledger.get(row.key)).to.equal(undefined);
        expect(await ledger.setAsideRows({ chainId: 338 })).to.have.length(2);
        expect(await ledger.adoptChainHistory({ chainId: 338, genesisHash: GENESIS, epoch: undefined, reason: "stale" })).to.deep.equal({ adopted: false });
      });

      // Nothing a change sets aside is deleted (migration 0013): undone, every row is back as it was.
      const listing = (resource: string, at: string) => ({
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
        await ledger.recordDiscoveryPayment(listing("https://s.example/weather", new Date(clock.now).toISOString()), bounds);
        await ledger.recordDiscoveryPayment({ ...listing("https://s.example/weather", new Date(clock.now).toISOString()), payer: PAYEE }, bounds);
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
        await ledger.recordDiscoveryPayment({ ...listing("https://s.example/weather", new Date(clock.now).toISOString()), words: ["new"] }, bounds);
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

      it("lists settled rows mined after a block, the latest first", async () => {
        await settledRow("a", 5);
        await settledRow("b", 9);
        await settledRow("c", 7);
        await settledRow("other chain", 8, 25);
        await sentRow(ledger, "in-flight");
        const labels = async (afterBlock?: bigint) =>
          (await ledger.settledAfter(338, { ...(afterBlock !== undefined ? { afterBlock } : {}), limit: 10 })).map((r) => r.blockNumber);
        expect(await labels()).to.deep.equal([9n, 7n, 5n]);
        expect(await labels(5n)).to.deep.equal([9n, 7n]);
        expect((await ledger.settledAfter(338, { limit: 1 })).map((r) => r.blockNumber)).to.deep.equal([9n]);
      });
    });

    describe("rate-limit counters", () => {
      it("counts hits in a window that starts at the first hit and resets when it ends", async () => {
        const start = clock.now;
        expect(await ledger.hit("verify:1.2.3.4", 60_000)).to.deep.equal({ hits: 1, resetAt: start + 60_000 });
        clock.advance(59_999);
        expect(await ledger.hit("verify:1.2.3.4", 60_000)).to.deep.equal({ hits: 2, resetAt: start + 60_000 });
        clock.advance(1);
        expect(await ledger.hit("verify:1.2.3.4", 60_000)).to.deep.equal({ hits: 1, resetAt: clock.now + 60_000 });
        await ledger.unhit("verify:1.2.3.4");
        expect((await ledger.hit("verify:1.2.3.4", 60_000)).hits).to.equal(1);
        await ledger.resetHits("verify:1.2.3.4");
        expect((await ledger.hit("verify:1.2.3.4", 60_000)).hits).to.equal(1);
      });

      it("counts 60 concurrent hits over three handles exactly", async () => {
        const handles = await threeHandles();
        const hits = await Promise.all(Array.from({ length: 60 }, (_, i) => handles[i % 3]!.hit("settle:5.6.7.8", 60_000)));
        expect(hits.map((h) => h.hits).sort((a, b) => a - b)).to.deep.equal(Array.from({ length: 60 }, (_, i) => i + 1));
      });

      it("prunes lapsed counters and instances, and penalties over for a day", async () => {
        await ledger.hit("k", 1_000);
        // Lapsed in a second of the ledger's clock, or at once where heartbeats go by the database's (a test cannot move it).
        await ledger.heartbeat("i", backend.leaseClock === "ledger" ? 1_000 : 0);
        const seconds = BigInt(Math.floor(clock.now / 1000));
        await ledger.penalize({ chainId: 338, token: TOKEN, kind: "payer", subject: PAYER, until: seconds - 86_400n });
        await ledger.penalize({ chainId: 338, token: TOKEN, kind: "code", subject: PAYER, until: seconds - 86_000n });
        clock.advance(1_000);
        await ledger.prune();
        const left = await ledger.activePenalty({ chainId: 338, token: TOKEN }, [{ kind: "payer", subject: PAYER }, { kind: "code", subject: PAYER }], 0n);
        expect(left?.kind).to.equal("code");
        expect(await ledger.hit("k", 1_000)).to.deep.equal({ hits: 1, resetAt: clock.now + 1_000 });
        expect(await ledger.instances()).to.deep.equal([]);
      });
    });

    describe("schema and health", () => {
      it("reports the database reachable with every migration applied", async () => {
        const health = await ledger.health();
        expect(health).to.deep.include({ backend: ledger.backend, reachable: true, migrations: { applied: MIGRATIONS.length, expected: MIGRATIONS.length } });
        expect(health.location).to.not.match(/:[^/@:]+@/); // no password in it
      });

      // Only a store that outlives its handles (a file, a database) can be opened again.
      if (backend.reopenable) {
        it("opens an existing store again without losing rows (several handles opening at once)", async () => {
          const row = await sentRow(ledger, "kept");
          const again = await Promise.all([store.open(), store.open(), store.open()]);
          for (const handle of again) expect((await handle.getById(row.id))?.txHash).to.equal(row.hash);
        });
      }
    });
  });
}
