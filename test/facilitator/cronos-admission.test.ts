import { expect } from "chai";
import { parseGwei, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { RunningFacilitator } from "../../src/facilitator/start.js";
import type { RefusalKind } from "../../src/harness/cronos-node/refusals.js";
import type { SettlementRecord } from "../../src/ledger/types.js";
import { debugLogger, openCronosStack, PRODUCTION_RELAYER, startProductionFacilitator, type CronosStack } from "../helpers/cronos-node.js";
import { makePayment } from "../helpers/facilitator.js";
import { waitUntil } from "../helpers/wait.js";

// The production facilitator (configuration from variables, HTTP, its ledger, the relayer lifecycle, the
// reconciler) on the local stack's chain 338 answering as a Cronos node (the harness's default: strict nonces
// with the node's texts, its replacement rule, its minimum fee), reached over that chain's public JSON-RPC URL,
// with the harness's own faults (a lagging backend, blocks stopped, replacement off, a lost pool, a raised
// minimum fee). Every scenario asserts on chain that each seller was paid exactly once (its Transfer, the
// authorization's AuthorizationUsed, its balance) and one mined transaction per relayer nonce; the node's
// record of its refusals shows what reached it, and in which order.

const AMOUNT = 1_000_000n;
/** Chain seconds a transaction may wait before it is replaced, a quick reconciler, and a settle that outlasts the scenario. */
const FAULT_ENV = { REPLACE_AFTER_SECONDS: "3", RECONCILE_INTERVAL_MS: "100", SETTLE_TIMEOUT_SECONDS: "90" };
const NETWORK = "cronos-testnet";

type Answer = { status: number; body: Record<string, any> };
type Payment = Awaited<ReturnType<typeof makePayment>>;

function settle(url: string, payment: Payment): Promise<Answer> {
  const answer = fetch(`${url}/v2/x402/settle`, { method: "POST", headers: { "Content-Type": "application/json", "X402-Version": "1" }, body: JSON.stringify(payment.body) }).then(
    async (response) => ({ status: response.status, body: (await response.json()) as Record<string, any> }),
  );
  answer.catch(() => undefined);
  return answer;
}

/** JSON with bigints as decimal strings, for a failure's message. */
const brief = (value: unknown) => JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? String(v) : v));

/** Refusal kinds that say a transaction reached the node out of order, twice, or at a price it would not take. */
const NEVER: readonly RefusalKind[] = ["nonce-gap", "nonce-used", "replacement-rule", "replacement-off", "minimum-fee", "base-fee", "mempool-full"];

