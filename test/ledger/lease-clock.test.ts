import { expect } from "chai";
import type { Address } from "viem";
import { startTestPostgres, type TestPostgres } from "../../src/harness/postgres.js";
import { LeaseKeeper } from "../../src/ledger/leases.js";
import { openPostgresLedger } from "../../src/ledger/postgres.js";
import type { Ledger } from "../../src/ledger/types.js";
import { claimInput, RELAYER, signedTx } from "../helpers/ledger.js";

// Issue 39, finding 7: leases compared their expiry with each instance's own clock, so an instance whose clock ran
// ahead (a skew over about 10 s) took a lease another instance held and still renewed. On PostgreSQL, the ledger
// instances share, a lease now goes by the database's clock: two instances against one embedded PostgreSQL, one of
// them a minute ahead (its clock injected, as a host with a wrong clock), each with the facilitator's lease keeper.

const SKEW_MS = 60_000;
const TTL_MS = 15_000;
const KEYS: Address[] = [RELAYER];

describe("relayer key leases go by the database's clock: an instance with a skewed clock (issue 39)", function () {
  this.timeout(60_000);
  let server: TestPostgres;
  let ledgers: Ledger[] = [];
  before(async () => {
    server = await startTestPostgres();
  });
  after(async () => {
    await server?.stop();
  });
  afterEach(async () => {
    await Promise.all(ledgers.map((ledger) => ledger.close()));
    ledgers = [];
  });

  /** Two instances' ledgers on one database: `honest` on the right time, `skewed` `skew` ms off. */
  async function instances(skew: number): Promise<{ honest: Ledger; skewed: Ledger; skewedClock: () => number }> {
    const url = await server.createDatabase();
    const skewedClock = () => Date.now() + skew;
    const honest = await openPostgresLedger({ url, poolSize: 2 });
    const skewed = await openPostgresLedger({ url, clock: skewedClock, poolSize: 2 });
    ledgers.push(honest, skewed);
    return { honest, skewed, skewedClock };
  }

  it("an instance whose clock runs a minute ahead cannot take a lease another holds and renews, nor write under it", async () => {
    const { honest, skewed, skewedClock } = await instances(SKEW_MS);
    const a = new LeaseKeeper({ ledger: honest, instanceId: "instance-a", keys: KEYS, ttlMs: TTL_MS });
    const b = new LeaseKeeper({ ledger: skewed, instanceId: "instance-b", keys: KEYS, ttlMs: TTL_MS, clock: skewedClock });
    await a.tick();
    expect(a.held()).to.deep.equal(KEYS);
    // By its own clock, a's lease (15 s) lapsed 45 s ago: by the database's, it lives.
    await b.tick();
    await b.tick();
    expect(b.held()).to.deep.equal([]);
    expect(await skewed.acquireLease(RELAYER, "instance-b", TTL_MS)).to.equal(undefined);
    expect((await honest.leases()).map((lease) => [lease.holder, lease.epoch])).to.deep.equal([["instance-a", 1]]);
    // The write-ahead fence says the same: b may not record a transaction under the key, a may.
    const claimed = await skewed.claim(claimInput({ label: "skewed", owner: "instance-b" }));
    if (claimed.outcome !== "claimed") throw new Error(claimed.outcome);
    const record = { id: claimed.record.id, owner: "instance-b", ...signedTx("skewed"), relayer: RELAYER, relayerNonce: 1, checkAfterMs: 1_000 };
    expect(await skewed.recordBroadcast(record)).to.equal(false);
    expect(await skewed.recordFiller({ chainId: 338, holder: "instance-b", leaseEpoch: 1, relayer: RELAYER, relayerNonce: 2, ...signedTx("skewed-filler") })).to.equal(false);
    expect(await honest.recordFiller({ chainId: 338, holder: "instance-a", leaseEpoch: 1, relayer: RELAYER, relayerNonce: 2, ...signedTx("honest-filler") })).to.equal(true);
    // Both instances are live, by the database's clock: each aims at its share (one key: a keeps it).
    expect((await skewed.instances()).map((instance) => instance.id).sort()).to.deep.equal(["instance-a", "instance-b"]);
    await a.tick();
    expect(a.held()).to.deep.equal(KEYS);
    // a leaves: its key is b's at once (released), whatever b's clock says.
    await a.stop();
    await b.tick();
    expect(b.held()).to.deep.equal(KEYS);
    expect((await honest.leases()).map((lease) => [lease.holder, lease.epoch])).to.deep.equal([["instance-b", 2]]);
    await b.stop();
  });

  it("an instance whose clock runs a minute behind holds its lease by the time it asked for, not longer: its keeper stops sending when its time to live is used", async () => {
    const { honest, skewed, skewedClock } = await instances(-SKEW_MS);
    let behind = skewedClock();
    const b = new LeaseKeeper({ ledger: skewed, instanceId: "instance-b", keys: KEYS, ttlMs: TTL_MS, clock: () => behind });
    await b.tick();
    expect(b.holds(RELAYER)).to.equal(true);
    // Its own clock moves on by the time to live (a paused process): it no longer sends, though the lease's end, in
    // the database's time, reads a minute after its clock.
    behind += TTL_MS;
    expect(b.holds(RELAYER)).to.equal(false);
    expect((await honest.leases())[0]!.expiresAt).to.be.greaterThan(behind);
    await b.stop();
  });
});
