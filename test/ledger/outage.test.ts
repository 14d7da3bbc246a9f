import { expect } from "chai";
import pg from "pg";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { Address, Hex } from "viem";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { startCluster, type Cluster } from "../../src/harness/cluster.js";
import { get, paymentOn, post, QUICK, relayerNonces, watchForExits, type ExitWatch } from "../helpers/instances.js";
import { setIntervalMining } from "../helpers/mining.js";
import { waitFor, WAIT_MS } from "../helpers/wait.js";

// Issue 23 item 1: PostgreSQL stopped mid-burst and started again (a routine restart), under
// two facilitator instances sharing it. Every answer must be true of the chain, every instance must stay
// up and recover by itself, and a retry of every authorization must complete, each paid exactly once.

const SETTLE = "/v2/x402/settle";
const MINED_WHILE_DOWN = "settlement mined while the ledger is unreachable: answered settled, record kept in the outbox";


/** Settlement rows still `claimed` (nothing recorded as sent), read from the database itself. */
async function claimedRows(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => {});
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>("SELECT COUNT(*) AS n FROM settlements WHERE status = 'claimed'");
    return Number(rows[0]!.n);
  } finally {
    await client.end();
  }
}

describe("ledger outage: PostgreSQL restarted under two instances mid-burst", function () {
  this.timeout(240_000);
  let cluster: Cluster;
  let watch: ExitWatch;

  before(async () => {
    cluster = await startCluster({
      instances: 2,
      blockTimeMs: 1_000,
      env: { ...QUICK, SETTLE_TIMEOUT_SECONDS: "40" },
    });
    watch = watchForExits(cluster.instances);
  });
  after(async () => {
    watch?.done();
    await cluster?.stop();
  });

  it("40 settles over two instances, the database down from the moment a settle's transaction is out until it is mined: answers true of the chain (that one settled), instances alive, abandoned claims released, every authorization paid exactly once after retries", () =>
    // An instance that exits fails the test at once, with its stack, whatever the test is waiting for.
    Promise.race([outage(), watch.crashed]));

  async function outage(): Promise<void> {
    const { chain, instances, postgres, relayers } = cluster;
    const urls = instances.map((i) => i.url);
    const payments = await Promise.all(
      Array.from({ length: 40 }, (_, i) => paymentOn(chain, i % 10, privateKeyToAccount(generatePrivateKey()).address, BigInt(1_000 + i))),
    );
    const noncesBefore = await relayerNonces(chain);

    const answers = Promise.all(payments.map((payment, i) => post(urls[i % 2]!, SETTLE, payment.body).catch((error: unknown) => ({ status: 0, body: { error: String(error) } as Record<string, unknown> }))));
    // The database goes down once a settle's transaction is in the pool and not yet mined, and no block is
    // mined until it is down: that settle's receipt comes while the ledger is unreachable, and must be
    // answered settled (the case the outbox exists for), not 503.
    await waitFor(
      () => Promise.all(relayers.map(async (address) => (await chain.publicClient.getTransactionCount({ address, blockTag: "pending" })) - (await chain.publicClient.getTransactionCount({ address, blockTag: "latest" })))),
      (waiting) => Array.isArray(waiting) && waiting.some((n) => n > 0),
      "a relayer transaction in the pool",
      20_000,
      10,
    );
    await setIntervalMining(chain.provider, 0);
    const haltedAtBlock = await chain.publicClient.getBlockNumber();
    try {
      await postgres!.halt();
    } finally {
      await setIntervalMining(chain.provider, 1_000);
    }
    // While it is down: each instance says so (503), and keeps running.
    // (A healthcheck that fails to answer at all is read as not done yet.)
    const healthchecks = () => Promise.all(urls.map((url) => get(url, "/healthcheck"))).catch(() => undefined);
    const down = (await waitFor(healthchecks, (all) => all?.every((h) => h.status === 503) === true, "both healthchecks 503", WAIT_MS, 200))!;
    expect(down.map((h) => (h.body.results as { ledger: { reachable: boolean } }).ledger.reachable)).to.deep.equal([false, false]);
    // Down until the case the outbox exists for has happened: a settlement mined (blocks come every second
    // again) and answered while the ledger is unreachable.
    await waitFor(async () => instances.some((i) => i.logs.some((l) => l.msg === MINED_WHILE_DOWN)), (seen) => seen === true, MINED_WHILE_DOWN, WAIT_MS, 50);
    await postgres!.resume();

    // Back, each instance writes its outbox and releases the claims it abandoned (recovery runs before
    // "reachable again" is logged; that nothing stays claimed is checked below, once every settle answered).
    await waitFor(
      async () => instances.map((i) => i.logs.some((l) => l.msg === "ledger reachable again")),
      (back) => back.every(Boolean),
      "both instances to recover",
      WAIT_MS,
      50,
    );

    const first = await answers;
    // Nothing is left claimed once every settle answered: a 503's claim was released, not left to block a retry.
    expect(await waitFor(() => claimedRows(cluster.databaseUrl!), (n) => n === 0, "no claim left behind", 2_000, 100)).to.equal(0);
    // Every answer is true: settled means mined and paid; anything else is a 503 that is no verdict.
    const settledFirst = new Map<number, Hex>();
    let minedWhileDown = 0;
    for (const [i, answer] of first.entries()) {
      if (answer.status === 200 && answer.body.event === "payment.settled") {
        settledFirst.set(i, answer.body.txHash as Hex);
        const receipt = await chain.publicClient.getTransactionReceipt({ hash: answer.body.txHash as Hex });
        expect(receipt.status, `payment ${i}`).to.equal("success");
        if (receipt.blockNumber > haltedAtBlock) minedWhileDown++;
      } else {
        expect([answer.status, answer.body.event], `payment ${i}: ${JSON.stringify(answer.body)}`).to.deep.equal([503, undefined]);
      }
    }
    // The transaction that was out when the database went down was answered settled, from the chain,
    // and its record kept for the database's return.
    expect(minedWhileDown, "settles answered settled with a transaction mined after the halt").to.be.greaterThan(0);
    const keptInOutbox = instances.flatMap((i) => i.logs.filter((l) => l.msg === MINED_WHILE_DOWN).map((l) => l.txHash as Hex));
    expect(keptInOutbox.length, MINED_WHILE_DOWN).to.be.greaterThan(0);
    for (const hash of keptInOutbox) expect([...settledFirst.values()], `${hash} was answered settled`).to.include(hash);
    // A 503 said nothing was sent: none of those authorizations is used on chain, even a block later.
    const answeredAt = await chain.publicClient.getBlockNumber();
    await waitFor(() => chain.publicClient.getBlockNumber(), (block) => typeof block === "bigint" && block > answeredAt, "a block after the answers", WAIT_MS, 100);
    for (const [i, payment] of payments.entries()) {
      if (settledFirst.has(i)) continue;
      const used = await chain.publicClient.readContract({ address: chain.token, abi: tokenAbi, functionName: "authorizationState", args: [payment.message.from, payment.message.nonce] });
      expect(used, `payment ${i} answered 503 but used on chain`).to.equal(false);
    }

    // Both recover by themselves.
    await waitFor(healthchecks, (all) => all?.every((h) => h.status === 200) === true, "both healthchecks 200", WAIT_MS, 200);

    // A retry of every authorization not yet settled completes (an already paid one names its transaction).
    const paidBy = new Map(settledFirst);
    await waitFor(
      async () => {
        for (const [i, payment] of payments.entries()) {
          if (paidBy.has(i)) continue;
          const retry = await post(urls[(i + 1) % 2]!, SETTLE, payment.body);
          if (retry.status === 200 && retry.body.event === "payment.settled") paidBy.set(i, retry.body.txHash as Hex);
          else if (retry.status === 200 && retry.body.error === "Authorization already used" && retry.body.txHash) paidBy.set(i, retry.body.txHash as Hex);
        }
        return paidBy.size;
      },
      (size) => size === payments.length,
      "every authorization settled after retries",
      60_000,
      200,
    );

    // Paid exactly once each, by the transaction the answers name; no relayer nonce went to waste.
    for (const [i, payment] of payments.entries()) {
      const balance = await chain.publicClient.readContract({ address: chain.token, abi: tokenAbi, functionName: "balanceOf", args: [payment.payTo as Address] });
      expect(balance, `payee of payment ${i}`).to.equal(BigInt(1_000 + i));
      const receipt = await chain.publicClient.getTransactionReceipt({ hash: paidBy.get(i)! });
      expect(receipt.status).to.equal("success");
    }
    expect(await relayerNonces(chain)).to.equal(noncesBefore + 40);
    // The ledger caught up: each authorization's record says settled, with the paying hash.
    for (const [i, payment] of payments.entries()) {
      const record = await waitFor(
        () => get(urls[i % 2]!, `/v2/x402/settlements?network=cronos-testnet&from=${payment.message.from}&nonce=${payment.message.nonce}`),
        (r) => (r as { body?: { status?: string } }).body?.status === "settled",
        `record of payment ${i} settled`,
        WAIT_MS,
        200,
      );
      expect(record.body.txHash).to.equal(paidBy.get(i));
    }
    // The outage is logged once per instance, not once per attempt.
    for (const instance of instances) {
      expect(instance.logs.filter((l) => l.msg === "ledger unreachable: settles that were not sent answer 503, outcomes of sent ones are kept to be written when it is back")).to.have.length(1);
      expect(instance.logs.filter((l) => l.msg === "ledger reachable again")).to.have.length(1);
      expect(instance.logs.filter((l) => l.msg === "relayer key leases not renewed" || l.msg === "reconciler round failed")).to.have.length(0);
    }
  }
});
