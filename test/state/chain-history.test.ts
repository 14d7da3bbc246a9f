import { expect } from "chai";
import { createPublicClient, http, numberToHex, toHex, type Address, type Hex, type PublicClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { MEMORY, openSqliteLedger } from "../../src/ledger/sqlite.js";
import type { Ledger } from "../../src/ledger/types.js";
import { paymentReads } from "../../src/settlement/payment-reads.js";
import { proveSettled } from "../../src/settlement/history-proof.js";
import { ChainHistory, HistoryCheckError } from "../../src/state/index.js";
import { HARDHAT_KEYS, useAuthorizationOnChain } from "../helpers/facilitator.js";
import { settledRecord } from "../helpers/ledger.js";
import { openProxiedChain, type ProxiedChain } from "../helpers/proxied-chain.js";
import { rejection } from "../helpers/reject.js";

const quiet = { info() {}, warn() {}, debug() {} };
const freshNonce = () => toHex(crypto.getRandomValues(new Uint8Array(32)));

describe("chain history: the ledger's rows bound to the chain's history, acting only on proof", function () {
  this.timeout(60_000);
  let proxied: ProxiedChain;
  let client: PublicClient;
  let ledger: Ledger;
  let history: ChainHistory;
  const buyer = privateKeyToAccount(HARDHAT_KEYS.buyer);
  const seller = privateKeyToAccount(HARDHAT_KEYS.seller);

  beforeEach(async () => {
    proxied = await openProxiedChain();
    client = createPublicClient({ transport: http(proxied.rpcUrls, { batch: { wait: 0 }, retryCount: 0 }), cacheTime: 0 }) as PublicClient;
    ledger = openSqliteLedger({ location: MEMORY });
    // The one payment decision over the same RPC decides which settled rows stay.
    const payments = paymentReads({ client, chainId: 338, logLookbackBlocks: 1_000 });
    history = new ChainHistory({
      network: "cronos-testnet",
      client,
      chainId: 338,
      token: proxied.chain.token,
      store: ledger,
      logger: quiet,
      prove: (row) => proveSettled(payments, row),
      checkIntervalMs: 0,
      confirmAfterMs: 20,
    });
  });
  afterEach(async () => {
    history.stop();
    await ledger.close();
    await proxied.close();
  });

  const chain = () => proxied.chain;
  const head = () => chain().publicClient.getBlockNumber({ cacheTime: 0 });
  const hashOf = async (blockNumber: bigint) => (await chain().publicClient.getBlock({ blockNumber })).hash;
  /** A settled row in the ledger: `txHash` mined in `blockNumber`, paying `value` to `payee`, as the ledger says. */
  async function settledRow(txHash: Hex, blockNumber: bigint, options: { nonce?: Hex; payee?: Address; value?: bigint } = {}) {
    const key = { chainId: 338, token: chain().token, authorizer: buyer.address, nonce: options.nonce ?? freshNonce() };
    return settledRecord(ledger, { key, payee: options.payee ?? seller.address, value: options.value ?? 1_000n, txHash, blockNumber, blockTimestamp: 1n });
  }
  /** Uses an authorization on chain (1,000 units to the seller): the receipt of a real payment. */
  async function realPayment(): Promise<{ nonce: Hex; hash: Hex; blockNumber: bigint }> {
    const nonce = freshNonce();
    await useAuthorizationOnChain(chain(), nonce);
    const block = await chain().publicClient.getBlock({ includeTransactions: false });
    return { nonce, hash: block.transactions[0]!, blockNumber: block.number };
  }

  it("binds a fresh ledger at first sight (genesis, the head as a checkpoint); the next check finds the same history and records the new head", async () => {
    await history.start();
    const first = await head();
    expect(await ledger.chainHistory(338)).to.deep.include({ chainId: 338, genesisHash: await hashOf(0n), epoch: 1 });
    await chain().networkHelpers.mine(2);
    await history.check();
    const { checkpoints, epoch } = (await ledger.chainHistory(338))!;
    expect(epoch).to.equal(1);
    expect(checkpoints.map((c) => [c.number, c.hash])).to.deep.equal([
      [first + 2n, await hashOf(first + 2n)],
      [first, await hashOf(first)],
    ]);
    expect(await ledger.setAsideRows()).to.deep.equal([]);
  });

  it("keeps a real payment settled after the newest checkpoint, and sets aside a settled row whose transaction the chain does not have", async () => {
    await history.start();
    const paid = await realPayment();
    const kept = await settledRow(paid.hash, paid.blockNumber, { nonce: paid.nonce });
    await history.check();
    expect((await ledger.getById(kept.id))?.status).to.equal("settled");
    // A row the chain cannot show (its transaction is not there): the block after the checkpoint was replaced.
    await chain().networkHelpers.mine();
    const ghost = await settledRow(`0x${"ab".repeat(32)}`, await head());
    await history.check();
    expect(await ledger.getById(ghost.id)).to.equal(undefined);
    expect((await ledger.setAsideRows({ chainId: 338 })).filter((r) => r.kind === "settlement").map((r) => r.row.id)).to.deep.equal([ghost.id]);
  });

  it("does not keep a row its receipt does not prove: a real transaction claimed as paying another payee, or under another nonce, is set aside", async () => {
    await history.start();
    const common = await head();
    const paid = await realPayment();
    const otherPayee = await settledRow(paid.hash, paid.blockNumber, { nonce: paid.nonce, payee: buyer.address });
    const otherNonce = await settledRow(paid.hash, paid.blockNumber);
    await history.diverged({ number: common, hash: await hashOf(common) });
    expect(await ledger.getById(otherPayee.id)).to.equal(undefined);
    expect(await ledger.getById(otherNonce.id)).to.equal(undefined);
    expect((await ledger.setAsideRows({ chainId: 338 })).filter((r) => r.kind === "settlement")).to.have.length(2);
  });

  it("a node behind the ledger's trail proves nothing: the rows of blocks beyond it stay", async () => {
    await history.start();
    await chain().networkHelpers.mine(3);
    await history.check();
    const tip = await head();
    const beyond = await settledRow(`0x${"cd".repeat(32)}`, tip);
    // The RPC answers an older head (a node behind a load balancer).
    const behind = await proxied.proxies[0]!.chain.call("eth_getBlockByNumber", [numberToHex(tip - 2n), false]);
    proxied.proxies[0]!.rewrite((request) => (request.method === "eth_getBlockByNumber" && (request.params as [string])[0] === "latest" ? { result: behind } : undefined));
    await history.check();
    expect((await ledger.getById(beyond.id))?.status).to.equal("settled");
    expect(await ledger.setAsideRows()).to.deep.equal([]);
    expect((await ledger.chainHistory(338))!.epoch).to.equal(1);
  });

  it("believes a replaced block only when the RPC says so twice: one forged answer changes nothing", async () => {
    await history.start();
    const checkpoint = await head();
    await chain().networkHelpers.mine();
    const row = await settledRow(`0x${"ef".repeat(32)}`, checkpoint + 5n);
    // The newest checkpoint is beyond the head once (a node behind), so every checkpoint is read; the first read of it is forged.
    let forged = 0;
    proxied.proxies[0]!.rewrite((request, answer) => {
      if (request.method !== "eth_getBlockByNumber" || (request.params as [string])[0] !== numberToHex(checkpoint) || forged > 0) return undefined;
      forged++;
      return { result: { ...(answer.result as object), hash: `0x${"99".repeat(32)}` } };
    });
    await ledger.recordCheckpoint(338, { number: checkpoint + 100n, hash: `0x${"77".repeat(32)}` });
    await history.check();
    expect(forged).to.equal(1);
    expect((await ledger.getById(row.id))?.status).to.equal("settled");
    expect(await ledger.setAsideRows()).to.deep.equal([]);
  });

  it("changes nothing when the RPC fails during a check (the check says why; the next one tries again)", async () => {
    await history.start();
    await chain().networkHelpers.mine();
    const row = await settledRow(`0x${"12".repeat(32)}`, await head());
    proxied.proxies[0]!.fail({ kind: "http503", method: "eth_getTransactionReceipt" });
    const error = await rejection(history.check(), HistoryCheckError);
    expect((error as Error).message).to.match(/cannot read the receipt of 0x1212/);
    expect((await ledger.getById(row.id))?.status).to.equal("settled");
    proxied.proxies[0]!.clear();
    await history.check();
    expect(await ledger.getById(row.id)).to.equal(undefined);
  });

  it("serves one check at a time: checks asked while one runs share the next", async () => {
    await history.start();
    let heads = 0;
    proxied.proxies[0]!.rewrite((request) => void (request.method === "eth_getBlockByNumber" && (request.params as [string])[0] === "latest" && heads++));
    await Promise.all(Array.from({ length: 50 }, () => history.check()));
    expect(heads).to.equal(1);
  });

});
