import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { privateKeyToAccount, generatePrivateKey } from "viem/accounts";
import type { Address, Hex } from "viem";
import { startLocalChain, type LocalChain } from "../../src/harness/chain.js";
import { SettleError } from "../../src/protocol/reasons.js";
import { CLUSTER_RELAYER_KEYS as RELAYER_KEYS, startCluster, startFacilitatorProcess, type Cluster, type FacilitatorProcess } from "../../src/harness/cluster.js";
import { get, paymentOn, post, QUICK, relayerNonces } from "../helpers/instances.js";
import { v2BodyOf } from "../helpers/facilitator.js";
import { postJson } from "../helpers/http.js";
import { setIntervalMining } from "../helpers/mining.js";
import { waitFor, WAIT_MS } from "../helpers/wait.js";
import { MIGRATIONS } from "../../src/ledger/schema.js";

const SETTLE = "/v2/x402/settle";

const VERIFY = "/v2/x402/verify";

/** A payee nobody else pays, so its balance tells how often it was paid. */
const freshPayee = (): Address => privateKeyToAccount(generatePrivateKey()).address;

async function balanceOf(chain: LocalChain, address: Address): Promise<bigint> {
  const { tokenAbi } = await import("../../src/chain/token-abi.js");
  return chain.publicClient.readContract({ address: chain.token, abi: tokenAbi, functionName: "balanceOf", args: [address] });
}

/** Stops mining blocks (a transaction then waits in the pool) until `resume`. */
async function pauseMining(chain: LocalChain): Promise<() => Promise<void>> {
  await setIntervalMining(chain.provider, 0);
  return () => setIntervalMining(chain.provider, 1_000);
}


const statusOf = (url: string, payment: { message: { from: Address; nonce: Hex } }) =>
  get(url, `/v2/x402/settlements?network=cronos-testnet&from=${payment.message.from}&nonce=${payment.message.nonce}`);

/** The same settle, 50 times at once over the given instances: one transaction, one settled, 49 already used. */
async function concurrentSettlesOfOneAuthorization(chain: LocalChain, urls: string[]) {
  const payTo = freshPayee();
  const payment = await paymentOn(chain, 0, payTo);
  const before = await relayerNonces(chain);
  const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => post(urls[i % urls.length]!, SETTLE, payment.body)));
  const settled = answers.filter((a) => a.body.event === "payment.settled");
  expect(settled, JSON.stringify(answers.filter((a) => a.body.event !== "payment.settled").slice(0, 3))).to.have.length(1);
  const txHash = settled[0]!.body.txHash;
  const others = answers.filter((a) => a.body.event !== "payment.settled");
  expect(others.map((a) => [a.status, a.body.event, a.body.error, a.body.txHash])).to.deep.equal(
    Array(49).fill([200, "payment.failed", SettleError.alreadyUsed, txHash]),
  );
  expect(await relayerNonces(chain)).to.equal(before + 1);
  expect(await balanceOf(chain, payTo)).to.equal(1_000_000n);
}

