import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { expect } from "chai";
import { keccak256, parseGwei, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { RunningFacilitator } from "../../src/facilitator/start.js";
import type { SettlementRecord } from "../../src/ledger/types.js";
import { SettleError } from "../../src/protocol/reasons.js";
import { fetchJson } from "../helpers/http.js";
import { waitUntil, WAIT_MS } from "../helpers/wait.js";
import { HARDHAT_KEYS, makePayment } from "../helpers/facilitator.js";
import { startFacilitatorProcess, type FacilitatorProcess } from "../../src/harness/cluster.js";
import { openProxiedChain, startFacilitatorOnProxies, type ProxiedChain } from "../helpers/proxied-chain.js";
import type { FaultProxy } from "../helpers/rpc-proxy.js";

// One test per fault. Each asserts the payee's balance (paid exactly once), the answers, the ledger's
// rows, and that the relayer key keeps settling afterwards. Blocks come when the test mines them
// (automine off); chain time moves with the blocks' timestamps, never with the wall clock.

const RELAYER = privateKeyToAccount(HARDHAT_KEYS.relayer).address;
const SELLER = privateKeyToAccount(HARDHAT_KEYS.seller).address;
const AMOUNT = 1_000_000n;
/** Chain seconds a transaction may wait before it is replaced, and a step of chain time past it. */
const REPLACE_AFTER = "3";
const PAST_REPLACE_AFTER = 5;

type Answer = { status: number; body: Record<string, any> };
type Payment = Awaited<ReturnType<typeof makePayment>>;

/** POSTs a settle; a test that fails before awaiting it leaves no unhandled rejection behind. */
function settle(url: string, payment: Payment): Promise<Answer> {
  const answer = fetchJson(`${url}/v2/x402/settle`, { body: payment.body, headers: { "X402-Version": "1" } });
  answer.catch(() => undefined);
  return answer;
}
const lookup = (url: string, hash: Hex) => fetchJson(`${url}/v2/x402/settlements/${hash}`);

/** The fault suite's facilitator settings: quick replacement, a quick reconciler. */
const FAULT_ENV = { REPLACE_AFTER_SECONDS: REPLACE_AFTER, RECONCILE_INTERVAL_MS: "100" };

describe("settlement faults: a settlement is never stranded", function () {
  this.timeout(120_000);
  let proxied: ProxiedChain;
  let proxy: FaultProxy;
  let running: RunningFacilitator | undefined;
  let processes: FacilitatorProcess[] = [];
  /** Temporary folders of the test (ledger files), removed once its processes are gone. */
  let dirs: string[] = [];

  beforeEach(async () => {
    proxied = await openProxiedChain(2);
    proxy = proxied.proxies[0]!;
  });
  afterEach(async () => {
    await running?.close(0);
    running = undefined;
    await Promise.all(processes.map((p) => p.kill()));
    processes = [];
    await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
    dirs = [];
    await proxy.chain.automine(true).catch(() => undefined);
    await proxied.close();
  });

  /** A facilitator on the first proxy only (unless `env` names the URLs). */
  async function start(env: Record<string, string> = {}): Promise<RunningFacilitator> {
    const print = (level: string) => (fields: object, message?: string) => process.env.FAULT_DEBUG && console.log(level, message, JSON.stringify(fields, (_k, v) => (typeof v === "bigint" ? String(v) : v)));
    const logger = { info: print("info"), warn: print("warn"), error: print("error"), debug: print("debug"), child: () => logger };
    running = await startFacilitatorOnProxies(proxied, { CRONOS_TESTNET_RPC_URL: proxy.url, ...FAULT_ENV, ...env }, { logger });
    return running;
  }

  const balance = () => proxied.chain.contract.read.balanceOf([SELLER]);
  const pendingNonce = () => proxied.chain.publicClient.getTransactionCount({ address: RELAYER, blockTag: "pending" });
  const minedNonce = () => proxied.chain.publicClient.getTransactionCount({ address: RELAYER, blockTag: "latest" });
  const sends = () => proxied.proxies.reduce((sum, p) => sum + p.count("eth_sendRawTransaction"), 0);

  /** Mines one block `seconds` after the latest (the transactions the node takes go in it). */
  const mineAfter = (seconds: number) => proxied.chain.networkHelpers.time.increase(seconds);

  /** The ledger row of `payment`. */
  async function rowOf(payment: Payment): Promise<SettlementRecord> {
    const row = await running!.facilitator.coordination.ledger.get({
      chainId: 338,
      token: proxied.chain.token,
      authorizer: payment.message.from,
      nonce: payment.message.nonce,
    });
    expect(row, "the payment's ledger row").to.not.equal(undefined);
    return row!;
  }

  const txStates = (row: SettlementRecord) => row.transactions.map((tx) => [tx.hash, tx.state]);

  async function counter(name: string, labels: Record<string, string> = {}): Promise<number> {
    const metric = await running!.facilitator.metrics.registry.getSingleMetric(name)!.get();
    return metric.values.filter((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want)).reduce((sum, v) => sum + v.value, 0);
  }

  /** Waits until the relayer's pool nonce reaches `nonce` (its transaction reached the node). */
  async function untilInPool(nonce: number): Promise<void> {
    await waitUntil(`relayer nonce ${nonce} in the pool`, async () => (await pendingNonce()) >= nonce, WAIT_MS, 10);
  }

  /** With automine back on, one more payment settles from the same relayer key. */
  async function keepsSettling(url: string): Promise<void> {
    await proxy.chain.automine(true);
    const before = await balance();
    const next = await makePayment(proxied.chain);
    const answer = await settle(url, next);
    expect([answer.status, answer.body.event], JSON.stringify(answer.body)).to.deep.equal([200, "payment.settled"]);
    expect((await proxied.chain.publicClient.getTransaction({ hash: answer.body.txHash })).from).to.equal(RELAYER.toLowerCase());
    expect(await balance()).to.equal(before + AMOUNT);
  }

  function expectSettled(answer: Answer, payment: Payment, txHash: Hex): void {
    expect(answer.status).to.equal(200);
    expect(answer.body).to.deep.include({ event: "payment.settled", txHash, from: payment.message.from, to: SELLER, value: String(AMOUNT) });
  }

  /**
   * Settles `payment` with automine off; once its transaction is in the pool, the next block asks ten
   * times its max fee (it stays in the pool) and comes past REPLACE_AFTER_SECONDS: resolves once the
   * replacement reached the node.
   */
  async function settleThroughSpike(url: string, payment: Payment) {
    await proxy.chain.automine(false);
    const [nonce, before] = [await pendingNonce(), await balance()];
    const settling = settle(url, payment);
    await untilInPool(nonce + 1);
    const [first] = (await proxy.chain.pending()) as [Hex];
    const priced = await proxied.chain.publicClient.getTransaction({ hash: first });
    await proxy.chain.setNextBlockBaseFee(priced.maxFeePerGas! * 10n);
    await mineAfter(PAST_REPLACE_AFTER);
    await waitUntil("the replacement reached the node", () => sends() === 2);
    const [second] = (await proxy.chain.pending()) as [Hex];
    expect(second).to.not.equal(first);
    return { settling, nonce, before, first, second, priced };
  }

  it("fee spike above the transaction's max fee: replaced with higher fees at the same nonce, the replacement mined", async () => {
    const { url } = await start();
    const payment = await makePayment(proxied.chain);
    const { settling, nonce, before, first, second, priced } = await settleThroughSpike(url, payment);
    const replacement = await proxied.chain.publicClient.getTransaction({ hash: second });
    expect(replacement.nonce).to.equal(priced.nonce);
    expect(replacement.maxFeePerGas! >= (priced.maxFeePerGas! * 1125n) / 1000n).to.equal(true);
    expect(replacement.maxPriorityFeePerGas! >= (priced.maxPriorityFeePerGas! * 1125n) / 1000n).to.equal(true);
    // Enough for the spiked block: 1.2 × its base fee.
    expect(replacement.maxFeePerGas! >= priced.maxFeePerGas! * 12n).to.equal(true);
    await proxy.chain.mine();

    const answer = await settling;
    expectSettled(answer, payment, second);
    expect(await balance()).to.equal(before + AMOUNT);
    expect(await minedNonce()).to.equal(nonce + 1);
    const row = await rowOf(payment);
    expect(row).to.deep.include({ status: "settled", txHash: second });
    expect(txStates(row)).to.deep.equal([
      [first, "replaced"],
      [second, "mined"],
    ]);
    const status = await lookup(url, first);
    expect(status.status).to.equal(200);
    expect(status.body).to.deep.include({ status: "settled", txHash: second, transactions: [first, second] });
    expect(await counter("x402_relayer_replacements_total")).to.equal(1);
    await keepsSettling(url);
  });

  it("settle time-out while a replaced transaction waits: payment.failed with the latest hash; once mined, the status lookup shows it settled with the mined hash", async () => {
    // The settle time-out is the wall clock's; 8 s leaves the replacement (well under a second) a wide margin.
    const { url } = await start({ SETTLE_TIMEOUT_SECONDS: "8" });
    const payment = await makePayment(proxied.chain);
    const { settling, nonce, before, first, second } = await settleThroughSpike(url, payment);

    // No block comes before the time-out: the answer is true, the latest hash and not settled.
    const answer = await settling;
    expect([answer.status, answer.body.event, answer.body.error, answer.body.txHash]).to.deep.equal([200, "payment.failed", SettleError.failedOnChain, second]);
    expect((await lookup(url, first)).body).to.deep.include({ status: "pending", txHash: second, transactions: [first, second] });
    expect(await balance()).to.equal(before);

    await proxy.chain.mine();
    await waitUntil("the reconciler settled the row", async () => (await rowOf(payment)).status === "settled");
    const status = await lookup(url, first);
    expect(status.body).to.deep.include({ status: "settled", txHash: second, transactions: [first, second] });
    expect(txStates(await rowOf(payment))).to.deep.equal([
      [first, "replaced"],
      [second, "mined"],
    ]);
    // A retry sends nothing and names the mined transaction.
    const retry = await settle(url, payment);
    expect([retry.body.event, retry.body.error, retry.body.txHash]).to.deep.equal(["payment.failed", SettleError.alreadyUsed, second]);
    expect(sends()).to.equal(2);
    expect(await balance()).to.equal(before + AMOUNT);
    expect(await minedNonce()).to.equal(nonce + 1);
    await keepsSettling(url);
  });

  it("fee spike above MAX_FEE_PER_GAS_GWEI: a new settle answers 503 naming the cap and sends nothing; the pending one keeps its price and is mined once fees fall", async () => {
    const { url } = await start({ MAX_FEE_PER_GAS_GWEI: "50" });
    await proxy.chain.automine(false);
    const pending = await makePayment(proxied.chain);
    const [nonce, before] = [await pendingNonce(), await balance()];
    const settling = settle(url, pending);
    await untilInPool(nonce + 1);
    const [first] = (await proxy.chain.pending()) as [Hex];
    const firstPrice = (await proxied.chain.publicClient.getTransaction({ hash: first })).maxFeePerGas;
    await proxy.chain.setNextBlockBaseFee(parseGwei("100"));
    await mineAfter(PAST_REPLACE_AFTER);
    // Stale, but a replacement would be above the cap: withheld.
    await waitUntil("a replacement was withheld at the cap", async () => (await counter("x402_relayer_replacements_capped_total")) >= 1);
    expect(sends()).to.equal(1);

    const refused = await makePayment(proxied.chain);
    const answer = await settle(url, refused);
    expect(answer.status).to.equal(503);
    expect(answer.body).to.deep.include({ x402Version: 1, network: "cronos-testnet" });
    expect(answer.body).to.not.have.property("event");
    expect(answer.body.error).to.match(/^Service unavailable: the network asks [\d.]+ gwei per gas, above MAX_FEE_PER_GAS_GWEI \(50 gwei\); nothing was sent$/);
    expect(sends()).to.equal(1);
    // The pending one is still in the node's pool, unmined, at its first price.
    const waiting = await proxied.chain.publicClient.getTransaction({ hash: first });
    expect([waiting.blockNumber, waiting.maxFeePerGas]).to.deep.equal([null, firstPrice]);
    // Its claim was withdrawn before anything was signed: a failed row with no transaction, claimable again.
    const withdrawn = await rowOf(refused);
    expect([withdrawn.status, withdrawn.errorCode, withdrawn.transactions]).to.deep.equal(["failed", "notSent", []]);
    expect(await counter("x402_max_fee_per_gas_wei")).to.equal(Number(parseGwei("50")));
    expect(await counter("x402_network_fee_per_gas_wei")).to.be.above(Number(parseGwei("50")));

    // Fees fall: the pending transaction is mined at its first price, under its first hash.
    await proxy.chain.setNextBlockBaseFee(parseGwei("0.5"));
    await proxy.chain.mine();
    expectSettled(await settling, pending, first);
    expect(sends()).to.equal(1);
    expect(await balance()).to.equal(before + AMOUNT);
    expect(txStates(await rowOf(pending))).to.deep.equal([[first, "mined"]]);
    // The refused one can be settled now.
    await proxy.chain.automine(true);
    const retried = await settle(url, refused);
    expect([retried.status, retried.body.event]).to.deep.equal([200, "payment.settled"]);
    expect(await balance()).to.equal(before + 2n * AMOUNT);
    await keepsSettling(url);
  });

  it("dropped transaction: the node forgot it, so it is broadcast again as signed and mined", async () => {
    const { url } = await start();
    await proxy.chain.automine(false);
    const payment = await makePayment(proxied.chain);
    const [nonce, before] = [await pendingNonce(), await balance()];
    const settling = settle(url, payment);
    await untilInPool(nonce + 1);
    const [hash] = (await proxy.chain.pending()) as [Hex];
    expect(await proxy.chain.dropTransaction(hash)).to.equal(true);
    await mineAfter(PAST_REPLACE_AFTER);
    await waitUntil("the transaction is back in the pool", async () => (await proxy.chain.pending()).includes(hash));
    expect(sends()).to.equal(2);
    await proxy.chain.mine();

    expectSettled(await settling, payment, hash);
    expect(await balance()).to.equal(before + AMOUNT);
    expect(await minedNonce()).to.equal(nonce + 1);
    const row = await rowOf(payment);
    expect(row).to.deep.include({ status: "settled", txHash: hash });
    expect(txStates(row)).to.deep.equal([[hash, "mined"]]);
    expect([await counter("x402_relayer_drops_detected_total"), await counter("x402_relayer_rebroadcasts_total"), await counter("x402_relayer_replacements_total")]).to.deep.equal([1, 1, 0]);
    await keepsSettling(url);
  });

  it("nonce gap: the lower of two transactions dropped, it is re-sent and both are mined", async () => {
    const { url } = await start();
    await proxy.chain.automine(false);
    const [a, b] = [await makePayment(proxied.chain), await makePayment(proxied.chain)];
    const [nonce, before] = [await pendingNonce(), await balance()];
    const settlingA = settle(url, a);
    await untilInPool(nonce + 1);
    const settlingB = settle(url, b);
    await untilInPool(nonce + 2);
    const hashA = (await rowOf(a)).txHash!;
    const hashB = (await rowOf(b)).txHash!;
    expect(await proxy.chain.dropTransaction(hashA)).to.equal(true);
    // B waits on A's nonce: the block cannot take it.
    await mineAfter(PAST_REPLACE_AFTER);
    expect(await minedNonce()).to.equal(nonce);
    await waitUntil("the gap is filled", async () => (await counter("x402_relayer_nonce_gaps_filled_total", { by: "resend" })) === 1);
    await proxy.chain.mine();

    expectSettled(await settlingA, a, hashA);
    expectSettled(await settlingB, b, hashB);
    expect(await balance()).to.equal(before + 2n * AMOUNT);
    expect(await minedNonce()).to.equal(nonce + 2);
    expect(txStates(await rowOf(a))).to.deep.equal([[hashA, "mined"]]);
    // B waited on the gap at a price the network took: never re-priced.
    expect(txStates(await rowOf(b))).to.deep.equal([[hashB, "mined"]]);
    expect(await counter("x402_relayer_replacements_total")).to.equal(0);
    await keepsSettling(url);
  });

  it("nonce gap whose missing transaction can no longer succeed (its authorization expired): a zero-value self-transfer fills it, that settle fails, the next is mined", async () => {
    const { url } = await start();
    await proxy.chain.automine(false);
    const head = await proxied.chain.publicClient.getBlock();
    const expiring = await makePayment(proxied.chain, { validBefore: head.timestamp + 30n });
    const waiting = await makePayment(proxied.chain);
    const [nonce, before] = [await pendingNonce(), await balance()];
    const settlingA = settle(url, expiring);
    await untilInPool(nonce + 1);
    const settlingB = settle(url, waiting);
    await untilInPool(nonce + 2);
    const hashA = (await rowOf(expiring)).txHash!;
    const hashB = (await rowOf(waiting)).txHash!;
    expect(await proxy.chain.dropTransaction(hashA)).to.equal(true);
    // Past A's validBefore: its call reverts now, so re-sending it would only burn gas.
    await mineAfter(60);
    await waitUntil("the gap is filled by a self-transfer", async () => (await counter("x402_relayer_nonce_gaps_filled_total", { by: "self-transfer" })) === 1);
    const [filler] = (await proxy.chain.pending()).filter((hash) => hash !== hashB) as [Hex];
    const fill = await proxied.chain.publicClient.getTransaction({ hash: filler });
    expect([fill.from, fill.to, fill.value, fill.nonce, fill.input]).to.deep.equal([RELAYER.toLowerCase(), RELAYER.toLowerCase(), 0n, nonce, "0x"]);
    await proxy.chain.mine();

    const answerA = await settlingA;
    expect([answerA.status, answerA.body.event, answerA.body.error, answerA.body.txHash]).to.deep.equal([200, "payment.failed", SettleError.expired, hashA]);
    expectSettled(await settlingB, waiting, hashB);
    expect(await balance()).to.equal(before + AMOUNT);
    expect(await minedNonce()).to.equal(nonce + 2);
    expect(await proxied.chain.contract.read.authorizationState([expiring.message.from, expiring.message.nonce])).to.equal(false);
    expect(await rowOf(expiring)).to.deep.include({ status: "failed", errorCode: "expired", txHash: hashA });
    // B waited on the gap at a price the network took: never re-priced.
    expect(txStates(await rowOf(waiting))).to.deep.equal([[hashB, "mined"]]);
    expect(await counter("x402_relayer_replacements_total")).to.equal(0);
    expect((await lookup(url, hashA)).body).to.deep.include({ status: "failed", error: SettleError.expired });
    await keepsSettling(url);
  });

  it("answer to the send lost: the transaction is found by its hash and followed to its receipt, never sent again", async () => {
    const { url } = await start();
    // The node takes the transaction (mined at once), the answer never comes, and for a while the
    // node's answers do not show it either (a lagging node behind a load balancer).
    let hidden: Hex | undefined;
    proxy.fail({
      kind: "swallow",
      method: "eth_sendRawTransaction",
      times: 1,
      then: (requests) => {
        // The send may share its HTTP batch with other reads (the state index's): find it in the batch.
        const send = requests.find((request) => request.method === "eth_sendRawTransaction")!;
        hidden = keccak256((send.params as [Hex])[0]);
        proxy.hide(hidden);
      },
    });
    const payment = await makePayment(proxied.chain);
    const [nonce, before] = [await pendingNonce(), await balance()];
    const settling = settle(url, payment);
    await waitUntil("the receipt was asked for while hidden", () => hidden !== undefined && proxy.count("eth_getTransactionReceipt") >= 3);
    proxy.unhide(hidden!);

    expectSettled(await settling, payment, hidden!);
    expect(sends()).to.equal(1);
    expect(await balance()).to.equal(before + AMOUNT);
    expect(await minedNonce()).to.equal(nonce + 1);
    expect(txStates(await rowOf(payment))).to.deep.equal([[hidden, "mined"]]);
    await keepsSettling(url);
  });

  it("RPC killed mid-settle with a second URL configured: the send reaches the node once, the settle completes through the other URL", async () => {
    const [first, second] = proxied.proxies as [FaultProxy, FaultProxy];
    const { url } = await start({ CRONOS_TESTNET_RPC_URL: proxied.rpcUrls });
    await proxy.chain.automine(false);
    first.fail({ kind: "swallow", method: "eth_sendRawTransaction", times: 1, then: () => first.kill() });
    const payment = await makePayment(proxied.chain);
    const [nonce, before] = [await pendingNonce(), await balance()];
    const settling = settle(url, payment);
    await untilInPool(nonce + 1);
    const [hash] = (await second.chain.pending()) as [Hex];
    await second.chain.mine();

    expectSettled(await settling, payment, hash);
    // The same signed transaction went to both URLs; the second knew it already.
    expect([first.count("eth_sendRawTransaction"), second.count("eth_sendRawTransaction")]).to.deep.equal([1, 1]);
    expect(await balance()).to.equal(before + AMOUNT);
    expect(await minedNonce()).to.equal(nonce + 1);
    expect(txStates(await rowOf(payment))).to.deep.equal([[hash, "mined"]]);
    const health = await fetchJson(`${url}/healthcheck`);
    expect([health.status, health.body.status]).to.deep.equal([200, "success"]);
    await keepsSettling(url);
  });

  it("facilitator restarted with a transaction pending: the restarted process takes it over, replaces it when stuck, and records the mined hash", async () => {
    const dir = await mkdtemp(join(tmpdir(), "x402-restart-"));
    dirs.push(dir);
    const env = {
      CRONOS_TESTNET_RPC_URL: proxy.url,
      RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer,
      LEDGER_FILE: join(dir, "ledger.db"),
      LEDGER_LEASE_TTL_SECONDS: "1",
      METRICS_PORT: "0",
      RATE_LIMIT_VERIFY_PER_MINUTE: "0",
      RATE_LIMIT_SETTLE_PER_MINUTE: "0",
      RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "0",
      POLLING_INTERVAL_MS: "20",
      ...FAULT_ENV,
    };
    const before = await balance();
    const crashed = await startFacilitatorProcess(env);
    processes.push(crashed);
    await proxy.chain.automine(false);
    const payment = await makePayment(proxied.chain);
    const nonce = await pendingNonce();
    void settle(crashed.url, payment).catch(() => undefined);
    await untilInPool(nonce + 1);
    const [first] = (await proxy.chain.pending()) as [Hex];
    await crashed.kill();

    // While it is down, fees rise past the transaction's max fee: it is stuck in the pool.
    const priced = await proxied.chain.publicClient.getTransaction({ hash: first });
    await proxy.chain.setNextBlockBaseFee(priced.maxFeePerGas! * 4n);
    await mineAfter(PAST_REPLACE_AFTER);
    const restarted = await startFacilitatorProcess(env);
    processes.push(restarted);
    // Its lifecycle notes the transaction at the next head; chain time then passes the replacement delay.
    await waitUntil("the restarted process took the transaction over", () => restarted.logs.some((l) => l.msg === "relayer key lease acquired"));
    // Chain time moves (2 s a block) until the replacement reaches the node; then plain blocks until it is mined.
    // (A block mined while the replacement was being signed may age it past the delay again: it can be
    // re-priced once more before a block takes it, so the test asserts every version, not their number.)
    await waitUntil("the stuck transaction was replaced and mined", async () => {
      if ((await minedNonce()) > nonce) return true;
      if (sends() >= 2) await proxy.chain.mine();
      else {
        // Each empty block lowers the base fee by 1/8: held up, so the first version stays stuck however long
        // the restarted process takes (on a loaded machine the first version was mined before its replacement).
        await proxy.chain.setNextBlockBaseFee(priced.maxFeePerGas! * 4n);
        await mineAfter(2);
      }
      return false;
    });
    await waitUntil("the row is settled", async () => (await lookup(restarted.url, first)).body.status === "settled");
    const status = await lookup(restarted.url, first);
    const minedHash = status.body.txHash as Hex;
    const versions = status.body.transactions as Hex[];
    expect(status.body.status).to.equal("settled");
    expect(minedHash).to.not.equal(first);
    // Every version is recorded, the first one first, and the mined one among them; each went out through the
    // proxy (a re-broadcast of an identical version is one more send, no new version).
    expect([versions[0], versions.length >= 2, versions.length <= sends(), versions.includes(minedHash)]).to.deep.equal([first, true, true, true]);
    // The restarted process's ledger file, read beside it (WAL: a reader does not block the writer).
    const file = new DatabaseSync(join(dir, "ledger.db"), { readOnly: true });
    try {
      const rows = file
        .prepare(`SELECT hash, state FROM settlement_transactions WHERE settlement_id = (SELECT settlement_id FROM settlement_transactions WHERE hash = ?) ORDER BY id`)
        .all(first.toLowerCase())
        .map((row) => [row.hash, row.state]);
      expect(rows).to.deep.equal(versions.map((hash) => [hash, hash === minedHash ? "mined" : "replaced"]));
    } finally {
      file.close();
    }
    const mined = await proxied.chain.publicClient.getTransaction({ hash: minedHash });
    expect([mined.nonce, mined.maxFeePerGas! >= (priced.maxFeePerGas! * 1125n) / 1000n]).to.deep.equal([priced.nonce, true]);
    const retry = await settle(restarted.url, payment);
    expect([retry.status, retry.body.event, retry.body.error, retry.body.txHash]).to.deep.equal([200, "payment.failed", SettleError.alreadyUsed, minedHash]);
    expect(await balance()).to.equal(before + AMOUNT);
    expect(await minedNonce()).to.equal(nonce + 1);
    await keepsSettling(restarted.url);
  });
});
