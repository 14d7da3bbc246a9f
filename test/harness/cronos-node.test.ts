import { expect } from "chai";
import hre from "hardhat";
import { keccak256, numberToHex, parseGwei, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { WebSocket } from "ws";
import { localAccount } from "../../src/harness/accounts.js";
import { startLocalChain, type LocalChain } from "../../src/harness/chain.js";
import { postJson } from "../helpers/http.js";
import { setAutomine } from "../helpers/mining.js";
import { rpc, type WireResponse } from "../helpers/rpc.js";

// The local chain in its default mode answers as a Cronos v1.7 node (docs/cronos-node.md), over HTTP and
// WebSocket; `node: "ethereum"` keeps EDR's own (geth's) answers. Senders are Hardhat's funded accounts
// #10 to #19, which nothing else on these chains uses.

const sender = (index: number) => privateKeyToAccount(localAccount(index).privateKey);
const GWEI = parseGwei("1");

/** A signed 21,000-gas transfer to itself of `index`'s account: tip 1 gwei, fee cap 3 gwei unless told. */
function transfer(index: number, nonce: number, fees: { tip?: bigint; cap?: bigint; chainId?: number } = {}): Promise<Hex> {
  return sender(index).signTransaction({
    chainId: fees.chainId ?? 338,
    type: "eip1559",
    to: sender(index).address,
    value: 1n,
    gas: 21_000n,
    nonce,
    maxPriorityFeePerGas: fees.tip ?? GWEI,
    maxFeePerGas: fees.cap ?? 3n * GWEI,
  });
}

/** The wire answer to one call (result or error), over HTTP. */
async function call(url: string, method: string, params: unknown[]): Promise<WireResponse> {
  return (await postJson(url, { jsonrpc: "2.0", id: 1, method, params })).json as WireResponse;
}

/** The JSON-RPC error of a send, or a failure naming the hash it was admitted with. */
async function refusal(url: string, raw: Hex): Promise<{ code: number; message: string }> {
  const answer = await call(url, "eth_sendRawTransaction", [raw]);
  if (!answer.error) expect.fail(`admitted as ${String(answer.result)}`);
  return { code: answer.error.code, message: answer.error.message };
}

const count = async (url: string, index: number, tag: string) => Number(BigInt(await rpc<Hex>(url, "eth_getTransactionCount", [sender(index).address, tag])));

describe("the local chain as a Cronos node (src/harness/cronos-node/)", function () {
  const started: LocalChain[] = [];
  const start = async (options: Partial<Parameters<typeof startLocalChain>[0]> = {}) => {
    const chain = await startLocalChain({ hre, port: 0, network: "cronos-testnet", buyers: 0, ...options });
    started.push(chain);
    return chain;
  };
  /** Blocks stop (automine off): what is admitted waits in EDR's pool. */
  const hold = (chain: LocalChain) => setAutomine(chain.provider, false);
  const mine = (chain: LocalChain) => chain.provider.request({ method: "evm_mine", params: [] });
  afterEach(async () => {
    await Promise.all(started.splice(0).map((chain) => chain.stop()));
  });

  it("refuses a nonce gap with the node's invalid-nonce answer (-32000) and never queues it", async () => {
    const chain = await start();
    expect(chain.node).to.equal("cronos");
    const gap = await transfer(10, 1);
    expect(await refusal(chain.rpcUrl, gap)).to.deep.equal({ code: -32000, message: "invalid nonce; got 1, expected 0: invalid sequence: invalid sequence" });
    // The right nonce is mined; the refused one was never held anywhere: the sender stands at 1, not 2.
    const first = await transfer(10, 0);
    expect(await rpc(chain.rpcUrl, "eth_sendRawTransaction", [first])).to.equal(keccak256(first));
    expect(await count(chain.rpcUrl, 10, "latest")).to.equal(1);
    expect(await chain.provider.request({ method: "eth_pendingTransactions", params: [] })).to.deep.equal([]);
    expect(await call(chain.rpcUrl, "eth_getTransactionReceipt", [keccak256(gap)])).to.deep.include({ result: null });
    // A nonce already used is the same answer, expecting the next one.
    expect((await refusal(chain.rpcUrl, await transfer(10, 0, { tip: 2n * GWEI }))).message).to.equal("invalid nonce; got 0, expected 1: invalid sequence: invalid sequence");
  });

  it("answers an identical re-send `tx already in mempool`, in the pool and after it was mined", async () => {
    const chain = await start();
    await hold(chain);
    const raw = await transfer(11, 0);
    await rpc(chain.rpcUrl, "eth_sendRawTransaction", [raw]);
    expect(await refusal(chain.rpcUrl, raw)).to.deep.equal({ code: -32000, message: "tx already in mempool" });
    await mine(chain);
    expect(await count(chain.rpcUrl, 11, "latest")).to.equal(1);
    // CometBFT's cache still holds the hash of a mined transaction.
    expect(await refusal(chain.rpcUrl, raw)).to.deep.equal({ code: -32000, message: "tx already in mempool" });
  });

  it("holds a replacement to the fee bump on priority (effective tip / 10^6), and puts an accepted one in place of the old", async () => {
    const chain = await start();
    await hold(chain);
    const old = await transfer(12, 0);
    await rpc(chain.rpcUrl, "eth_sendRawTransaction", [old]);
    // +5 % on both fees: priority 1050 < 1000 × 110 / 100.
    const under = await transfer(12, 0, { tip: (GWEI * 105n) / 100n, cap: (3n * GWEI * 105n) / 100n });
    expect(await refusal(chain.rpcUrl, under)).to.deep.equal({
      code: -32000,
      message: `tx doesn't fit the replacement rule, oldPriority: 1000, newPriority: 1050, oldTx: ${keccak256(old)}, newTx: ${keccak256(under)}`,
    });
    // +10 % on the tip alone is enough for Cronos (EDR alone asks +10 % on the fee cap too).
    const bumped = await transfer(12, 0, { tip: (GWEI * 110n) / 100n });
    expect(await rpc(chain.rpcUrl, "eth_sendRawTransaction", [bumped])).to.equal(keccak256(bumped));
    await mine(chain);
    expect(await rpc(chain.rpcUrl, "eth_getTransactionReceipt", [keccak256(bumped)])).to.include({ status: "0x1" });
    expect(await rpc(chain.rpcUrl, "eth_getTransactionReceipt", [keccak256(old)])).to.equal(null);
  });

  it("with replacement off, answers a same-nonce transaction as a wrong nonce; with a fee bump of 0, an equal priority replaces", async () => {
    const chain = await start({ cronos: { feeBump: 0 } });
    await hold(chain);
    await rpc(chain.rpcUrl, "eth_sendRawTransaction", [await transfer(13, 0)]);
    const equal = await transfer(13, 0, { cap: 4n * GWEI });
    chain.cronosNode!.hold("off", { replacement: false });
    expect(await refusal(chain.rpcUrl, equal)).to.deep.equal({ code: -32000, message: "invalid nonce; got 0, expected 1: invalid sequence: invalid sequence" });
    chain.cronosNode!.release("off");
    expect(await rpc(chain.rpcUrl, "eth_sendRawTransaction", [equal])).to.equal(keccak256(equal));
  });

  it("refuses a fee under the minimum global fee and a fee cap under the block's base fee (insufficient fee)", async () => {
    const chain = await start({ cronos: { minGasPrice: 5n * GWEI } });
    // 3 gwei × 21,000 gas against 5 gwei × 21,000.
    expect(await refusal(chain.rpcUrl, await transfer(14, 0))).to.deep.equal({
      code: -32000,
      message:
        "provided fee < minimum global fee (63000000000000 < 105000000000000). Please increase the priority tip (for EIP-1559 txs) or the gas prices (for access list or legacy txs): insufficient fee",
    });
    // The chain's next base fee is held at the minimum, and eth_gasPrice suggests no less.
    expect(BigInt(await rpc<Hex>(chain.rpcUrl, "eth_gasPrice")) >= 5n * GWEI, "eth_gasPrice at least the minimum").to.equal(true);
    const paid = await transfer(14, 0, { cap: 6n * GWEI });
    await rpc(chain.rpcUrl, "eth_sendRawTransaction", [paid]);
    const block = await rpc<{ baseFeePerGas: Hex }>(chain.rpcUrl, "eth_getBlockByNumber", ["latest", false]);
    expect(BigInt(block.baseFeePerGas)).to.equal(5n * GWEI);
    const plain = await start({ network: "cronos-mainnet" });
    const base = BigInt((await rpc<{ baseFeePerGas: Hex }>(plain.rpcUrl, "eth_getBlockByNumber", ["latest", false])).baseFeePerGas);
    expect(await refusal(plain.rpcUrl, await transfer(14, 0, { chainId: 25, tip: 1n, cap: 1n }))).to.deep.equal({
      code: -32000,
      message: `max fee per gas less than block base fee (1 < ${base}): insufficient fee`,
    });
    // A legacy transaction's fee cap is its gas price.
    const legacy = await sender(14).signTransaction({ chainId: 25, type: "legacy", to: sender(14).address, gas: 21_000n, nonce: 0, gasPrice: 2n });
    expect((await refusal(plain.rpcUrl, legacy)).message).to.equal(`max fee per gas less than block base fee (2 < ${base}): insufficient fee`);
  });

  it("refuses an eth_getLogs [from, to] distance over 10,000 blocks, answers one of 10,000, and [] from above the head", async () => {
    const chain = await start({ buyers: 1 });
    const head = BigInt(await rpc<Hex>(chain.rpcUrl, "eth_blockNumber"));
    const wide = await call(chain.rpcUrl, "eth_getLogs", [{ fromBlock: numberToHex(head - 10_001n), toBlock: numberToHex(head) }]);
    expect(wide.error).to.deep.equal({ code: -32000, message: "maximum [from, to] blocks distance: 10000" });
    const widest = await rpc<Array<{ address: string }>>(chain.rpcUrl, "eth_getLogs", [{ fromBlock: numberToHex(head - 10_000n), toBlock: "latest", address: chain.token }]);
    // The token's set-up and the buyer's funding are in the last blocks: the widest range holds their logs.
    expect(widest.length).to.be.greaterThan(0);
    expect(await rpc(chain.rpcUrl, "eth_getLogs", [{ fromBlock: numberToHex(head + 1n), toBlock: numberToHex(head + 5n) }])).to.deep.equal([]);
    // `to` above the head reads up to the head.
    const recent = { fromBlock: numberToHex(head - 100n), address: chain.token };
    expect(await rpc(chain.rpcUrl, "eth_getLogs", [{ ...recent, toBlock: numberToHex(head + 100n) }])).to.deep.equal(await rpc(chain.rpcUrl, "eth_getLogs", [{ ...recent, toBlock: "latest" }]));
  });

  it("refuses an eth_getLogs matching more than 10,000 logs (range or blockHash form), answers 10,000", async () => {
    const chain = await start();
    // Two contracts whose code emits LOG0 10,001 and 10,000 times in a loop: PUSH2 n, JUMPDEST, DUP1 ISZERO
    // PUSH1 end JUMPI, PUSH1 0 PUSH1 0 LOG0, PUSH1 1 SWAP1 SUB, PUSH1 3 JUMP, JUMPDEST STOP.
    const emitter = (count: number) => `0x61${count.toString(16).padStart(4, "0")}5b801560155760006000a0600190036003565b00` as Hex;
    const logs = async (address: Hex, count: number) => {
      await chain.provider.request({ method: "hardhat_setCode", params: [address, emitter(count)] });
      const raw = await sender(10).signTransaction({ chainId: 338, type: "eip1559", to: address, gas: 6_000_000n, nonce: await count10(), maxPriorityFeePerGas: GWEI, maxFeePerGas: 3n * GWEI });
      await rpc(chain.rpcUrl, "eth_sendRawTransaction", [raw]);
      return rpc<{ blockNumber: Hex; blockHash: Hex }>(chain.rpcUrl, "eth_getTransactionReceipt", [keccak256(raw)]);
    };
    const count10 = () => count(chain.rpcUrl, 10, "latest");
    const over = await logs("0x00000000000000000000000000000000000e7171", 10_001);
    for (const filter of [{ fromBlock: over.blockNumber, toBlock: over.blockNumber }, { blockHash: over.blockHash }]) {
      expect((await call(chain.rpcUrl, "eth_getLogs", [filter])).error).to.deep.equal({ code: -32000, message: "query returned more than 10000 results" });
    }
    const at = await logs("0x00000000000000000000000000000000000e7170", 10_000);
    expect(await rpc<unknown[]>(chain.rpcUrl, "eth_getLogs", [{ blockHash: at.blockHash }])).to.have.length(10_000);
  });

  it("reads finalized, safe and pending as latest: no pending block while a transaction waits", async () => {
    const chain = await start();
    await hold(chain);
    await rpc(chain.rpcUrl, "eth_sendRawTransaction", [await transfer(15, 0)]);
    const latest = await rpc<{ hash: Hex; transactions: Hex[] }>(chain.rpcUrl, "eth_getBlockByNumber", ["latest", false]);
    for (const tag of ["finalized", "safe", "pending"]) {
      expect((await rpc<{ hash: Hex }>(chain.rpcUrl, "eth_getBlockByNumber", [tag, false])).hash, tag).to.equal(latest.hash);
    }
    // EDR itself would build a pending block holding it.
    expect(((await chain.provider.request({ method: "eth_getBlockByNumber", params: ["pending", false] })) as { transactions: Hex[] }).transactions).to.have.length(1);
    // EDR's pending state has spent what the waiting transaction spends; the node's "pending" is latest.
    const balance = (tag: string) => rpc<Hex>(chain.rpcUrl, "eth_getBalance", [sender(15).address, tag]);
    expect(await chain.provider.request({ method: "eth_getBalance", params: [sender(15).address, "pending"] })).to.not.equal(await balance("latest"));
    expect(await balance("pending")).to.equal(await balance("latest"));
  });

  it("counts pending among the pool's first 30 transactions only, and finds a pending transaction only there", async () => {
    const chain = await start();
    await hold(chain);
    for (let nonce = 0; nonce < 30; nonce++) await rpc(chain.rpcUrl, "eth_sendRawTransaction", [await transfer(16, nonce)]);
    const late = await transfer(17, 0);
    await rpc(chain.rpcUrl, "eth_sendRawTransaction", [late]);
    expect(await count(chain.rpcUrl, 16, "pending")).to.equal(30);
    // #17's transaction is 31st: pending counts committed only, and its hash is not found...
    expect(await count(chain.rpcUrl, 17, "pending")).to.equal(0);
    expect(await rpc(chain.rpcUrl, "eth_getTransactionByHash", [keccak256(late)])).to.equal(null);
    // ...yet the node's check state holds it: the next nonce it admits from #17 is 1.
    const next = await transfer(17, 1);
    expect(await rpc(chain.rpcUrl, "eth_sendRawTransaction", [next])).to.equal(keccak256(next));
    const first = await rpc<{ hash: Hex; blockNumber: null }>(chain.rpcUrl, "eth_getTransactionByHash", [keccak256(await transfer(16, 0))]);
    expect(first).to.include({ hash: keccak256(await transfer(16, 0)), blockNumber: null });
    await mine(chain);
    expect(await count(chain.rpcUrl, 17, "pending")).to.equal(2);
    expect(await rpc<{ blockNumber: Hex }>(chain.rpcUrl, "eth_getTransactionByHash", [keccak256(late)])).to.have.property("blockNumber").that.is.a("string");
  });

  it("answers the same over WebSocket", async () => {
    const chain = await start();
    const ws = new WebSocket(chain.wsUrl);
    try {
      await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
      const answer = new Promise<WireResponse>((resolve) => ws.once("message", (data) => resolve(JSON.parse(String(data)) as WireResponse)));
      ws.send(JSON.stringify({ jsonrpc: "2.0", id: 7, method: "eth_sendRawTransaction", params: [await transfer(18, 2)] }));
      expect(await answer).to.deep.equal({ jsonrpc: "2.0", id: 7, error: { code: -32000, message: "invalid nonce; got 2, expected 0: invalid sequence: invalid sequence" } });
    } finally {
      ws.close();
    }
  });

  it("bounds its pool (`mempool is full`) and answers what it cannot read as EDR does, recording nothing", async () => {
    const chain = await start({ cronos: { mempoolSize: 2 } });
    await hold(chain);
    await rpc(chain.rpcUrl, "eth_sendRawTransaction", [await transfer(19, 0)]);
    await rpc(chain.rpcUrl, "eth_sendRawTransaction", [await transfer(19, 1)]);
    expect(await refusal(chain.rpcUrl, await transfer(19, 2))).to.deep.equal({ code: -32000, message: "mempool is full" });
    // Mined, the pool has room again.
    await mine(chain);
    expect(await rpc(chain.rpcUrl, "eth_sendRawTransaction", [await transfer(19, 2)])).to.equal(keccak256(await transfer(19, 2)));
    // A flood at once: the pool takes what it holds, every other send is refused at once.
    await mine(chain);
    const flood = await Promise.all([10, 11, 12, 13, 14, 15, 16, 17].map((index) => transfer(index, 0)));
    const answers = await Promise.all(flood.map((raw) => call(chain.rpcUrl, "eth_sendRawTransaction", [raw])));
    expect(answers.filter((answer) => answer.result !== undefined)).to.have.length(2);
    expect(answers.filter((answer) => answer.error?.message === "mempool is full")).to.have.length(6);
    expect(await chain.provider.request({ method: "eth_pendingTransactions", params: [] })).to.have.length(2);
    await mine(chain);
    // Not a transaction, a signature for another chain: EDR's own refusals, the pool unchanged.
    expect((await refusal(chain.rpcUrl, "0x1234")).message).to.not.match(/invalid nonce|mempool/);
    expect((await refusal(chain.rpcUrl, await transfer(19, 3, { chainId: 25 }))).message).to.not.match(/invalid nonce|mempool/);
    expect(await count(chain.rpcUrl, 19, "pending")).to.equal(3);
    expect(await chain.provider.request({ method: "eth_pendingTransactions", params: [] })).to.deep.equal([]);
  });

  it("with node: ethereum keeps EDR's own answers: a gap queued, `Known transaction`, `Replacement transaction underpriced`", async () => {
    const chain = await start({ node: "ethereum" });
    expect([chain.node, chain.cronosNode]).to.deep.equal(["ethereum", undefined]);
    await hold(chain);
    const gap = await transfer(10, 1);
    expect(await rpc(chain.rpcUrl, "eth_sendRawTransaction", [gap])).to.equal(keccak256(gap));
    const first = await transfer(10, 0);
    await rpc(chain.rpcUrl, "eth_sendRawTransaction", [first]);
    expect((await refusal(chain.rpcUrl, first)).message).to.equal(`Known transaction: ${keccak256(first)}`);
    expect((await refusal(chain.rpcUrl, await transfer(10, 0, { tip: (GWEI * 105n) / 100n, cap: (3n * GWEI * 105n) / 100n }))).message).to.match(/^Replacement transaction underpriced/);
    await mine(chain);
    // The queued gap was mined behind its filler.
    expect(await count(chain.rpcUrl, 10, "latest")).to.equal(2);
    const head = BigInt(await rpc<Hex>(chain.rpcUrl, "eth_blockNumber"));
    expect(await rpc(chain.rpcUrl, "eth_getLogs", [{ fromBlock: numberToHex(head - 10_001n), toBlock: numberToHex(head), address: chain.token }])).to.be.an("array");
  });
});
