import { expect } from "chai";
import { createPublicClient, http, parseEther, toHex, type Hex, type PublicClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { MEMORY, openSqliteLedger } from "../../src/ledger/sqlite.js";
import type { Ledger } from "../../src/ledger/types.js";
import { TokenIndex, type TokenIndexParameters } from "../../src/state/index.js";
import { EMPTY_LOG_ASKS } from "../../src/state/block-reader.js";
import { logRefusal } from "../../src/state/proven-logs.js";
import { HARDHAT_KEYS, useAuthorizationOnChain } from "../helpers/facilitator.js";
import { capLogs, cutLogsShort } from "../helpers/log-faults.js";
import { openProxiedChain, type ProxiedChain } from "../helpers/proxied-chain.js";
import type { JsonRpcRequest } from "../helpers/rpc-proxy.js";
import { waitUntil } from "../helpers/wait.js";

// Log reads that prove what they cover (issue 38): an ethermint node answers eth_getLogs with what it has, without
// error, when it lacks a block's results (a backend behind the head, a pruned node); the index counts an answer only
// for the blocks the node proved it holds. The node here is the local chain behind a proxy that answers as such a
// backend would (test/helpers/log-faults.ts).

const quiet = { info() {}, warn() {}, debug() {} };
const freshNonce = () => toHex(crypto.getRandomValues(new Uint8Array(32)));
type Filter = { fromBlock?: Hex; toBlock?: Hex; blockHash?: Hex };
const filterOf = (request: JsonRpcRequest) => (request.params as [Filter])[0];
const isRangeRead = (request: JsonRpcRequest) => request.method === "eth_getLogs" && !filterOf(request).blockHash;

describe("token state index: log reads that prove what they cover", function () {
  this.timeout(90_000);
  let proxied: ProxiedChain;
  let client: PublicClient;
  let ledger: Ledger;
  const indexes: TokenIndex[] = [];
  const requests: JsonRpcRequest[] = [];
  const buyer = privateKeyToAccount(HARDHAT_KEYS.buyer);
  const followErrors: string[] = [];

  beforeEach(async () => {
    proxied = await openProxiedChain();
    client = createPublicClient({ transport: http(proxied.rpcUrls, { batch: { wait: 0 } }), cacheTime: 0 }) as PublicClient;
    ledger = openSqliteLedger({ location: MEMORY });
    requests.length = 0;
    followErrors.length = 0;
    record();
  });
  afterEach(async () => {
    await Promise.all(indexes.splice(0).map((index) => index.stop()));
    await ledger.close();
    await proxied.close();
  });

  const proxy = () => proxied.proxies[0]!;
  const chain = () => proxied.chain;
  const scope = () => ({ chainId: 338, token: chain().token });
  /** Records every JSON-RPC request the proxy forwards (again after a `clear`). */
  const record = () => proxy().rewrite((request) => void requests.push(request));
  const open = (overrides: Partial<TokenIndexParameters> = {}) => {
    const index = new TokenIndex({
      network: "cronos-testnet",
      client,
      chainId: 338,
      token: chain().token,
      store: ledger,
      startBlockVariable: "CRONOS_TESTNET_INDEX_START_BLOCK",
      logRangeBlocks: 2_000,
      pollingIntervalMs: 20,
      logger: quiet,
      observe: { followError: (kind) => followErrors.push(kind) },
      ...overrides,
    });
    indexes.push(index);
    index.start();
    return index;
  };
  const head = () => chain().publicClient.getBlockNumber({ cacheTime: 0 });
  const backfilled = async (index: TokenIndex) => {
    expect(await waitUntil(async () => index.status().backfill.state === "done", 20_000, 10), JSON.stringify(index.status())).to.equal(true);
  };
  /** Uses an authorization of the buyer on chain; resolves with the block that spent it. */
  const spend = async (nonce: Hex) => {
    await useAuthorizationOnChain(chain(), nonce);
    return head();
  };
  const rangeReads = () => requests.filter(isRangeRead);
  const hashReads = (hash: Hex) => requests.filter((r) => r.method === "eth_getLogs" && filterOf(r).blockHash?.toLowerCase() === hash.toLowerCase());
  const blockHash = async (number: bigint) => (await chain().publicClient.getBlock({ blockNumber: number })).hash;

  it("asks a range of logs in one batch with the node's headers of its last block (before) and its first (after)", async () => {
    const index = open({ tailBlocks: 0 });
    await backfilled(index);
    const batch = proxy().batches.find((methods) => methods.includes("eth_getLogs"));
    expect(batch).to.deep.equal(["eth_getBlockByNumber", "eth_getLogs", "eth_getBlockByNumber"]);
    const [last, logs, first] = requests.slice(requests.findIndex((r) => r.method === "eth_getLogs") - 1);
    const { fromBlock, toBlock } = filterOf(logs!);
    expect([(last!.params as [Hex])[0], (first!.params as [Hex])[0]]).to.deep.equal([toBlock, fromBlock]);
  });

  it("a backend 60 blocks behind the head (one node per request): stores no range it did not prove, answers 'ask the chain' for every nonce meanwhile, then finishes once the node answers honestly", async () => {
    const early = freshNonce();
    const spentEarly = await spend(early);
    await chain().networkHelpers.mine(100);
    const recent = freshNonce();
    const spentRecent = await spend(recent);
    await chain().networkHelpers.mine(1);
    const cut = cutLogsShort(proxy(), { lagBlocks: 60, below: "head", batch: "same-backend" });
    const index = open({ tailBlocks: 0, logRangeBlocks: 20 });
    // The ranges below the cut are proven and stored; the one reaching past it is asked again and again, never stored.
    expect(await waitUntil(async () => cut.changed >= 3 && index.status().state === "following", 20_000, 20), JSON.stringify(index.status())).to.equal(true);
    const progress = (await ledger.nonceIndexProgress(scope()))!;
    expect(index.status().backfill.state).to.equal("running");
    expect(progress.throughBlock < spentRecent).to.equal(true);
    expect(progress.throughBlock >= spentEarly).to.equal(true);
    // Known spent where proven; not "unused" from memory anywhere else: the chain is asked.
    expect((await index.payer(buyer.address, early, 60_000))!.used).to.equal(true);
    expect((await index.payer(buyer.address, recent, 60_000))!.used).to.equal(undefined);
    expect((await index.payer(buyer.address, freshNonce(), 60_000))!.used).to.equal(undefined);
    expect(await index.spentAt(buyer.address, recent, 60_000)).to.equal(undefined);

    cut.end();
    await backfilled(index);
    expect((await index.payer(buyer.address, recent, 60_000))!.used).to.equal(true);
    expect(await index.spentAt(buyer.address, recent, 60_000)).to.deep.equal({ spent: true, blockNumber: spentRecent });
    expect((await ledger.nonceIndexProgress(scope()))!.throughBlock).to.equal(BigInt(index.status().backfill.targetBlock!));
  });

  it("a gateway that splits batches (the headers from an up-to-date backend): the blocks before the start are read one by one, a spend one block ago proven by its receipt", async () => {
    const nonce = freshNonce();
    const spentAt = await spend(nonce);
    await chain().networkHelpers.mine(1);
    const cut = cutLogsShort(proxy(), { lagBlocks: 60, batch: "split" });
    const index = open();
    await backfilled(index);
    expect(cut.changed).to.be.greaterThan(0);
    // The spending block's logs came back empty each time they were asked, then its receipt named the spend.
    const hash = await blockHash(spentAt);
    expect(hashReads(hash)).to.have.length(EMPTY_LOG_ASKS);
    const receipt = await chain().publicClient.getTransactionReceipt({ hash: (await chain().publicClient.getBlock({ blockNumber: spentAt })).transactions[0]! });
    expect(receipt.blockNumber).to.equal(spentAt);
    expect(requests.filter((r) => r.method === "eth_getTransactionReceipt" && (r.params as [Hex])[0] === receipt.transactionHash)).to.have.length(1);
    expect((await index.payer(buyer.address, nonce, 60_000))!.used).to.equal(true);
    expect(await index.spentAt(buyer.address, nonce, 60_000)).to.deep.equal({ spent: true, blockNumber: spentAt });
    expect(index.status().state).to.equal("following");
  });

  it("receipts behind too: the block is not proven, the backfill not done, the index answers 'ask the chain'; honest again, it knows the spend", async () => {
    const nonce = freshNonce();
    await spend(nonce);
    await chain().networkHelpers.mine(1);
    const cut = cutLogsShort(proxy(), { lagBlocks: 60, batch: "split", receiptsLag: true });
    const index = open();
    expect(await waitUntil(async () => index.status().state === "following" && requests.filter((r) => r.method === "eth_getTransactionReceipt").length >= 2, 20_000, 20)).to.equal(true);
    expect(index.status().backfill.state).to.equal("running");
    expect((await index.payer(buyer.address, nonce, 60_000))!.used).to.equal(undefined);
    expect((await index.payer(buyer.address, freshNonce(), 60_000))!.used).to.equal(undefined);
    cut.end();
    await backfilled(index);
    expect((await index.payer(buyer.address, nonce, 60_000))!.used).to.equal(true);
  });

  it("following: a new block whose logs come back empty is proven by its receipts, or (receipts missing) not applied: behind, answering nothing, until the node answers", async () => {
    const index = open();
    await backfilled(index);
    await index.payer(buyer.address, freshNonce(), 60_000);
    // Receipts there: proven, applied, following.
    let cut = cutLogsShort(proxy(), { lagBlocks: 60, batch: "split" });
    const first = freshNonce();
    const firstBlock = await spend(first);
    expect((await index.payer(buyer.address, first, 0))!).to.deep.include({ used: true });
    expect(hashReads(await blockHash(firstBlock))).to.have.length(EMPTY_LOG_ASKS);
    cut.end();
    // Receipts missing: the block is not applied; the index is behind and answers nothing.
    cut = cutLogsShort(proxy(), { lagBlocks: 60, batch: "split", receiptsLag: true });
    const second = freshNonce();
    const secondBlock = await spend(second);
    expect(await index.payer(buyer.address, second, 0)).to.equal(undefined);
    expect(index.status()).to.deep.include({ state: "behind", block: Number(secondBlock - 1n), chainBlock: Number(secondBlock) });
    expect(followErrors).to.include("inconsistent");
    cut.end();
    expect(await waitUntil(async () => index.status().state === "following", 10_000, 20)).to.equal(true);
    expect((await index.payer(buyer.address, second, 60_000))!).to.deep.include({ used: true });
  });

  it("a bloom that names the token falsely (anyone can make one), in a block of many transactions: asked 3 times, then the block's receipts once, in one batch, and the index moves on", async () => {
    const index = open();
    await backfilled(index);
    const nonce = freshNonce();
    await index.payer(buyer.address, nonce, 60_000);
    const ones = `0x${"f".repeat(512)}`;
    proxy().rewrite((request, answer) => {
      if (!String(request.method).startsWith("eth_getBlockBy") || !answer.result) return undefined;
      return { result: { ...(answer.result as object), logsBloom: ones } };
    });
    // Plain transfers of the native coin, all in one block: transactions, no log of the token.
    const controls = proxy().chain;
    await controls.automine(false);
    const wallet = chain().wallets[0]!;
    const sent: Hex[] = [];
    for (let i = 0; i < 20; i++) sent.push(await wallet.sendTransaction({ to: buyer.address, value: parseEther("0.001") }));
    await controls.mine(1);
    await controls.automine(true);
    const receipt = await chain().publicClient.getTransactionReceipt({ hash: sent[0]! });
    requests.length = 0;
    const batches = proxy().batches.length;
    const answer = (await index.payer(buyer.address, nonce, 0))!;
    expect(answer.head.number).to.equal(receipt.blockNumber);
    expect(answer.used).to.equal(false);
    expect(hashReads(receipt.blockHash)).to.have.length(EMPTY_LOG_ASKS);
    const asked = requests.filter((r) => r.method === "eth_getTransactionReceipt").map((r) => (r.params as [Hex])[0]);
    expect([...asked].sort()).to.deep.equal([...sent].sort());
    expect(proxy().batches.slice(batches).filter((methods) => methods.includes("eth_getTransactionReceipt"))).to.deep.equal([sent.map(() => "eth_getTransactionReceipt")]);
    expect(index.status().state).to.equal("following");
  });

  it("a forged proof proves nothing: a receipt of another block, a range's header of another block, a log outside the range", async () => {
    // A block's receipt naming another block: the block is not applied.
    const index = open();
    await backfilled(index);
    const cut = cutLogsShort(proxy(), { lagBlocks: 60, batch: "split" });
    proxy().rewrite((request, answer) =>
      request.method === "eth_getTransactionReceipt" && answer.result ? { result: { ...(answer.result as object), blockHash: `0x${"ab".repeat(32)}` } } : undefined,
    );
    const nonce = freshNonce();
    const spentAt = await spend(nonce);
    expect(await index.payer(buyer.address, nonce, 0)).to.equal(undefined);
    expect(index.status()).to.deep.include({ state: "behind", block: Number(spentAt - 1n) });
    cut.end();
    proxy().clear();
    record();
    expect(await waitUntil(async () => (await index.payer(buyer.address, nonce, 0))?.used === true, 10_000, 20)).to.equal(true);
    await index.stop();

    // A range whose last header names another block, then a range answering a log of a block outside it: neither is stored.
    await ledger.close();
    ledger = openSqliteLedger({ location: MEMORY });
    let forge: "header" | "log" | undefined = "header";
    proxy().rewriteBatch((items, answers) => {
      const at = items.findIndex(isRangeRead);
      if (forge === undefined || at < 0 || answers[at]!.error) return undefined;
      if (forge === "header") return answers.map((answer, i) => (i === at - 1 && answer.result ? { result: { ...(answer.result as object), number: "0x1" } } : answer));
      const outside = { ...(answers[at]!.result as object[])[0], blockNumber: "0xffffff" };
      return answers.map((answer, i) => (i === at ? { result: [...(answer.result as object[]), outside] } : answer));
    });
    const second = open({ tailBlocks: 0 });
    // Two reads: the first one's answer was handled before the second was sent.
    expect(await waitUntil(async () => rangeReads().length >= 2, 10_000, 20)).to.equal(true);
    const opened = (await ledger.nonceIndexProgress(scope()))!;
    expect([second.status().backfill.state, opened.throughBlock]).to.deep.equal(["running", opened.fromBlock - 1n]);
    expect((await second.payer(buyer.address, nonce, 60_000))!.used).to.equal(undefined);
    forge = "log";
    const reads = rangeReads().length;
    expect(await waitUntil(async () => rangeReads().length >= reads + 2, 20_000, 20)).to.equal(true);
    expect((await ledger.nonceIndexProgress(scope()))!.throughBlock).to.equal(opened.fromBlock - 1n);
    forge = undefined;
    await backfilled(second);
    expect((await second.payer(buyer.address, nonce, 60_000))!.used).to.equal(true);
  });

  it("splits its ranges on a Cronos node's caps, in the node's words: the block distance straight to the cap, too many results halved; every nonce found", async () => {
    const nonces = [freshNonce(), freshNonce(), freshNonce(), freshNonce()];
    // Three spends in three blocks in a row (more than the 2 results a range may hold), one more 150 blocks on, then
    // more blocks than the first range asked.
    for (const nonce of nonces.slice(0, 3)) await spend(nonce);
    await chain().networkHelpers.mine(150);
    await spend(nonces[3]!);
    await chain().networkHelpers.mine(1_100);
    const capped = capLogs(proxy(), { blocks: 100, results: 2 });
    const index = open({ tailBlocks: 0, logRangeBlocks: 1_000, startBlock: 0n });
    await backfilled(index);
    expect(capped.refused.distance).to.be.at.least(1);
    expect(capped.refused.results).to.be.at.least(1);
    // The first range refused for its distance; the next one asked is the cap's width (to - from = 99 <= 100).
    const ranges = rangeReads().map((r) => [BigInt(filterOf(r).fromBlock!), BigInt(filterOf(r).toBlock!)] as const);
    expect(ranges[0]![1] - ranges[0]![0]).to.equal(999n);
    expect(ranges[1]).to.deep.equal([ranges[0]![0], ranges[0]![0] + 99n]);
    expect(capped.passed.every(([from, to]) => to - from <= 100n)).to.equal(true);
    // The ranges passed cover every block once, from the start block to the index's start.
    const sorted = [...capped.passed].sort((a, b) => (a[0] < b[0] ? -1 : 1));
    expect(sorted[0]![0]).to.equal(0n);
    for (let i = 1; i < sorted.length; i++) expect(sorted[i]![0]).to.equal(sorted[i - 1]![1] + 1n);
    expect(sorted[sorted.length - 1]![1]).to.equal(BigInt(index.status().backfill.targetBlock!));
    for (const nonce of nonces) expect((await index.payer(buyer.address, nonce, 60_000))!.used).to.equal(true);
    expect(await ledger.indexedNonces(scope(), { limit: 10 })).to.have.length(4);
  });

  it("reads a refusal by its words: the ethermint caps, the head, other providers' limits", () => {
    expect(logRefusal(new Error("maximum [from, to] blocks distance: 10000"))).to.deep.equal({ kind: "distance", blocks: 10_000n });
    expect(logRefusal(new Error("query returned more than 10000 results"))).to.deep.equal({ kind: "results" });
    expect(logRefusal(new Error("block range extends beyond current head block"))).to.deep.equal({ kind: "behind" });
    expect(logRefusal(new Error("Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range"))).to.deep.equal({ kind: "results" });
    expect(logRefusal(new Error("too many logs in the range"))).to.deep.equal({ kind: "results" });
    expect(logRefusal(new Error("block range is too wide (max 100)"))).to.deep.equal({ kind: "other" });
  });
});
