import { expect } from "chai";
import express from "express";
import request from "supertest";
import { perMinuteLimit } from "../../src/facilitator/http/rate-limit.js";
import { silentLogger } from "../../src/facilitator/logger.js";
import { LedgerRateLimitStore } from "../../src/ledger/rate-limit-store.js";
import type { Ledger } from "../../src/ledger/types.js";
import { postgresBackend, TestClock, type LedgerStore } from "../helpers/ledger.js";

describe("ledger: rate limits counted in PostgreSQL, shared by every instance", function () {
  this.timeout(60_000);
  const backend = postgresBackend();
  let store: LedgerStore;
  let clock: TestClock;

  before(() => backend.setUp());
  after(() => backend.tearDown());
  beforeEach(async () => {
    clock = new TestClock();
    store = await backend.store(clock);
  });
  afterEach(() => store.dispose());

  /** One "instance": its own app, its own connection pool, limits in the shared database. */
  function instance(ledger: Ledger) {
    const app = express();
    app.post("/verify", perMinuteLimit({ name: "verify", limit: 3, store: new LedgerRateLimitStore(ledger, "verify:"), logger: silentLogger })!, (_req, res) => {
      res.json({ ok: true });
    });
    app.post("/settle", perMinuteLimit({ name: "settle", limit: 3, store: new LedgerRateLimitStore(ledger, "settle:"), logger: silentLogger })!, (_req, res) => {
      res.json({ ok: true });
    });
    return app;
  }

  it("answers the 4th request of a 3/min limit with 429 whichever instance it reaches", async () => {
    const apps = [instance(await store.open()), instance(await store.open()), instance(await store.open())];
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await request(apps[i % 3]!).post("/verify")).status);
    expect(statuses).to.deep.equal([200, 200, 200, 429]);
    // settle is a quota of its own
    expect((await request(apps[0]!).post("/settle")).status).to.equal(200);
  });

  it("opens a fresh quota when the window ends", async () => {
    const app = instance(await store.open());
    for (let i = 0; i < 3; i++) await request(app).post("/verify");
    expect((await request(app).post("/verify")).status).to.equal(429);
    clock.advance(60_000);
    expect((await request(app).post("/verify")).status).to.equal(200);
  });
});
