import { expect } from "chai";
import { LedgerOutbox } from "../../src/settlement/outbox.js";
import { KeyWorker } from "../../src/settlement/key-worker.js";
import { MEMORY, openSqliteLedger } from "../../src/ledger/sqlite.js";
import { IllegalTransitionError } from "../../src/ledger/types.js";
import { recordingLogger } from "../helpers/facilitator.js";
import { claimInput, settlementDeps } from "../helpers/ledger.js";

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
    const ledger = openSqliteLedger({ location: MEMORY });
    try {
      const abandoned = await ledger.claim(claimInput({ label: "abandoned", owner: "instance-a" }));
      const working = await ledger.claim(claimInput({ label: "working", owner: "instance-a" }));
      if (abandoned.outcome !== "claimed" || working.outcome !== "claimed") throw new Error("not claimed");
      const deps = settlementDeps(ledger, { logger, instanceId: "instance-a" });
      const worker = new KeyWorker(deps);
      const calls: string[] = [];
      let refuse = true;
      deps.outbox.add("settlement 1 settled", async () => {
        if (refuse) throw new Error("the database system is starting up");
        calls.push("write settlement 1");
      });
      deps.outbox.add("settlement 2 reverted", async () => void calls.push("write settlement 2"));
      // A settle of this instance still works on one claim: it is kept.
      let finish!: () => void;
      const inHand = deps.inFlight.claim(working.record.id, () => new Promise<void>((resolve) => (finish = resolve)));

      // The database answers the probe but still refuses the write: nothing is released.
      expect(await worker.recover()).to.equal(false);
      expect(calls).to.deep.equal([]);
      expect((await ledger.getById(abandoned.record.id))?.status).to.equal("claimed");

      refuse = false;
      expect(await worker.recover()).to.equal(true);
      expect(calls).to.deep.equal(["write settlement 1", "write settlement 2"]);
      expect(await ledger.getById(abandoned.record.id)).to.deep.include({ status: "failed", errorCode: "notSent" });
      expect((await ledger.getById(working.record.id))?.status).to.equal("claimed");
      expect(lines.at(-1)).to.deep.equal({ level: "info", message: "claims abandoned during the ledger outage released (nothing was sent for them)", fields: { released: [abandoned.record.id] } });
      finish();
      await inHand;
    } finally {
      await ledger.close();
    }
  });
});
