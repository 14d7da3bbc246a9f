import { expect } from "chai";
import { parseGwei, parseTransaction, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { RunningFacilitator } from "../../src/facilitator/start.js";
import type { SettlementRecord } from "../../src/ledger/types.js";
import { cronosFront, type CronosFront } from "../helpers/cronos-front.js";
import { HARDHAT_KEYS, makePayment } from "../helpers/facilitator.js";
import { openProxiedChain, startFacilitatorOnProxies, type ProxiedChain } from "../helpers/proxied-chain.js";
import type { FaultProxy } from "../helpers/rpc-proxy.js";
import { waitUntil } from "../helpers/wait.js";

// The production facilitator (HTTP, ledger, relayer lifecycle, reconciler) against a Cronos node's admission:
// strict nonces with its texts, a load-balanced backend that lags, replacement refused, a lost pool, a minimum
// gas price. Today the node is the RPC proxy's Cronos front over the local EDR chain (test/helpers/cronos-front.ts);
// `openCronosNode` is the one place to point these scenarios at the harness's Cronos mode instead (src/harness),
// whose faults (a lagging backend, a lost pool, the minimum fee, replacement off) answer the same way.
// Every scenario asserts each seller paid exactly once, and one transaction per relayer nonce.

const RELAYER = privateKeyToAccount(HARDHAT_KEYS.relayer).address;
const AMOUNT = 1_000_000n;
/** Chain seconds a transaction may wait before it is replaced, and a step of chain time past it. */
const FAULT_ENV = { REPLACE_AFTER_SECONDS: "3", RECONCILE_INTERVAL_MS: "100" };
const PAST_REPLACE_AFTER = 5;

type Answer = { status: number; body: Record<string, any> };
type Payment = Awaited<ReturnType<typeof makePayment>>;

/** A Cronos node the scenarios run against, and its faults. */
interface CronosNode {
  proxied: ProxiedChain;
  proxy: FaultProxy;
  front: CronosFront;
  close(): Promise<void>;
}

async function openCronosNode(): Promise<CronosNode> {
  const proxied = await openProxiedChain(1);
  const proxy = proxied.proxies[0]!;
  return { proxied, proxy, front: cronosFront(proxy), close: () => proxied.close() };
}

function settle(url: string, payment: Payment): Promise<Answer> {
  const answer = fetch(`${url}/v2/x402/settle`, { method: "POST", headers: { "Content-Type": "application/json", "X402-Version": "1" }, body: JSON.stringify(payment.body) }).then(
    async (response) => ({ status: response.status, body: (await response.json()) as Record<string, any> }),
  );
  answer.catch(() => undefined);
  return answer;
}

describe("settling through a Cronos node's admission: every seller paid exactly once", function () {
  this.timeout(180_000);
  let node: CronosNode;
  let running: RunningFacilitator | undefined;

  beforeEach(async () => {
    node = await openCronosNode();
  });
  afterEach(async () => {
    await running?.close(0);
    running = undefined;
    await node.proxy.chain.automine(true).catch(() => undefined);
    await node.close();
  });

  async function start(env: Record<string, string> = {}): Promise<string> {
    const print = (level: string) => (fields: object, message?: string) => process.env.FAULT_DEBUG && console.log(level, message, JSON.stringify(fields, (_k, v) => (typeof v === "bigint" ? String(v) : v)));
    const logger = { info: print("info"), warn: print("warn"), error: print("error"), debug: print("debug"), child: () => logger };
    running = await startFacilitatorOnProxies(node.proxied, { CRONOS_TESTNET_RPC_URL: node.proxy.url, ...FAULT_ENV, ...env }, { logger });
    return running.url;
  }
  const chain = () => node.proxied.chain;
  const balanceOf = (address: Address) => chain().contract.read.balanceOf([address]);
  const minedNonce = () => chain().publicClient.getTransactionCount({ address: RELAYER, blockTag: "latest" });
  const pendingNonce = () => chain().publicClient.getTransactionCount({ address: RELAYER, blockTag: "pending" });
  /** Payments to sellers of their own (fresh addresses): a balance each proves one payment each. */
  const toNewSellers = (count: number) => Promise.all(Array.from({ length: count }, () => makePayment(chain(), { payTo: privateKeyToAccount(generatePrivateKey()).address })));
  const sellerOf = (payment: Payment) => payment.message.to as Address;
  /** The relayer's transactions that reached the node, first broadcasts only, by nonce in arrival order. */
  const firstSends = () => {
    const seen = new Set<string>();
    return node.proxy.broadcasts.filter((raw) => (seen.has(raw) ? false : (seen.add(raw), true))).map((raw) => parseTransaction(raw).nonce!);
  };
  async function counter(name: string, labels: Record<string, string> = {}): Promise<number> {
    const metric = await running!.facilitator.metrics.registry.getSingleMetric(name)!.get();
    return metric.values.filter((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want)).reduce((sum, v) => sum + v.value, 0);
  }
  async function rowOf(payment: Payment): Promise<SettlementRecord> {
    const row = await running!.facilitator.coordination.ledger.get({ chainId: 338, token: chain().token, authorizer: payment.message.from, nonce: payment.message.nonce });
    return row!;
  }
  async function until(what: string, check: () => Promise<boolean> | boolean): Promise<void> {
    expect(await waitUntil(async () => check(), 60_000, 20), what).to.equal(true);
  }

  it("40 concurrent settles, 20 refused once by a lagging backend (invalid nonce, expected the one before): all settled, one transaction per nonce, sent in nonce order", async () => {
    const url = await start();
    const payments = await toNewSellers(40);
    const nonce = await minedNonce();
    node.front.lag(20);
    const answers = await Promise.all(payments.map((payment) => settle(url, payment)));
    expect(answers.map((a) => [a.status, a.body.event])).to.deep.equal(Array(40).fill([200, "payment.settled"]));
    for (const payment of payments) expect(await balanceOf(sellerOf(payment))).to.equal(AMOUNT);
    expect(await minedNonce()).to.equal(nonce + 40);
    expect(new Set(answers.map((a) => a.body.txHash)).size).to.equal(40);
    // 20 refusals by the lagging backend, each of another transaction, each tried again and taken. (Under load an
    // HTTP retry of a send that reached the node meets its own admission: `tx already in mempool`, or `invalid
    // nonce` once it is mined; the failover transport finds it by its hash, and the nonce count above shows that
    // no second transaction was signed for it.)
    const lagged = node.front.refusals.map((text) => /^invalid nonce; got (\d+), expected (\d+): invalid sequence: invalid sequence$/.exec(text)).filter((match) => match !== null && Number(match[2]) === Number(match[1]) - 1);
    expect(new Set(lagged.map((match) => match![1])).size, JSON.stringify(node.front.refusals)).to.equal(20);
    expect(await counter("x402_relayer_refusals_total", { refusal: "nonceAhead" })).to.equal(20);
    expect(firstSends()).to.deep.equal(Array.from({ length: 40 }, (_, i) => nonce + i));
  });

  it("blocks stopped with replacement refused: the original is kept and broadcast again (tx already in mempool), never answered failed; mined once fees fall, settled with its hash", async () => {
    const url = await start();
    node.front.replacement(false);
    await node.proxy.chain.automine(false);
    const payment = await makePayment(chain());
    const [nonce, before] = [await pendingNonce(), await balanceOf(sellerOf(payment))];
    const settling = settle(url, payment);
    await until("the transaction is in the pool", async () => (await node.proxy.chain.pending()).length === 1);
    const [first] = (await node.proxy.chain.pending()) as [Hex];
    const priced = await chain().publicClient.getTransaction({ hash: first });
    // The next block asks more than it offers: it stays; chain time passes the replacement delay.
    await node.proxy.chain.setNextBlockBaseFee(priced.maxFeePerGas! * 10n);
    await chain().networkHelpers.time.increase(PAST_REPLACE_AFTER);
    await until("a replacement was refused and the original sent again", () => node.front.refusals.includes("tx already in mempool"));
    expect(node.front.refusals[0]).to.equal(`invalid nonce; got ${nonce}, expected ${nonce + 1}: invalid sequence: invalid sequence`);
    expect((await chain().publicClient.getTransaction({ hash: first })).blockNumber).to.equal(null);
    expect([await counter("x402_relayer_replacements_total"), await counter("x402_relayer_drops_detected_total")]).to.deep.equal([0, 0]);
    await node.proxy.chain.setNextBlockBaseFee(1n);
    await node.proxy.chain.mine();
    const answer = await settling;
    expect([answer.status, answer.body.event, answer.body.txHash]).to.deep.equal([200, "payment.settled", first]);
    expect(await balanceOf(sellerOf(payment))).to.equal(before + AMOUNT);
    expect(await minedNonce()).to.equal(nonce + 1);
    const states = (await rowOf(payment)).transactions.map((tx) => [tx.hash, tx.state]);
    expect(states[0]).to.deep.equal([first, "mined"]);
    expect(states.slice(1).every(([, state]) => state === "refused")).to.equal(true);
  });

  it("the node loses its pool: the key's transactions go out again in nonce order, each settled once", async () => {
    const url = await start();
    await node.proxy.chain.automine(false);
    const payments = await toNewSellers(3);
    const nonce = await pendingNonce();
    const settling = payments.map((payment) => settle(url, payment));
    await until("three transactions in the pool", async () => (await pendingNonce()) === nonce + 3);
    expect(await node.front.losePool()).to.equal(3);
    const sentBefore = node.proxy.broadcasts.length;
    await chain().networkHelpers.time.increase(PAST_REPLACE_AFTER);
    await until("all three back in the pool", async () => (await node.proxy.chain.pending()).length === 3);
    // Back in nonce order: each nonce's first broadcast after the loss after the one below it. (The reconciler may
    // broadcast a row's transaction again too, once the row is due: the node answers it `tx already in mempool`,
    // or refuses it for the gap while a lower one is not back yet; neither changes what the node holds.)
    const again = node.proxy.broadcasts.slice(sentBefore).map((raw) => parseTransaction(raw).nonce!);
    expect([...new Set(again)]).to.deep.equal([nonce, nonce + 1, nonce + 2]);
    const pooled = await node.proxy.chain.pending();
    await node.proxy.chain.mine();
    const answers = await Promise.all(settling);
    expect(answers.map((a) => [a.status, a.body.event])).to.deep.equal(Array(3).fill([200, "payment.settled"]));
    // Each settle answered with the transaction the node took back, one of its own recorded versions.
    expect(answers.map((a) => a.body.txHash)).to.have.members(pooled);
    for (const [i, payment] of payments.entries()) expect((await rowOf(payment)).transactions.map((tx) => tx.hash)).to.include(answers[i]!.body.txHash);
    for (const payment of payments) expect(await balanceOf(sellerOf(payment))).to.equal(AMOUNT);
    expect(await minedNonce()).to.equal(nonce + 3);
    // Each went back as signed (a rebroadcast), or re-priced where the network asked more by then (a replacement).
    expect((await counter("x402_relayer_rebroadcasts_total")) + (await counter("x402_relayer_replacements_total"))).to.equal(3);
  });

  it("a minimum gas price above MAX_FEE_PER_GAS_GWEI: 503 naming the cap, nothing left in the key's sequence; under it, re-priced and settled at that same nonce", async () => {
    const url = await start({ MAX_FEE_PER_GAS_GWEI: "50" });
    const payment = await makePayment(chain());
    const nonce = await pendingNonce();
    node.front.minGasPriceWei = parseGwei("60");
    const refused = await settle(url, payment);
    expect(refused.status).to.equal(503);
    expect(refused.body).to.not.have.property("event");
    expect(refused.body.error).to.match(/the network asks 60 gwei per gas, above MAX_FEE_PER_GAS_GWEI \(50 gwei\); nothing was sent$/);
    expect(await pendingNonce()).to.equal(nonce);
    const row = await rowOf(payment);
    expect([row.status, row.errorCode, row.transactions.map((tx) => tx.state)]).to.deep.equal(["failed", "notSent", ["refused"]]);
    expect(await balanceOf(sellerOf(payment))).to.equal(0n);

    node.front.minGasPriceWei = parseGwei("20");
    const answer = await settle(url, payment);
    expect([answer.status, answer.body.event]).to.deep.equal([200, "payment.settled"]);
    const mined = await chain().publicClient.getTransaction({ hash: answer.body.txHash });
    expect([mined.nonce, mined.maxFeePerGas! >= parseGwei("20")]).to.deep.equal([nonce, true]);
    expect(await balanceOf(sellerOf(payment))).to.equal(AMOUNT);
    expect(await minedNonce()).to.equal(nonce + 1);
    expect(await counter("x402_relayer_refusals_total", { refusal: "feeTooLow" })).to.equal(2);
  });
});