/** SIGKILL the instance that sent a settle before its receipt: `finisher` finishes the row; a retry sends nothing. */
async function killedSender(chain: LocalChain, sender: FacilitatorProcess, others: () => string[], restart?: () => Promise<void>) {
  const payTo = freshPayee();
  const payment = await paymentOn(chain, 1, payTo);
  const before = await relayerNonces(chain);
  const resume = await pauseMining(chain);
  try {
    const answer = post(sender.url, SETTLE, payment.body).catch((error: unknown) => error);
    // The transaction is in the node's pool: the sender recorded it, then broadcast it.
    await waitFor(
      async () => (await chain.provider.request({ method: "eth_getBlockByNumber", params: ["pending", false] })) as { transactions: string[] },
      (block) => block.transactions.length > 0,
      "the settle transaction in the pool",
      WAIT_MS,
      100,
    );
    await sender.kill();
    expect(await answer).to.be.instanceOf(Error);
  } finally {
    await resume();
  }
  await restart?.();
  const status = await waitFor(() => statusOf(others()[0]!, payment), (s) => s.body.status === "settled", "the row settled by another instance", WAIT_MS, 100);
  const txHash = status.body.txHash as Hex;
  expect(status.body).to.deep.include({ status: "settled", from: payment.message.from, to: payTo, value: "1000000", transactions: [txHash] });
  const receipt = await chain.publicClient.getTransactionReceipt({ hash: txHash });
  expect(status.body.blockNumber).to.equal(Number(receipt.blockNumber));
  for (const url of others()) {
    const retry = await post(url, SETTLE, payment.body);
    expect([retry.body.event, retry.body.error, retry.body.txHash]).to.deep.equal(["payment.failed", SettleError.alreadyUsed, txHash]);
  }
  expect(await relayerNonces(chain)).to.equal(before + 1);
  expect(await balanceOf(chain, payTo)).to.equal(1_000_000n);
}

/** The first settle's receipt wait ends before the block: it answers with the hash; a retry sends nothing and answers already used. */
async function receiptTimeout(chain: LocalChain, shortTimeout: string, retryOn: string) {
  const payTo = freshPayee();
  const payment = await paymentOn(chain, 2, payTo);
  const before = await relayerNonces(chain);
  const resume = await pauseMining(chain);
  let txHash: unknown;
  try {
    const first = await post(shortTimeout, SETTLE, payment.body);
    expect([first.status, first.body.event, first.body.error]).to.deep.equal([200, "payment.failed", SettleError.failedOnChain]);
    txHash = first.body.txHash;
    expect(txHash).to.match(/^0x[0-9a-f]{64}$/);
    const retry = await post(retryOn, SETTLE, payment.body);
    expect([retry.body.event, retry.body.error, retry.body.txHash]).to.deep.equal(["payment.failed", SettleError.alreadyUsed, txHash]);
    expect((await statusOf(retryOn, payment)).body).to.deep.include({ status: "pending", txHash, transactions: [txHash] });
  } finally {
    await resume();
  }
  await waitFor(() => statusOf(retryOn, payment), (s) => s.body.status === "settled", "the row settled", WAIT_MS, 100);
  expect(await relayerNonces(chain)).to.equal(before + 1);
  expect(await balanceOf(chain, payTo)).to.equal(1_000_000n);
}

