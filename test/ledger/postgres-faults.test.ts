import { expect } from "chai";
import { openPostgresLedger } from "../../src/ledger/postgres.js";
import { startTestPostgres, type TestPostgres } from "../../src/harness/postgres.js";
import type { Ledger } from "../../src/ledger/types.js";
import { claimInput } from "../helpers/ledger.js";
import { startPgFaultProxy, type PgFaultProxy } from "../helpers/pg-fault-proxy.js";
import { eventually, waitUntil, WAIT_MS } from "../helpers/wait.js";

// Issue 23 item 1: PostgreSQL going away must never crash the process. node-postgres emits 'error' on a
// Client whose connection dies; with no listener at that moment, Node throws it (an uncaught exception:
// the process exits). pg-pool listens only on its idle clients; a client is without a listener while it
// is being handed to a `pool.connect()` waiter (the waiter's listener comes a microtask later, while the
// rest of the socket chunk, the server's FATAL, is parsed at once), and for the whole time Kysely's
// migrator holds one. Each case below ends connections at one such point, through a proxy that delivers
// the server's last answer and its FATAL 57P01 in one chunk (what a busy process reads from a server that
// stopped), and fails on any uncaught exception, then checks that the ledger works again.


describe("ledger on PostgreSQL: a server going away mid-use never crashes the process", function () {
  this.timeout(60_000);
  let server: TestPostgres;
  let proxy: PgFaultProxy;
  let direct: Ledger;
  let ledger: Ledger | undefined;
  let label = 0;
  // The process-level guard: anything thrown outside a promise chain (an 'error' event with no listener).
  const uncaught: unknown[] = [];
  const guard = (error: unknown) => void uncaught.push(error);

  before(async () => {
    server = await startTestPostgres();
    process.on("uncaughtException", guard);
  });
  after(async () => {
    process.removeListener("uncaughtException", guard);
    await server?.stop();
  });
  beforeEach(async () => {
    uncaught.length = 0;
    const url = await server.createDatabase();
    proxy = await startPgFaultProxy(url);
    // Another instance on the same database, not behind the proxy: it changes rows while this one is tested.
    direct = await openPostgresLedger({ url, pollMs: 20 });
  });

  /**
   * One case: `body`, then what it opened closed, then, in the test itself, no error thrown outside any
   * promise meanwhile (closing included).
   */
  const faultCase = (title: string, body: () => Promise<void>) =>
    it(title, async () => {
      try {
        await body();
      } finally {
        await ledger?.close().catch(() => undefined);
        ledger = undefined;
        await direct.close();
        await proxy.close();
      }
      const crashes = uncaught.map((error) => `${(error as { code?: string }).code ?? ""} ${String(error)}`);
      expect(crashes, "an error was thrown outside any promise (in a facilitator: the process exits)").to.deep.equal([]);
    });

  /** Opens the ledger under test through the proxy; `poolSize` 1 makes every second caller wait for the one client. */
  const open = async (poolSize = 1) => (ledger = await openPostgresLedger({ url: proxy.url, poolSize, pollMs: 60_000 }));

  /** A claim through `of` that succeeds (the pool reconnects after the fault). */
  const claims = (of: Ledger) =>
    eventually(
      async () => {
        const claim = await of.claim(claimInput({ label: `after-${++label}` }));
        expect(claim.outcome).to.equal("claimed");
        return claim;
      },
      "the ledger to work again",
      WAIT_MS,
      100,
    );

  /**
   * Whether the ledger hears other instances again (its LISTEN client reconnected): a claim queued for any
   * instance by the other one reaches its `onQueued` listeners, which only a notification calls (no poll).
   * Each try queues one more, until one is heard.
   */
  const hearsNotifications = async (of: Ledger) => {
    let heard = 0;
    const stop = of.onQueued(() => heard++);
    try {
      await eventually(
        async () => {
          const queued = await direct.claim(claimInput({ label: `heard-${++label}`, owner: null }));
          expect(queued.outcome).to.equal("claimed");
          expect(heard, "queued claims heard of").to.be.above(0);
        },
        "the LISTEN client to hear notifications again",
        WAIT_MS,
        100,
      );
    } finally {
      stop();
    }
  };

  faultCase("a query's client, the FATAL in the same chunk as the query's answer, a transaction waiting for it: the dead client is not handed over", async () => {
    const of = await open(1);
    const base = proxy.connections();
    // The pool's one client: its start-up (ReadyForQuery 1), then the query's answer (2), then the FATAL.
    const fired = proxy.killAfter((m) => m.connection > base && m.type === "Z" && m.count === 2);
    const [read, claim] = await Promise.allSettled([of.leases(), of.claim(claimInput({ label: "waiting" }))]);
    expect((await fired).type).to.equal("Z");
    expect(read.status).to.equal("fulfilled");
    // The FATAL arrived while the query still held the client: it is destroyed on release, and the waiting
    // transaction gets a new connection instead of the dead one.
    expect(claim.status).to.equal("fulfilled");
    await claims(of);
  });

  faultCase("a new client's start-up answer and the FATAL in one chunk, a transaction waiting for that client", async () => {
    const of = await open(1);
    const base = proxy.connections();
    const fired = proxy.killAfter((m) => m.connection > base && m.type === "Z" && m.count === 1);
    const claim = await of.claim(claimInput({ label: "connecting" })).then(
      () => "claimed",
      (error: unknown) => String(error),
    );
    await fired;
    expect(claim).to.match(/terminating connection due to administrator command|Connection terminated|not queryable/);
    await claims(of);
  });

  faultCase("mid-handshake: the server stops while the client authenticates", async () => {
    const of = await open(2);
    const base = proxy.connections();
    const fired = proxy.killAfter((m) => m.connection > base && m.type === "R" && m.count === 1);
    const claim = await of.claim(claimInput({ label: "handshake" })).then(
      () => "claimed",
      (error: unknown) => String(error),
    );
    await fired;
    expect(claim).to.not.equal("claimed");
    await claims(of);
  });

  faultCase("mid-transaction: the server stops after BEGIN", async () => {
    const of = await open(2);
    const fired = proxy.killAfter((m) => m.type === "Z" && m.status === "T");
    const claim = await of.claim(claimInput({ label: "in-transaction" })).then(
      () => "claimed",
      (error: unknown) => String(error),
    );
    await fired;
    expect(claim).to.match(/terminating connection due to administrator command|Connection terminated|not queryable/);
    await claims(of);
  });

  faultCase("idle pool clients and the LISTEN client: every session ended at once; the LISTEN client's first reconnect is ended during its start-up too", async () => {
    const of = await open(4);
    await Promise.all([of.leases(), of.claim(claimInput({ label: "warm-1" })), of.claim(claimInput({ label: "warm-2" }))]);
    const base = proxy.connections();
    // The next connection after the shutdown is the LISTEN client's reconnect (nothing else asks meanwhile).
    const reconnect = proxy.killAfter((m) => m.connection > base && m.type === "Z" && m.count === 1);
    proxy.killAll();
    await reconnect;
    await hearsNotifications(of);
    await claims(of);
  });

  faultCase("the real server stopped and started again: idle clients, the LISTEN client and its reconnects while it is down", async () => {
    const of = await open(4);
    await Promise.all([of.leases(), of.claim(claimInput({ label: "warm-3" })), of.claim(claimInput({ label: "warm-4" }))]);
    await hearsNotifications(of);
    await server.halt();
    try {
      expect((await of.health()).reachable).to.equal(false);
      const refused = await of.claim(claimInput({ label: "while-down" })).then(
        () => "claimed",
        () => "refused",
      );
      expect(refused).to.equal("refused");
      // Until a few LISTEN reconnects were refused (each a connection through the proxy).
      const base = proxy.connections();
      await waitUntil("two reconnects while the server is down", () => proxy.connections() >= base + 2, WAIT_MS, 50);
    } finally {
      await server.resume();
    }
    await eventually(async () => expect((await of.health()).reachable).to.equal(true), "health to come back", WAIT_MS, 100);
    await hearsNotifications(of);
    await claims(of);
  });

  faultCase("start-up: the server stops during the migration (the migrator's own pool): open rejects, nothing is thrown", async () => {
    // The migrator's connection, once it is in its transaction (the migration lock, then the migrations).
    const fired = proxy.killAfter((m) => m.type === "Z" && m.status === "T");
    const opening = await openPostgresLedger({ url: proxy.url, poolSize: 2 }).then(
      (opened) => {
        ledger = opened;
        return "opened";
      },
      (error: unknown) => String(error),
    );
    await fired;
    expect(opening).to.match(/^LedgerError: DATABASE_URL: (migrating|cannot use) /);
    // A late 'error' event (the connection's end) would be thrown within a few turns of the loop: the open
    // and the claim below take many round trips through the same proxy, and the check comes after them.
    const opened = await openPostgresLedger({ url: proxy.url, poolSize: 2 });
    ledger = opened;
    await claims(opened);
  });
});
