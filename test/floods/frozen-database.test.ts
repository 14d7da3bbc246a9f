import { expect } from "chai";
import { appendPaymentIdentifierToExtensions, declarePaymentIdentifierExtension, generatePaymentId } from "@x402/extensions/payment-identifier";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { Hex } from "viem";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { startTestPostgres, type TestPostgres } from "../../src/harness/postgres.js";
import { makePayment, recordingLogger, startFacilitatorOnChain, v2BodyOf } from "../helpers/facilitator.js";
import { startPgFaultProxy, type PgFaultProxy } from "../helpers/pg-fault-proxy.js";
import { scrapeMetric } from "../helpers/metrics.js";
import { fetchJson, type JsonAnswer } from "../helpers/http.js";
import { waitFor, waitUntil, WAIT_MS } from "../helpers/wait.js";

// Issue 29 item 3: PostgreSQL frozen (as SIGSTOP does: nothing read, nothing answered) under a facilitator.
// Verify without a payment identifier keeps answering (its rate limit counted in memory meanwhile), every
// other call answers or fails within its bounded time, /healthcheck says the ledger is down without
// saying where it is, and when the database runs again nothing was lost or sent twice.

const KEY = "frozen-db-seller-key-0123456789";
const AUTH = { Authorization: `Bearer ${KEY}` };

type Started = Awaited<ReturnType<typeof startFacilitatorOnChain>>;
type Answer = JsonAnswer;

/** GET `path` (POST with `body`) on the facilitator, with the seller's key unless `headers` say otherwise. */
const call = (started: Started, path: string, body?: unknown, headers: Record<string, string> = AUTH): Promise<Answer> => fetchJson(`${started.running.url}${path}`, { body, headers });