describe("several facilitator processes as one service on one PostgreSQL", function () {
  this.timeout(300_000);
  let cluster: Cluster;
  let chain: LocalChain;
  let instances: FacilitatorProcess[] = [];
  let env: Record<string, string>;
  const urls = () => instances.filter((i) => i.child.exitCode === null && i.child.signalCode === null).map((i) => i.url);

  before(async () => {
    cluster = await startCluster({
      instances: 3,
      env: { ...QUICK, RATE_LIMIT_VERIFY_PER_MINUTE: "10" },
    });
    ({ chain, instances, env } = cluster);
    // Each holds one of the three keys once the leases have settled down.
    await waitFor(
      () => Promise.all(instances.map(async (i) => ((await get(i.url, "/healthcheck")).body.results as { ledger?: { leases?: unknown[] } }).ledger?.leases?.length ?? 0)),
      (held) => held.every((n) => n === 1),
      "one key per instance",
      WAIT_MS,
      100,
    );
  });
  after(() => cluster?.stop());

  it("funds buyers that are none of the relayer keys (a buyer never signs for the account that sends)", () => {
    const relayers = new Set(RELAYER_KEYS.map((key) => privateKeyToAccount(key).address));
    expect(cluster.chain.buyers).to.have.length(10);
    expect(cluster.chain.buyers.filter((buyer) => relayers.has(buyer.address))).to.deep.equal([]);
  });

  it("reports the database and this instance's key lease in /healthcheck", async () => {
    const health = await get(instances[0]!.url, "/healthcheck");
    expect(health.status).to.equal(200);
    const ledger = (health.body.results as { ledger: Record<string, unknown> }).ledger;
    expect(ledger).to.deep.include({ backend: "postgres", state: "up", reachable: true, migrations: { applied: MIGRATIONS.length, expected: MIGRATIONS.length }, shared: true });
    expect(ledger).not.to.have.property("note");
    // Where the database is stays out of the public view (issue 30 item 4).
    expect(ledger).not.to.have.property("location");
    expect(JSON.stringify(health.body)).not.to.include(new URL(cluster.databaseUrl!).port);
  });

  it("counts one rate limit across the instances: the 11th verify from one IP is 429 wherever it lands", async () => {
    const payment = await paymentOn(chain, 3, freshPayee());
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) statuses.push((await post(urls()[i % 3]!, VERIFY, payment.body, "203.0.113.7")).status);
    expect(statuses).to.deep.equal([...Array(10).fill(200), 429]);
  });

  it("sends one transaction for 50 concurrent settles of one authorization spread over three instances", async () => {
    await concurrentSettlesOfOneAuthorization(chain, urls());
  });

  it("payment-identifier across instances: 30 settles of one payment under one id spread over three instances answer the same transaction; another payment under the id is refused on any instance", async () => {
    const payTo = freshPayee();
    const id = `pay_${generatePrivateKey().slice(2, 34)}`;
    const withId = (made: Awaited<ReturnType<typeof paymentOn>>) => {
      const body = v2BodyOf(made);
      return { ...body, paymentPayload: { ...body.paymentPayload, extensions: { "payment-identifier": { info: { required: true, id } } } } };
    };
    const first = withId(await paymentOn(chain, 3, payTo));
    const before = await relayerNonces(chain);
    // v2 bodies carry no X402-Version: 1 header.
    const postV2 = (url: string, body: unknown) => postJson(`${url}${SETTLE}`, body, { "X-Forwarded-For": `198.51.100.${Math.floor(Math.random() * 250) + 1}` });
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => postV2(urls()[i % 3]!, first)));
    const transaction = (answers[0]!.json as { transaction: string }).transaction;
    expect(transaction).to.match(/^0x[0-9a-f]{64}$/);
    expect(answers.map((a) => [a.status, a.json])).to.deep.equal(
      Array(30).fill([200, { success: true, payer: first.paymentPayload.payload.authorization.from, transaction, network: "eip155:338" }]),
    );
    expect(await relayerNonces(chain)).to.equal(before + 1);
    expect(await balanceOf(chain, payTo)).to.equal(1_000_000n);

    const other = withId(await paymentOn(chain, 3, payTo));
    for (const url of urls()) {
      const refused = await postV2(url, other);
      expect([refused.status, (refused.json as Record<string, unknown>).errorReason, (refused.json as Record<string, unknown>).errorMessage]).to.deep.equal([
        200,
        "payment_identifier_conflict",
        `Payment identifier ${id} is already used by another payment`,
      ]);
    }
    expect(await relayerNonces(chain)).to.equal(before + 1);
    expect(await balanceOf(chain, payTo)).to.equal(1_000_000n);
  });

  it("settles 100 distinct authorizations spread over three instances, each with one transaction and no nonce error", async () => {
    const payTo = freshPayee();
    const payments = await Promise.all(Array.from({ length: 100 }, (_, i) => paymentOn(chain, 4 + (i % 6), payTo, 10_000n)));
    const before = await relayerNonces(chain);
    const answers = await Promise.all(payments.map((p, i) => post(urls()[i % 3]!, SETTLE, p.body)));
    expect(answers.filter((a) => a.body.event !== "payment.settled").map((a) => a.body)).to.deep.equal([]);
    expect(new Set(answers.map((a) => a.body.txHash)).size).to.equal(100);
    expect(await relayerNonces(chain)).to.equal(before + 100);
    expect(await balanceOf(chain, payTo)).to.equal(1_000_000n);
    const statuses = await Promise.all(answers.map((a) => get(urls()[0]!, `/v2/x402/settlements/${String(a.body.txHash)}`)));
    expect(statuses.every((s) => s.body.status === "settled" && (s.body.transactions as unknown[]).length === 1)).to.equal(true);
    const logs = instances.flatMap((i) => i.logs).filter((l) => /nonce/i.test(JSON.stringify(l)));
    expect(logs).to.deep.equal([]);
  });

  it("lets an instance that holds no key settle by handing the send to a key holder, and a short receipt wait's retry sends nothing", async () => {
    // A fourth instance: three keys, four instances, so it holds none.
    const fourth = await cluster.add({ SETTLE_TIMEOUT_SECONDS: "1" });
    const leases = (await get(fourth.url, "/healthcheck")).body.results as { ledger: { leases: unknown[] } };
    expect(leases.ledger.leases).to.deep.equal([]);
    await receiptTimeout(chain, fourth.url, fourth.url);
    await fourth.stop();
  });

  it("finishes a settle whose sender was SIGKILLed before the receipt, on another instance", async () => {
    // The settle goes to the instance holding a key; each holds one.
    await killedSender(chain, instances[0]!, () => urls());
  });
});

