import { expect } from "chai";
import type { Address } from "viem";
import { LeaseKeeper, type LeaseKeeperOptions } from "../../src/ledger/leases.js";
import { MEMORY, openSqliteLedger } from "../../src/ledger/sqlite.js";
import type { Ledger } from "../../src/ledger/types.js";
import { TestClock } from "../helpers/ledger.js";

const KEYS: Address[] = [
  "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720",
  "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955",
  "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f",
];

describe("ledger: relayer key leases shared between instances", () => {
  let clock: TestClock;
  let ledger: Ledger;
  let events: string[];

  beforeEach(() => {
    clock = new TestClock();
    ledger = openSqliteLedger({ location: MEMORY, clock: clock.read });
    events = [];
  });
  afterEach(() => ledger.close());

  const keeper = (id: string, options: Partial<LeaseKeeperOptions> = {}) =>
    new LeaseKeeper({
      ledger,
      instanceId: id,
      keys: KEYS,
      ttlMs: 15_000,
      clock: clock.read,
      onAcquired: (lease) => events.push(`${id} +${lease.address.slice(0, 6)}#${lease.epoch}`),
      onLost: (address) => events.push(`${id} -${address.slice(0, 6)}`),
      ...options,
    });

  it("gives a lone instance every key", async () => {
    const a = keeper("a");
    await a.tick();
    expect(a.held()).to.have.members(KEYS);
    expect(events).to.have.members(["a +0xa0Ee#1", "a +0x14dC#1", "a +0x2361#1"]);
    expect((await ledger.leases()).map((l) => l.holder)).to.deep.equal(["a", "a", "a"]);
  });

  it("shares the keys fairly as instances join: each aims at ceil(keys / live instances)", async () => {
    const a = keeper("a");
    const b = keeper("b");
    const c = keeper("c");
    await a.tick();
    await b.tick(); // b is live but every key is taken
    expect(b.held()).to.deep.equal([]);
    await a.tick(); // two live: a keeps ceil(3/2) = 2, releases one
    await b.tick();
    expect([a.held().length, b.held().length]).to.deep.equal([2, 1]);
    await c.tick();
    await a.tick(); // three live: one each
    await b.tick();
    await c.tick();
    expect([a.held().length, b.held().length, c.held().length]).to.deep.equal([1, 1, 1]);
    expect(new Set([...a.held(), ...b.held(), ...c.held()]).size).to.equal(3);
  });

  it("keeps a busy key rather than releasing it to another instance", async () => {
    const a = keeper("a", { isIdle: () => false });
    await a.tick();
    await keeper("b").tick();
    await a.tick();
    expect(a.held()).to.have.length(3);
  });

  it("takes over a dead instance's keys once their leases lapse, with a new epoch", async () => {
    const a = keeper("a");
    const b = keeper("b");
    await a.tick();
    await b.tick();
    // a stops without a word (SIGKILL): its heartbeat and leases lapse after the time-to-live.
    clock.advance(14_999);
    await b.tick();
    expect(b.held()).to.deep.equal([]);
    clock.advance(1);
    await b.tick();
    expect(b.held()).to.have.members(KEYS);
    expect(events.filter((e) => e.startsWith("b"))).to.have.members(["b +0xa0Ee#2", "b +0x14dC#2", "b +0x2361#2"]);
  });

  it("stops sending from a key whose lease it could not renew in time", async () => {
    const a = keeper("a");
    await a.tick();
    clock.advance(5_000);
    expect(a.held()).to.have.length(3);
    // No renewal (the database is unreachable): within the last third of the lease the key is not used.
    clock.advance(5_001);
    expect(a.held()).to.deep.equal([]);
    expect(a.holds(KEYS[0]!)).to.equal(false);
  });

  it("notices a key taken by another instance after its lease lapsed", async () => {
    const a = keeper("a");
    await a.tick();
    clock.advance(15_000);
    await ledger.acquireLease(KEYS[0]!, "b", 15_000);
    await a.tick();
    expect(a.held()).to.have.members(KEYS.slice(1));
    expect(events).to.include("a -0xa0Ee");
  });

  it("releases its keys and leaves the list of instances when stopped, so others take them at once", async () => {
    const a = keeper("a");
    const b = keeper("b");
    await a.tick();
    await b.tick();
    await a.stop();
    expect((await ledger.instances()).map((i) => i.id)).to.deep.equal(["b"]);
    await b.tick();
    expect(b.held()).to.have.members(KEYS);
  });
});
