import { expect } from "chai";
import pg from "pg";
import { advisoryLockKeys, openPostgresLedger } from "../../src/ledger/postgres.js";
import type { TestPostgres } from "../../src/harness/postgres.js";
import type { Ledger } from "../../src/ledger/types.js";
import { claimInput, openTestPostgres, PAYER, TOKEN } from "../helpers/ledger.js";
import { waitFor, WAIT_MS } from "../helpers/wait.js";

/**
 * A burst queues; it is not an outage. The instances test (50 settles of one authorization over three
 * instances on a loaded host) met 503 "the settlement ledger is unavailable": a payer's lock wait counted
 * as a statement (statement_timeout cancelled it), and a call's wait for one of the pool's connections
 * counted as the database not answering (which also failed every other waiting call at once).
 */
describe("ledger on PostgreSQL: waiting for a turn is not the database failing to answer", function () {
  this.timeout(60_000);
  let server: TestPostgres;
  let ledger: Ledger | undefined;
  let holder: pg.Client | undefined;

  before(async () => {
    server = await openTestPostgres();
  });
  afterEach(async () => {
    await ledger?.close();
    await holder?.end();
    ledger = holder = undefined;
  });

  it("a claim waits behind another instance's hold of the payer's lock, and calls queued behind it for the pool's one connection all answer, for several times the answer time", async () => {
    const url = await server.createDatabase();
    // Answer time 200 + 500 ms; one connection, so every call after the claim queues for it.
    ledger = await openPostgresLedger({ url, poolSize: 1, statementTimeoutMs: 200, pollMs: 60_000 });
    holder = new pg.Client({ connectionString: url });
    await holder.connect();
    // Another instance's claim of the same payer, in the middle of its transaction.
    const [space, key] = advisoryLockKeys(`338:${TOKEN.toLowerCase()}:${PAYER.toLowerCase()}`);
    await holder.query("SELECT pg_advisory_lock($1, $2)", [space, key]);

    const claim = ledger.claim(claimInput({ label: "behind-the-lock" }));
    let claimEnded = false;
    void claim.then(
      () => (claimEnded = true),
      () => (claimEnded = true),
    );
    const others = Array.from({ length: 5 }, (_, i) => ledger!.claim(claimInput({ label: `queued-${i}`, key: { ...claimInput().key, authorizer: TOKEN, nonce: claimInput({ label: `queued-${i}` }).key.nonce } })));
    // The claim has waited on the lock for three times the answer time (the database's clock, not a sleep).
    await waitFor(
      async () => (await holder!.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND clock_timestamp() - query_start > interval '2100 milliseconds'")).rows[0].n as number,
      // An ended claim (refused by a time-out) fails the test below with its error.
      (n) => n === 1 || claimEnded,
      "the claim waiting on the payer's lock for 2.1 s",
      WAIT_MS,
      50,
    );
    await holder.query("SELECT pg_advisory_unlock($1, $2)", [space, key]);

    const outcomes = await Promise.allSettled([claim, ...others]);
    expect(outcomes.map((o) => (o.status === "fulfilled" ? o.value.outcome : String(o.reason)))).to.deep.equal(Array(6).fill("claimed"));
    const health = await ledger.health();
    expect([health.reachable, health.error]).to.deep.equal([true, undefined]);
  });
});