describe("one facilitator process on the embedded ledger (a file), including a restart", function () {
  this.timeout(300_000);
  let chain: LocalChain;
  let dir: string;
  let instance: FacilitatorProcess;
  let env: Record<string, string>;

  before(async () => {
    chain = await startLocalChain({ network: "cronos-testnet", port: 0, blockTimeMs: 1_000, buyers: 4 });
    dir = mkdtempSync(join(tmpdir(), "x402-embedded-"));
    env = {
      CRONOS_TESTNET_RPC_URL: chain.rpcUrl,
      RELAYER_PRIVATE_KEY: RELAYER_KEYS[0]!,
      LEDGER_FILE: join(dir, "ledger.db"),
      ...QUICK,
    };
    instance = await startFacilitatorProcess(env);
  });
  after(async () => {
    await instance?.stop();
    await chain?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("reports the embedded database in /healthcheck", async () => {
    const ledger = ((await get(instance.url, "/healthcheck")).body.results as { ledger: Record<string, unknown> }).ledger;
    expect(ledger).to.deep.include({ backend: "sqlite", state: "up", reachable: true, shared: false });
    expect(ledger).not.to.have.property("location");
    expect(ledger.note).to.match(/^settlement ledger: embedded \(SQLite\), this instance's alone;/);
  });

  it("sends one transaction for 50 concurrent settles of one authorization", async () => {
    await concurrentSettlesOfOneAuthorization(chain, [instance.url]);
  });

  it("answers a retry after a receipt time-out without sending anything", async () => {
    const short = await startFacilitatorProcess({ ...env, LEDGER_FILE: join(dir, "short.db"), RELAYER_PRIVATE_KEY: RELAYER_KEYS[1]!, SETTLE_TIMEOUT_SECONDS: "1" });
    try {
      await receiptTimeout(chain, short.url, short.url);
    } finally {
      await short.stop();
    }
  });

  it("finishes after a restart a settle whose process was SIGKILLed before the receipt, and remembers earlier settlements", async () => {
    const earlier = await post(instance.url, SETTLE, (await paymentOn(chain, 3, freshPayee())).body);
    expect(earlier.body.event).to.equal("payment.settled");
    await killedSender(chain, instance, () => [instance.url], async () => {
      instance = await startFacilitatorProcess(env);
    });
    const remembered = await get(instance.url, `/v2/x402/settlements/${String(earlier.body.txHash)}`);
    expect(remembered.body).to.deep.include({ status: "settled", txHash: earlier.body.txHash });
  });
});