describe("the production facilitator on the local chain as a Cronos node, through the harness's faults: every seller paid exactly once", function () {
  this.timeout(180_000);
  let cronos: CronosStack;
  let running: RunningFacilitator | undefined;

  const start = async (env: Record<string, string> = {}) => {
    running = await startProductionFacilitator(cronos, { ...FAULT_ENV, ...env }, debugLogger());
    return running.url;
  };
  /** Payments of the stack's first buyer to sellers of their own (fresh addresses): a balance each proves one payment each. */
  const toNewSellers = (count: number) => Promise.all(Array.from({ length: count }, () => makePayment(cronos.payments, { payTo: privateKeyToAccount(generatePrivateKey()).address })));
  const sellerOf = (payment: Payment) => payment.message.to as Address;
  async function counter(name: string, labels: Record<string, string> = {}): Promise<number> {
    const metric = await running!.facilitator.metrics.registry.getSingleMetric(name)!.get();
    return metric.values.filter((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want)).reduce((sum, v) => sum + v.value, 0);
  }
  async function rowOf(payment: Payment): Promise<SettlementRecord> {
    const row = await running!.facilitator.coordination.ledger.get({ chainId: 338, token: cronos.chain.token, authorizer: payment.message.from, nonce: payment.message.nonce });
    return row!;
  }
  /** On chain: the seller's only Transfer is this payment's, in `txHash`, which also holds the authorization's only AuthorizationUsed. */
  async function paidOnce(payment: Payment, txHash: Hex): Promise<void> {
    expect(await cronos.transfersTo(sellerOf(payment))).to.deep.equal([{ from: payment.message.from, value: AMOUNT, txHash }]);
    expect(await cronos.authorizationsUsed(payment.message.from, payment.message.nonce)).to.deep.equal([txHash]);
    expect(await cronos.balanceOf(sellerOf(payment))).to.equal(AMOUNT);
    const tx = await cronos.chain.publicClient.getTransaction({ hash: txHash });
    expect(tx.from).to.equal(PRODUCTION_RELAYER.toLowerCase());
  }
  /** The node refused nothing out of order, twice or under-priced since its mark (a lagging backend or an identical re-send aside). */
  function noneOutOfOrder(): void {
    const { counts } = cronos.refusedSince();
    expect(Object.fromEntries(NEVER.map((kind) => [kind, counts[kind]])), brief(cronos.refusedSince().recent)).to.deep.equal(Object.fromEntries(NEVER.map((kind) => [kind, 0])));
  }
  /** Mined nonces `from` .. `from + count - 1`, one transaction each: the answers' hashes. */
  async function oneTransactionPerNonce(answers: Answer[], from: number): Promise<void> {
    const nonces = await Promise.all(answers.map(async (answer) => (await cronos.chain.publicClient.getTransaction({ hash: answer.body.txHash })).nonce));
    expect(nonces.sort((a, b) => a - b)).to.deep.equal(Array.from({ length: answers.length }, (_, i) => from + i));
    expect(await cronos.minedNonce()).to.equal(from + answers.length);
  }

  /**
   * Every answer settled; each seller paid once, by its answer's transaction; one transaction per relayer nonce from
   * `from`; nothing refused out of order.
   */
  async function allPaidOnce(payments: Payment[], answers: Answer[], from: number): Promise<void> {
    expect(answers.map((a) => [a.status, a.body.event])).to.deep.equal(Array(payments.length).fill([200, "payment.settled"]));
    for (const [i, payment] of payments.entries()) await paidOnce(payment, answers[i]!.body.txHash);
    await oneTransactionPerNonce(answers, from);
    noneOutOfOrder();
  }

  afterEach(async () => {
    await running?.close(0);
    running = undefined;
    await cronos.stack.harness.reset();
  });

  describe("at the real networks' pace (a block every 0.5 s)", () => {
    before(async () => {
      cronos = await openCronosStack({ blockTimeMs: 500 });
    });

    it("40 concurrent settles reach the node in nonce order: not one refusal, all settled, one transaction per nonce", async () => {
      const url = await start();
      const payments = await toNewSellers(40);
      const nonce = await cronos.minedNonce();
      cronos.mark();
      const answers = await Promise.all(payments.map((payment) => settle(url, payment)));
      await allPaidOnce(payments, answers, nonce);
      expect(cronos.refusedSince().counts["lagging-backend"]).to.equal(0);
    });

    it("40 concurrent settles, 20 refused once by a lagging backend (the harness's lagging-backend fault): each tried again and taken, none out of order, all settled", async () => {
      const url = await start();
      const payments = await toNewSellers(40);
      const nonce = await cronos.minedNonce();
      const lag = await cronos.stack.harness.fault({ kind: "lagging-backend", network: NETWORK, blocks: 60, refusals: 20 });
      cronos.mark();
      const answers = await Promise.all(payments.map((payment) => settle(url, payment)));
      await allPaidOnce(payments, answers, nonce);
      // 20 refusals of 20 transactions (the backend's state 60 blocks back: before the burst), each mined after.
      const lagged = cronos.refusedSince().recent.filter((refusal) => refusal.kind === "lagging-backend");
      expect(lagged.map((refusal) => refusal.message)).to.satisfy((texts: string[]) => texts.every((text) => /^invalid nonce; got \d+, expected \d+: invalid sequence: invalid sequence$/.test(text)));
      expect(new Set(lagged.map((refusal) => refusal.hash)).size).to.equal(20);
      expect(lagged.every((refusal) => answers.some((answer) => answer.body.txHash === refusal.hash))).to.equal(true);
      expect((await cronos.stack.harness.faults()).find((fault) => fault.id === lag.id)).to.deep.include({ refusalsLeft: 0 });
      expect(await counter("x402_relayer_refusals_total", { refusal: "nonceAhead" })).to.equal(20);
    });
  });

  describe("blocks on demand (automine, and the harness's blocks fault)", () => {
    before(async () => {
      cronos = await openCronosStack();
    });

    it("blocks stopped, then its fee under the raised minimum, with replacement refused: the original kept and broadcast again (tx already in mempool), never answered failed; mined once fees fall, settled with its hash", async () => {
      const url = await start();
      const { harness } = cronos.stack;
      const blocks = await harness.stopBlocks({ network: NETWORK });
      await harness.fault({ kind: "no-replacement", network: NETWORK });
      const payment = await makePayment(cronos.payments, { payTo: privateKeyToAccount(generatePrivateKey()).address });
      const nonce = await cronos.minedNonce();
      const settling = settle(url, payment);
      await waitUntil("the transaction is in the node's pool", async () => (await cronos.pool()).length === 1, 60_000);
      const [first] = (await cronos.pool()) as [Hex];
      const priced = await cronos.chain.publicClient.getTransaction({ hash: first });
      // The minimum gas price raised above its fee cap (blocks stopped: no block yet), then blocks resume (it stays:
      // the next block asks more than it offers) and chain time passes the replacement delay in an empty block.
      const minimum = await harness.fault({ kind: "min-fee", network: NETWORK, minGasPrice: (priced.maxFeePerGas! * 3n) / 2n });
      await blocks.undo();
      cronos.mark();
      await harness.advanceTime(5, { network: NETWORK });
      await waitUntil("a replacement was refused and the original sent again", () => cronos.refusedSince().counts["in-mempool"] >= 1, 60_000);
      const [refused, known] = cronos.refusedSince().recent;
      expect(refused).to.deep.include({ kind: "replacement-off", message: `invalid nonce; got ${nonce}, expected ${nonce + 1}: invalid sequence: invalid sequence`, nonce: BigInt(nonce) });
      expect(known).to.deep.include({ kind: "in-mempool", message: "tx already in mempool", hash: first });
      expect((await cronos.chain.publicClient.getTransaction({ hash: first })).blockNumber).to.equal(null);
      expect([await counter("x402_relayer_replacements_total"), await counter("x402_relayer_drops_detected_total")]).to.deep.equal([0, 0]);
      // The minimum lifted: the base fee falls 12.5 % a block; blocks come with chain time until it is mined.
      await minimum.undo();
      for (let i = 0; i < 20 && (await cronos.minedNonce()) === nonce; i++) await harness.advanceTime(1, { network: NETWORK });
      const answer = await settling;
      expect([answer.status, answer.body.event, answer.body.txHash]).to.deep.equal([200, "payment.settled", first]);
      await paidOnce(payment, first);
      expect(await cronos.minedNonce()).to.equal(nonce + 1);
      const states = (await rowOf(payment)).transactions.map((tx) => [tx.hash, tx.state]);
      expect(states[0]).to.deep.equal([first, "mined"]);
      expect(states.slice(1).every(([, state]) => state === "refused")).to.equal(true);
      expect(cronos.refusedSince().counts["nonce-gap"]).to.equal(0);
    });

    it("the node loses its pool (mempool-lost): the reconciler hands the rows to the relayer, which sends the key's transactions again in nonce order, each settled once", async () => {
      // The reconciler's rounds (and the settles' own calls on it, after five rounds) are the test's calls
      // below only: with rounds every 100 ms, one could re-send the lost transactions between the fault and
      // those calls (a loaded host), and the test's calls then found nothing to do (all undefined).
      const url = await start({ RECONCILE_INTERVAL_MS: "3600000" });
      const { harness } = cronos.stack;
      const blocks = await harness.stopBlocks({ network: NETWORK });
      const payments = await toNewSellers(3);
      const nonce = await cronos.minedNonce();
      const settling = payments.map((payment) => settle(url, payment));
      await waitUntil("three transactions in the pool", async () => (await cronos.pool()).length === 3, 60_000);
      const lost = await harness.fault({ kind: "mempool-lost", network: NETWORK });
      expect(lost.info.dropped).to.have.length(3);
      cronos.mark();
      // The reconciler looks at each row (the node no longer knows its transaction): this instance's relayer follows
      // them and sends them again, lowest nonce first, whichever row is looked at first. Chain time stands still
      // (blocks stopped): the relayer's lifecycle alone would not have looked yet.
      const { reconciler } = running!.facilitator.coordination;
      const actions: Array<string | undefined> = [];
      for (const payment of payments) actions.push(await reconciler.reconcile(await rowOf(payment)));
      expect(actions.every((action) => action === "rebroadcast" || action === undefined), brief(actions)).to.equal(true);
      expect(actions).to.include("rebroadcast");
      // Each went back as it was signed (the network asks no more): the very transactions the node lost.
      expect(await cronos.pool()).to.have.members(lost.info.dropped!);
      await blocks.undo();
      const answers = await Promise.all(settling);
      // In nonce order (the node admits no nonce above a missing one), once each.
      await allPaidOnce(payments, answers, nonce);
      expect(answers.map((a) => a.body.txHash)).to.have.members(lost.info.dropped!);
      expect(cronos.refusedSince().counts["in-mempool"]).to.equal(0);
      expect(await counter("x402_relayer_rebroadcasts_total")).to.equal(3);
    });

    it("the reconciler sends nothing beside the relayer: 35 transactions waiting, the node showing the first 30 by hash; the five it does not show sent again by the relayer only as the node holds them (tx already in mempool), each mined once", async () => {
      const url = await start();
      const { harness } = cronos.stack;
      const blocks = await harness.stopBlocks({ network: NETWORK });
      const payments = await toNewSellers(35);
      const nonce = await cronos.minedNonce();
      const settling = payments.map((payment) => settle(url, payment));
      await waitUntil("35 transactions in the pool", async () => (await cronos.pool()).length === 35, 60_000);
      cronos.mark();
      const { reconciler } = running!.facilitator.coordination;
      const rows = await Promise.all(payments.map(rowOf));
      // Five of them the node does not show (its pending view is the pool's first 30): still the relayer's to follow.
      const viaNode = await Promise.all(rows.map((row) => fetch(cronos.chain.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_getTransactionByHash", params: [row.txHash] }) }).then(async (r) => ((await r.json()) as { result: unknown }).result !== null)));
      const hidden = rows.filter((_, i) => !viaNode[i]).map((row) => row.txHash!);
      expect(hidden).to.have.length(5);
      for (const row of rows) expect(await reconciler.reconcile(row)).to.equal(undefined);
      // What reached the node again: only those five (and the hidden ones below each), each answered as held.
      const again = cronos.refusedSince().recent;
      expect(again.every((refusal) => refusal.kind === "in-mempool" && hidden.includes(refusal.hash!)), brief(again)).to.equal(true);
      expect(new Set(again.map((refusal) => refusal.hash))).to.deep.equal(new Set(hidden));
      expect(await cronos.pool()).to.have.length(35);
      await blocks.undo();
      const answers = await Promise.all(settling);
      await allPaidOnce(payments, answers, nonce);
      expect(await counter("x402_relayer_rebroadcasts_total")).to.equal(0);
    });

    it("a fee refusal: the minimum gas price above MAX_FEE_PER_GAS_GWEI answers 503 naming the cap, nothing left in the key's sequence; under it, re-priced and settled at that same nonce", async () => {
      const url = await start({ MAX_FEE_PER_GAS_GWEI: "50" });
      const { harness } = cronos.stack;
      const payment = await makePayment(cronos.payments, { payTo: privateKeyToAccount(generatePrivateKey()).address });
      const nonce = await cronos.minedNonce();
      cronos.mark();
      // Raised while blocks are stopped: the head does not show it yet, the node's admission does.
      const raise = async (gwei: string) => {
        const blocks = await harness.stopBlocks({ network: NETWORK });
        const fault = await harness.fault({ kind: "min-fee", network: NETWORK, minGasPrice: parseGwei(gwei) });
        await blocks.undo();
        return fault;
      };
      const high = await raise("60");
      const refused = await settle(url, payment);
      expect(refused.status).to.equal(503);
      expect(refused.body).to.not.have.property("event");
      expect(refused.body.error).to.match(/the network asks 60 gwei per gas, above MAX_FEE_PER_GAS_GWEI \(50 gwei\); nothing was sent$/);
      expect([await cronos.minedNonce(), (await cronos.pool()).length]).to.deep.equal([nonce, 0]);
      const row = await rowOf(payment);
      expect([row.status, row.errorCode, row.transactions.map((tx) => tx.state)]).to.deep.equal(["failed", "notSent", ["refused"]]);
      expect(cronos.refusedSince().recent.map((refusal) => refusal.kind)).to.deep.equal(["minimum-fee"]);
      expect(await cronos.balanceOf(sellerOf(payment))).to.equal(0n);
      await high.undo();

      const low = await raise("20");
      const answer = await settle(url, payment);
      expect([answer.status, answer.body.event]).to.deep.equal([200, "payment.settled"]);
      const mined = await cronos.chain.publicClient.getTransaction({ hash: answer.body.txHash });
      expect([mined.nonce, mined.maxFeePerGas! >= parseGwei("20")]).to.deep.equal([nonce, true]);
      await paidOnce(payment, answer.body.txHash);
      expect(await cronos.minedNonce()).to.equal(nonce + 1);
      expect(cronos.refusedSince().recent.map((refusal) => refusal.kind)).to.deep.equal(["minimum-fee", "minimum-fee"]);
      expect(await counter("x402_relayer_refusals_total", { refusal: "feeTooLow" })).to.equal(2);
      await low.undo();
    });
  });
});
