import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { openSqliteLedger } from "../../src/ledger/sqlite.js";
import { LedgerOutbox } from "../../src/settlement/outbox.js";
import { KeyWorker } from "../../src/settlement/key-worker.js";
import { IllegalTransitionError, type Ledger } from "../../src/ledger/types.js";
import { recordingLogger } from "../helpers/facilitator.js";
import { claimInput, RELAYER, settlementDeps, signedTx } from "../helpers/ledger.js";

// Issue 23 item 1: outcomes answered while the ledger was unreachable are kept in a bounded in-process
// outbox and written, in order, as soon as the database is back, before the instance releases the claims
// it abandoned meanwhile.

describe("ledger outbox", () => {
  it("bounded: capacity 2 with 3 writes kept drops the oldest, and says so once", async () => {
    const { logger, lines } = recordingLogger();
    const outbox = new LedgerOutbox({ logger, capacity: 2 });
    const written: string[] = [];
    for (const what of ["a", "b", "c"]) outbox.add(what, async () => void written.push(what));
    expect(outbox.size).to.equal(2);
    expect(lines.map((l) => [l.level, l.message, l.fields])).to.deep.equal([
      ["error", "ledger outbox full: oldest write dropped (the reconciler will record it from the chain)", { dropped: "a", capacity: 2 }],
    ]);
    expect(await outbox.drain()).to.equal(true);
    expect(written).to.deep.equal(["b", "c"]);
    expect(outbox.size).to.equal(0);
  });

  it("drains oldest first and stops at the first failure, keeping it and what follows for the next drain", async () => {
    const { logger, lines } = recordingLogger();
    const outbox = new LedgerOutbox({ logger });
    const written: string[] = [];
    let down = true;
    outbox.add("first", async () => void written.push("first"));
    outbox.add("second", async () => {
      if (down) throw new Error("connect ECONNREFUSED");
      written.push("second");
    });
    outbox.add("third", async () => void written.push("third"));

    expect(await outbox.drain()).to.equal(false);
    expect(written).to.deep.equal(["first"]);
    expect(outbox.size).to.equal(2);
    expect(lines.at(-1)).to.deep.equal({
      level: "warn",
      message: "ledger outbox: write failed, kept for the next try",
      fields: { what: "second", left: 2, err: "Error: connect ECONNREFUSED" },
    });

    down = false;
    expect(await outbox.drain()).to.equal(true);
    expect(written).to.deep.equal(["first", "second", "third"]);
    expect(outbox.size).to.equal(0);
    expect(lines.at(-1)).to.deep.equal({ level: "info", message: "ledger outbox drained", fields: { written: 2 } });
  });

  it("a write refused by the row's state (decided meanwhile from the chain) is dropped, and does not hold back the rest", async () => {
    const { logger, lines } = recordingLogger();
    const outbox = new LedgerOutbox({ logger });
    const written: string[] = [];
    outbox.add("settlement 3 reverted", async () => {
      throw new IllegalTransitionError("settled", "failed", 3);
    });
    outbox.add("penalty", async () => void written.push("penalty"));
    expect(await outbox.drain()).to.equal(true);
    expect(written).to.deep.equal(["penalty"]);
    expect(lines.map((l) => [l.level, l.message, l.fields.what])).to.deep.equal([
      ["warn", "ledger outbox: write refused by the row's state (decided meanwhile), dropped", "settlement 3 reverted"],
      ["info", "ledger outbox drained", undefined],
    ]);
  });

  it("writeOrKeep: written at once when the ledger answers, kept when it refuses", async () => {
    const { logger } = recordingLogger();
    const outbox = new LedgerOutbox({ logger });
    const written: string[] = [];
    await outbox.writeOrKeep("now", async () => void written.push("now"));
    await outbox.writeOrKeep("later", async () => {
      throw new Error("Connection terminated unexpectedly");
    });
    expect(written).to.deep.equal(["now"]);
    expect(outbox.size).to.equal(1);
  });

  it("recovery writes the outbox first, and releases the abandoned claims only once it is empty", async () => {
    const { logger, lines } = recordingLogger();
    // The instance's ledger, and a second handle on the same database for the outbox's writes: closed, its
    // writes fail as a database that refuses them does, while the instance's own handle answers.
    const dir = await mkdtemp(join(tmpdir(), "x402-outbox-"));
    try {
      const location = join(dir, "ledger.db");
      const ledger = openSqliteLedger({ location });
      let writer: Ledger = openSqliteLedger({ location });
      await writer.close();
      try {
        // A claim abandoned during the outage (nothing sent for it), one a settle of this instance still works
        // on, and a settlement whose outcome the outbox holds.
        const claimed = async (label: string) => {
          const claim = await ledger.claim(claimInput({ label }));
          if (claim.outcome !== "claimed") throw new Error(`expected a claim, got ${claim.outcome}`);
          return claim;
        };
        const abandoned = await claimed("abandoned");
        const working = await claimed("working");
        const sent = await claimed("sent");
        await ledger.acquireLease(RELAYER, "instance-a", 60_000);
        const tx = signedTx("sent");
        expect(await ledger.recordBroadcast({ id: sent.record.id, owner: "instance-a", hash: tx.hash, raw: tx.raw, relayer: RELAYER, relayerNonce: 7, checkAfterMs: 5_000 })).to.equal(true);
        const deps = settlementDeps(ledger, { logger, instanceId: "instance-a" });
        const worker = new KeyWorker(deps);
        const written: string[] = [];
        deps.outbox.add("settlement sent settled", async () => {
          await writer.markSettled(sent.record.id, { txHash: tx.hash, blockNumber: 5n, blockTimestamp: 10n });
          written.push("settled");
        });
        deps.outbox.add("a second write", async () => void written.push("second"));
        const status = async (id: number) => [(await ledger.getById(id))!.status, (await ledger.getById(id))!.errorCode];
        let finish!: () => void;
        const inHand = deps.inFlight.claim(working.record.id, () => new Promise<void>((resolve) => (finish = resolve)));

        // The database answers but refuses the outbox's write: nothing written, nothing released.
        expect(await worker.recover()).to.equal(false);
        expect(written).to.deep.equal([]);
        expect(deps.outbox.size).to.equal(2);
        expect(await status(abandoned.record.id)).to.deep.equal(["claimed", undefined]);
        expect(await status(sent.record.id)).to.deep.equal(["sent", undefined]);

        // It takes the writes again: the outbox first, in order, then the abandoned claim is released (the one in hand kept).
        writer = openSqliteLedger({ location });
        expect(await worker.recover()).to.equal(true);
        expect(written).to.deep.equal(["settled", "second"]);
        expect(deps.outbox.size).to.equal(0);
        expect(await status(sent.record.id)).to.deep.equal(["settled", undefined]);
        expect(await status(abandoned.record.id)).to.deep.equal(["failed", "notSent"]);
        expect(await status(working.record.id)).to.deep.equal(["claimed", undefined]);
        expect(lines.at(-1)).to.deep.equal({ level: "info", message: "claims abandoned during the ledger outage released (nothing was sent for them)", fields: { released: [abandoned.record.id] } });
        finish();
        await inHand;
      } finally {
        await writer.close();
        await ledger.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
