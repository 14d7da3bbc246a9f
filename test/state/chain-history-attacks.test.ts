import { expect } from "chai";
import { createPublicClient, custom, encodeFunctionData, http, numberToHex, parseSignature, toHex, type Hex, type PublicClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { MEMORY, openSqliteLedger } from "../../src/ledger/sqlite.js";
import type { Ledger, SettlementRecord } from "../../src/ledger/types.js";
import { paymentReads } from "../../src/settlement/payment-reads.js";
import { proveSettled } from "../../src/settlement/history-proof.js";
import { ChainHistory } from "../../src/state/index.js";
import { HARDHAT_KEYS, makePayment, useAuthorizationOnChain } from "../helpers/facilitator.js";
import { settledRecord, TestClock } from "../helpers/ledger.js";
import { openProxiedChain, type ProxiedChain } from "../helpers/proxied-chain.js";
import { openChain } from "../helpers/token.js";

// Issue 39, finding 3: one lagging `latest` answer erased a chain's ledger state (a head below every checkpoint was
// taken as another history from genesis; one "receipt not found" set a settled row aside; nothing came back). Each
// test is an attacker's (or an unlucky operator's) RPC; the ledger is checked whole before and after.

const quiet = { info() {}, warn() {}, debug() {} };
const freshNonce = () => toHex(crypto.getRandomValues(new Uint8Array(32)));
const buyer = privateKeyToAccount(HARDHAT_KEYS.buyer);
const seller = privateKeyToAccount(HARDHAT_KEYS.seller);
/** The history checker's interval in production (facilitator/background-jobs.ts). */
const CHECK_MS = 10_000;
const CONFIRM_MS = 2_000;

describe("chain history under attack: a node behind, a missing receipt, a forged block (issue 39)", function () {
  this.timeout(120_000);
  let proxied: ProxiedChain;
  let client: PublicClient;
  let clock: TestClock;
  let ledger: Ledger;
  let history: ChainHistory;
  /** Each row written, to read back whole. */
  let settled: number[];

  const chain = () => proxied.chain;
  const scope = () => ({ chainId: 338, token: chain().token });
  const head = () => chain().publicClient.getBlockNumber({ cacheTime: 0 });
  const hashOf = async (blockNumber: bigint) => (await chain().publicClient.getBlock({ blockNumber })).hash;

  /** A checker over `rpc`, its clock the ledger's: a confirmation moves it instead of waiting. */
  function checker(rpc: PublicClient): ChainHistory {
    const payments = paymentReads({ client: rpc, chainId: 338, logLookbackBlocks: 1_000 });
    return new ChainHistory({
      network: "cronos-testnet",
      client: rpc,
      chainId: 338,
      token: chain().token,
      store: ledger,
      logger: quiet,
      prove: (row) => proveSettled(payments, row),
      checkIntervalMs: 0,
      confirmAfterMs: CONFIRM_MS,
      wait: async (ms) => clock.advance(ms),
    });
  }

  beforeEach(async () => {
    proxied = await openProxiedChain();
    client = createPublicClient({ transport: http(proxied.rpcUrls, { batch: { wait: 0 }, retryCount: 0 }), cacheTime: 0 }) as PublicClient;
    clock = new TestClock();
    ledger = openSqliteLedger({ location: MEMORY, clock: clock.read });
    history = checker(client);
    settled = [];
  });
  afterEach(async () => {
    history.stop();
    await ledger.close();
    await proxied.close();
  });

  /** A settled row for a real payment on chain (its receipt pays it), as the settle path writes it. */
  async function paidRow(): Promise<SettlementRecord> {
    const nonce = freshNonce();
    await useAuthorizationOnChain(chain(), nonce);
    const block = await chain().publicClient.getBlock({ includeTransactions: false });
    return settledRow(nonce, block.transactions[0]!, block.number, block.timestamp);
  }

  /** A settled row of the buyer's authorization `nonce` (1,000 units to the seller), mined by `txHash`, as the ledger holds it. */
  async function settledRow(nonce: Hex, txHash: Hex, blockNumber: bigint, blockTimestamp: bigint): Promise<SettlementRecord> {
    const key = { chainId: 338, token: chain().token, authorizer: buyer.address, nonce };
    const row = await settledRecord(ledger, { key, payee: seller.address, value: 1_000n, txHash, blockNumber, blockTimestamp });
    settled.push(row.id);
    return row;
  }

  /**
   * A ledger as a running facilitator leaves it: two real payments settled, a penalty, a payment identifier, a catalog
   * entry of the chain, the index's nonces and progress, and a checkpoint at each block (the index's steps).
   */
  async function busyLedger(): Promise<void> {
    await history.start();
    // A checkpoint per block as the index stores its steps, then rows without a block written later.
    const first = await paidRow();
    await ledger.recordCheckpoint(338, { number: first.blockNumber!, hash: await hashOf(first.blockNumber!) });
    clock.advance(1_000);
    const second = await paidRow();
    await ledger.recordCheckpoint(338, { number: second.blockNumber!, hash: await hashOf(second.blockNumber!) });
    clock.advance(1_000);
    await ledger.penalize({ ...scope(), kind: "payer", subject: buyer.address.toLowerCase(), until: 9_999_999_999n });
    await ledger.bindPaymentIdentifier(scope(), buyer.address, "pay_history_attack_1", { nonce: second.key.nonce });
    const paidAt = new Date(Number(second.blockTimestamp!) * 1000).toISOString();
    await ledger.recordDiscoveryPayment(
      {
        entry: { resource: "https://seller.example/weather", type: "http", x402Version: 2, accepts: [{ scheme: "exact", network: "eip155:338", payTo: seller.address, amount: "1000" }], lastUpdated: paidAt },
        payTo: seller.address,
        payer: buyer.address,
        words: ["weather"],
      },
      { maxEntries: 100, maxEntriesPerSeller: 100 },
    );
    const tip = await head();
    await ledger.openNonceIndex(scope(), 1n);
    await ledger.recordIndexedNonces(
      scope(),
      [first, second].map((row) => ({ authorizer: buyer.address, nonce: row.key.nonce, blockNumber: row.blockNumber! })),
      { fromBlock: 1n, throughBlock: tip, throughHash: await hashOf(tip) },
    );
  }

  /** Everything the ledger holds of the chain, read whole. */
  async function state() {
    return {
      settled: await Promise.all(settled.map((id) => ledger.getById(id))),
      penalty: await ledger.activePenalty(scope(), [{ kind: "payer", subject: buyer.address }], 0n),
      binding: await ledger.paymentIdentifierBinding(scope(), buyer.address, "pay_history_attack_1"),
      catalog: (await ledger.listDiscoveryResources({ limit: 10, offset: 0, maxBytes: 1 << 20 })).items,
      search: (await ledger.searchDiscoveryResources({ words: ["weather"], limit: 10, offset: 0, maxBytes: 1 << 20 })).items,
      nonces: await ledger.indexedNonces(scope(), { limit: 100 }),
      progress: await ledger.nonceIndexProgress(scope()),
    };
  }

  it("a fallback RPC behind every checkpoint, for 5 minutes of checks, erases nothing; the next honest check finds the same history", async () => {
    await busyLedger();
    const before = await state();
    expect(before.settled.map((row) => row?.status)).to.deep.equal(["settled", "settled"]);
    expect(before.nonces).to.have.length(2);
    expect(before.catalog).to.have.length(1);
    const { checkpoints } = (await ledger.chainHistory(338))!;
    // The node answers as it was before the first payment: its head, blocks, receipts, logs and state (a fallback RPC
    // minutes behind, every request going to it).
    const behind = checkpoints.at(-1)!.number - 1n;
    proxied.proxies[0]!.behind(behind);
    expect(await client.getBlockNumber()).to.equal(behind);
    expect(await client.getTransactionReceipt({ hash: before.settled[0]!.txHash! }).catch((e: Error) => e.name)).to.equal("TransactionReceiptNotFoundError");
    // Thirty checks, ten seconds apart on the checker's (and the ledger's) clock: five minutes.
    const started = clock.now;
    for (let i = 0; i < 30; i++) {
      await history.check();
      clock.advance(CHECK_MS);
    }
    expect(clock.now - started).to.equal(300_000);
    expect(await state()).to.deep.equal(before);
    expect(await ledger.setAsideRows()).to.deep.equal([]);
    expect(await ledger.pendingHistoryChanges(338, { limit: 10 })).to.deep.equal([]);
    expect((await ledger.chainHistory(338))!).to.deep.include({ epoch: 1, checkpoints });
    // Caught up: the same history, its head recorded.
    proxied.proxies[0]!.behind(undefined);
    await history.check();
    expect(await state()).to.deep.equal(before);
    expect((await ledger.chainHistory(338))!.checkpoints[0]).to.deep.include({ number: await head(), hash: await hashOf(await head()) });
  });

  it("one 'receipt not found' (a node that has not seen the transaction) sets no settled row aside", async () => {
    await history.start();
    const row = await paidRow();
    // A node that knows the chain but not this transaction: its receipt and the transaction are not found.
    proxied.proxies[0]!.hide(row.txHash!);
    for (let i = 0; i < 3; i++) {
      await history.check();
      clock.advance(CHECK_MS);
    }
    expect(await ledger.getById(row.id)).to.deep.equal(row);
    expect(await ledger.setAsideRows()).to.deep.equal([]);
  });

  it("a node forging a checkpoint's hash for longer than the confirmation gets its change believed, and every row comes back once the chain shows the trail again", async () => {
    await busyLedger();
    const before = await state();
    const aside = before.settled[1]!;
    const forged = (await ledger.chainHistory(338))!.checkpoints[0]!;
    // Block `forged` answered with another hash, every time (a node on another branch), and the second payment's
    // receipt not found there.
    proxied.proxies[0]!.rewrite((request, answer) =>
      request.method === "eth_getBlockByNumber" && (request.params as [string])[0] === numberToHex(forged.number) && answer.result
        ? { result: { ...(answer.result as object), hash: `0x${"99".repeat(32)}` } }
        : undefined,
    );
    proxied.proxies[0]!.hide(aside.txHash!);
    await history.check();
    // Believed: the rows of the other history are set aside (the first payment's receipt proves it: it stays).
    expect(await ledger.getById(aside.id)).to.equal(undefined);
    expect((await ledger.getById(before.settled[0]!.id))?.status).to.equal("settled");
    expect((await ledger.setAsideRows({ chainId: 338 })).map((r) => r.kind).sort()).to.include.members(["settlement", "settlement_transaction", "payment_identifier", "penalty", "catalog_entry"]);
    expect((await state()).nonces).to.have.length(1);
    const [change] = await ledger.pendingHistoryChanges(338, { limit: 10 });
    expect(change).to.deep.include({ everything: false, reason: `the chain replaced block ${forged.number} of the ledger's trail` });
    expect(change!.trail[0]).to.deep.include({ number: forged.number, hash: forged.hash });

    // The chain shows the trail again: the change is undone, every row back as it was.
    proxied.proxies[0]!.clear();
    await history.check();
    expect(await state()).to.deep.equal(before);
    expect(await ledger.setAsideRows({ chainId: 338 })).to.deep.equal([]);
    expect(await ledger.pendingHistoryChanges(338, { limit: 10 })).to.deep.equal([]);
    expect((await ledger.chainHistory(338))!.checkpoints.map((c) => c.number)).to.include(forged.number);
  });

  it("a forged block answered once, then truthfully, changes nothing", async () => {
    await busyLedger();
    const before = await state();
    const newest = (await ledger.chainHistory(338))!.checkpoints[0]!;
    let forged = 0;
    proxied.proxies[0]!.rewrite((request, answer) => {
      if (request.method !== "eth_getBlockByNumber" || (request.params as [string])[0] !== numberToHex(newest.number) || forged > 0) return undefined;
      forged++;
      return { result: { ...(answer.result as object), hash: `0x${"99".repeat(32)}` } };
    });
    await history.check();
    expect(forged).to.equal(1);
    expect(await state()).to.deep.equal(before);
    expect(await ledger.setAsideRows()).to.deep.equal([]);
  });

  it("a restarted chain is still told apart: behind while shorter than the trail, set aside once it shows a block of the trail replaced", async () => {
    await busyLedger();
    const old = await state();
    // The same RPC now answers from a restarted chain (same genesis and setup blocks: the harness's fixed start).
    const second = await openChain("cronos-testnet");
    expect((await second.publicClient.getBlock({ blockNumber: 0n })).hash).to.equal(await hashOf(0n));
    const restarted = createPublicClient({ transport: custom(second.connection.provider), cacheTime: 0 }) as PublicClient;
    history.stop();
    history = checker(restarted);
    await history.check();
    // Shorter than every checkpoint: a node behind, nothing proven yet.
    expect(await state()).to.deep.equal(old);
    // A block of its own at the trail's heights: another history, proven.
    const checkpoints = (await ledger.chainHistory(338))!.checkpoints;
    while ((await second.publicClient.getBlockNumber()) < checkpoints[0]!.number) await useAuthorizationOnChain(second, freshNonce());
    await history.check();
    expect(await Promise.all(settled.map((id) => ledger.getById(id)))).to.deep.equal([undefined, undefined]);
    const [change] = await ledger.pendingHistoryChanges(338, { limit: 1 });
    expect(change!.reason).to.match(/^the chain replaced block \d+ of the ledger's trail$/);
    expect((await ledger.setAsideRows({ chainId: 338 })).filter((r) => r.kind === "settlement").map((r) => r.row.id).sort()).to.deep.equal([...settled].sort());
    expect(await ledger.activePenalty(scope(), [{ kind: "payer", subject: buyer.address }], 0n)).to.equal(undefined);
    expect(await ledger.indexedNonces(scope(), { limit: 10 })).to.deep.equal([]);
    // The old chain's trail is not the chain's: nothing comes back.
    await history.check();
    expect(await ledger.pendingHistoryChanges(338, { limit: 1 })).to.have.length(1);
  });

  // Finding 6: re-proving rows took AuthorizationCanceled as the use, and any later Transfer as the payment. One
  // transaction (a payer's Multicall3 batch) cancels authorization N, then pays the seller the same value under another
  // authorization M: its receipt holds AuthorizationCanceled(N), AuthorizationUsed(M), Transfer(buyer → seller). Such
  // a row can come to be when a batch that paid under N is mined again on another history where N's transfer fails
  // (expired there) and the cancel goes through. The one payment decision says N was canceled, not paid.
  it("re-proving a settled row uses the one payment decision: a receipt that cancels the authorization and pays the seller under another does not keep the row", async () => {
    await history.start();
    const common = await head();
    const abi = chain().contract.abi;
    const canceled = freshNonce();
    const cancel = await buyer.signTypedData({
      domain: { name: chain().info.domain.name, version: chain().info.domain.version, chainId: 338, verifyingContract: chain().token },
      types: { CancelAuthorization: [{ name: "authorizer", type: "address" }, { name: "nonce", type: "bytes32" }] },
      primaryType: "CancelAuthorization",
      message: { authorizer: buyer.address, nonce: canceled },
    });
    const other = await makePayment(chain(), { nonce: freshNonce(), amount: 1_000n });
    const { v, r, s: sigS } = parseSignature(other.signature);
    const m = other.message;
    const multicall = await chain().viem.deployContract("Multicall3");
    const batch = await multicall.write.aggregate3([
      [
        { target: chain().token, allowFailure: false, callData: encodeFunctionData({ abi, functionName: "cancelAuthorization", args: [buyer.address, canceled, cancel] }) },
        {
          target: chain().token,
          allowFailure: false,
          callData: encodeFunctionData({ abi, functionName: "transferWithAuthorization", args: [m.from, m.to, m.value, m.validAfter, m.validBefore, m.nonce, Number(v), r, sigS] }),
        },
      ],
    ]);
    const receipt = await chain().publicClient.getTransactionReceipt({ hash: batch });
    expect(receipt.logs.filter((log) => log.address.toLowerCase() === chain().token.toLowerCase())).to.have.length(3);
    const block = await chain().publicClient.getBlock({ blockNumber: receipt.blockNumber });
    const row = await settledRow(canceled, batch, receipt.blockNumber, block.timestamp);
    const real = await paidRow();
    // The index reports the blocks after `common` replaced: every settled row after it is proven again.
    await history.diverged({ number: common, hash: await hashOf(common) });
    expect(await ledger.getById(row.id)).to.equal(undefined);
    expect(await ledger.getById(real.id)).to.deep.equal(real);
    expect((await ledger.setAsideRows({ chainId: 338 })).filter((r) => r.kind === "settlement").map((r) => r.row.id)).to.deep.equal([row.id]);
  });
});