describe("floods: the ledger's PostgreSQL frozen under a facilitator", function () {
  this.timeout(180_000);
  let postgres: TestPostgres;
  let proxy: PgFaultProxy;
  let started: Started;
  let databaseUrl: string;
  const log = recordingLogger();

  before(async () => {
    postgres = await startTestPostgres();
    databaseUrl = await postgres.createDatabase();
    proxy = await startPgFaultProxy(databaseUrl);
    started = await startFacilitatorOnChain(
      {
        DATABASE_URL: proxy.url,
        API_KEYS: KEY,
        // Counted in the database (the shared store): what a frozen database would hold back.
        RATE_LIMIT_KEY_VERIFY_PER_MINUTE: "100000",
        RATE_LIMIT_KEY_SETTLE_PER_MINUTE: "100000",
        STATE_INDEX: "true",
      },
      { logger: log.logger },
    );
  });
  after(async () => {
    proxy?.thaw();
    await started?.running.close(0);
    await proxy?.close();
    await postgres?.stop();
  });

  it("says the ledger is up, never where it is; the detailed view (with an API key) does, without the password", async () => {
    const open = await call(started, "/healthcheck", undefined, {});
    expect(open.status).to.equal(200);
    expect(open.body.results.ledger).to.deep.include({ backend: "postgres", state: "up", reachable: true, shared: true });
    expect(open.body.results.ledger).not.to.have.property("location");
    const password = new URL(databaseUrl).password;
    expect(password.length).to.be.greaterThan(0);
    for (const secret of [password, new URL(proxy.url).port, new URL(databaseUrl).pathname]) expect(JSON.stringify(open.body)).not.to.include(secret);

    const detailed = await call(started, "/healthcheck?detail=1");
    expect(detailed.status).to.equal(200);
    const where = new URL(proxy.url);
    expect(detailed.body.results.ledger.location).to.equal(`postgres://127.0.0.1:${where.port}${where.pathname}`);
    expect(JSON.stringify(detailed.body)).not.to.include(password);
    const refused = await call(started, "/healthcheck?detail=1", undefined, {});
    expect([refused.status, refused.body]).to.deep.equal([401, { error: "Unauthorized: an API key is required (Authorization: Bearer <key>)" }]);
    const unknown = await call(started, "/healthcheck?detail=1", undefined, { Authorization: "Bearer not-one-of-ours-0123456789" });
    expect([unknown.status, unknown.body]).to.deep.equal([401, { error: "Unauthorized: unknown API key" }]);
    // The start-up line of `npm run facilitator` names it (src/facilitator/main.ts); the ledger says where it is.
    expect((await started.running.facilitator.coordination.ledger.health()).location).to.equal(detailed.body.results.ledger.location);
  });

  it("frozen: verify answers (counted in memory), settles answer 503 without sending, /healthcheck says down; thawed: each 503 retried settles once, nothing sent twice", async () => {
    const { chain } = started;
    const settled = await call(started, "/v2/x402/settle", (await makePayment(chain)).body);
    expect(settled.body.event).to.equal("payment.settled");
    const verifies = await Promise.all(Array.from({ length: 20 }, () => makePayment(chain)));
    const payee = privateKeyToAccount(generatePrivateKey()).address;
    const settles = await Promise.all(Array.from({ length: 6 }, (_, i) => makePayment(chain, { payTo: payee, amount: 1_000n + BigInt(i) })));
    const identified = v2BodyOf(await makePayment(chain));
    (identified.paymentPayload as Record<string, unknown>).extensions = appendPaymentIdentifierToExtensions(
      { "payment-identifier": declarePaymentIdentifierExtension(true) },
      generatePaymentId(),
    );
    const relayer = started.running.relayers[0]!;
    const nonceBefore = await chain.publicClient.getTransactionCount({ address: relayer, blockTag: "pending" });

    proxy.freeze();
    const [verified, refusedSettles, identifiedVerify] = await Promise.all([
      (async () => {
        const answers: Answer[] = [];
        for (const payment of verifies) answers.push(await call(started, "/v2/x402/verify", payment.body));
        return answers;
      })(),
      Promise.all(settles.map((payment) => call(started, "/v2/x402/settle", payment.body))),
      call(started, "/v2/x402/verify", identified),
    ]);
    // Every verify answered, valid: the rate limit judged by this instance's own count.
    expect(verified.map((a) => [a.status, a.body.isValid])).to.deep.equal(Array(20).fill([200, true]));
    expect(await scrapeMetric(started.running.metricsUrl!, 'x402_rate_limit_store_fallbacks_total{limiter="verify",reason="slow"}')).to.be.greaterThan(0);
    expect(log.lines.filter((l) => l.message === "rate limits: the shared store is slow or failing; counting in this instance's memory meanwhile")).to.have.length.greaterThan(0);
    // No settle was sent: each is a 503 without a verdict, to retry.
    for (const answer of refusedSettles) {
      expect([answer.status, answer.headers.get("retry-after"), answer.body.event]).to.deep.equal([503, "2", undefined]);
      expect(answer.body.error).to.match(/^Service unavailable: /);
    }
    // A payment identifier needs the ledger: verify says it cannot tell, rather than waiting.
    expect([identifiedVerify.status, identifiedVerify.body.isValid]).to.deep.equal([500, false]);
    expect(await chain.publicClient.getTransactionCount({ address: relayer, blockTag: "pending" })).to.equal(nonceBefore);

    // The healthcheck says the ledger is down, and not where it is.
    const health = await call(started, "/healthcheck", undefined, {});
    expect(health.status).to.equal(503);
    expect(health.body.results.ledger).to.deep.include({ state: "down", reachable: false, error: "no answer within 1500 ms" });
    expect(health.body.results.message).to.equal("ledger: DATABASE_URL: down (no answer within 1500 ms)");
    expect(JSON.stringify(health.body)).not.to.include(new URL(proxy.url).port);

    proxy.thaw();
    await waitUntil("healthy again", async () => (await call(started, "/healthcheck", undefined, {})).status === 200, WAIT_MS, 100);
    // Nothing answered 503 was sent, even now that the database answers again.
    for (const payment of settles) {
      const used = await chain.publicClient.readContract({ address: chain.token, abi: tokenAbi, functionName: "authorizationState", args: [payment.message.from, payment.message.nonce] });
      expect(used).to.equal(false);
    }
    // Each, retried as a 503 says (a claim the frozen server read before it stopped is written when it runs
    // again, then released by the recovery: a retry meeting it is told 503 once more), settles once.
    const retried = await Promise.all(
      settles.map((payment) => waitFor(() => call(started, "/v2/x402/settle", payment.body), (answer) => answer.status !== 503, "a settle answered other than 503", WAIT_MS, 500)),
    );
    expect(retried.map((a) => [a.status, a.body.event]), JSON.stringify(retried.map((a) => a.body))).to.deep.equal(Array(6).fill([200, "payment.settled"]));
    expect(new Set(retried.map((a) => a.body.txHash as Hex)).size).to.equal(6);
    expect(await chain.publicClient.getTransactionCount({ address: relayer, blockTag: "latest" })).to.equal(nonceBefore + 6);
    expect(await chain.contract.read.balanceOf([payee])).to.equal(6n * 1_000n + 15n);
  });
});
