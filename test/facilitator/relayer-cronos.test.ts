import { expect } from "chai";
import hre from "hardhat";
import { createPublicClient, keccak256, numberToHex, parseEther, parseTransaction, type Hex, type PublicClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { FeeCapError, Relayer, RelaySendError, type RelayerEvent, type RelayHooks, type SentTransaction } from "../../src/chain/relayer/index.js";
import { rpcTransport, type RpcTransport } from "../../src/chain/rpc-transport.js";
import { startLocalChain, type LocalChain } from "../../src/harness/chain.js";
import type { CronosNode, CronosNodeOptions } from "../../src/harness/cronos-node/node.js";
import { localAccount } from "../../src/harness/accounts.js";
import { HARDHAT_KEYS } from "../helpers/facilitator.js";
import { startFaultProxy, type FaultProxy } from "../helpers/rpc-proxy.js";
import { waitUntil } from "../helpers/wait.js";
import { rejection } from "../helpers/reject.js";

// The relayer against the harness's Cronos node (src/harness/cronos-node/: strict nonces, its replacement rule,
// its texts, its minimum fee, a lagging backend, a lost pool), on a local chain 338, reached through a plain
// forwarding proxy that records what went out (and can lose a send on the way, or answer for the node once).
// Each test reads what reached the node (the proxy's broadcasts, in arrival order), what the node refused (its
// record), and what it holds or mined.

const KEY = HARDHAT_KEYS.relayer;
const RELAYER = privateKeyToAccount(KEY).address;
const SELLER = privateKeyToAccount(HARDHAT_KEYS.seller).address;
const TRANSFER = { to: SELLER, data: "0x" as Hex, gas: 21_000n };

describe("relayer on a Cronos node: refusals read from the one table, nonces kept in order", function () {
  this.timeout(60_000);
  let chain: LocalChain;
  let node: CronosNode;
  let proxy: FaultProxy;
  let rpc: RpcTransport;
  let client: PublicClient;
  let events: RelayerEvent[];
  let relayer: Relayer;

  /** A fresh chain whose node admits with `cronos` settings, the proxy in front of its JSON-RPC, and a relayer on it. */
  async function open(cronos?: CronosNodeOptions): Promise<void> {
    chain = await startLocalChain({ hre, port: 0, network: "cronos-testnet", buyers: 0, ...(cronos ? { cronos } : {}) });
    node = chain.cronosNode!;
    proxy = await startFaultProxy(chain.rpcUrl);
    rpc = rpcTransport({ urls: [proxy.url], timeoutMs: 5_000, rankIntervalMs: 60_000, chainId: 338 });
    client = createPublicClient({ transport: rpc.transport, cacheTime: 0 }) as PublicClient;
    relayer = new Relayer({ client, chainId: 338, privateKeys: [KEY], pollingIntervalMs: 50, replaceAfterSeconds: 3, onEvent: (event) => events.push(event) });
  }
  beforeEach(() => {
    events = [];
  });
  afterEach(async () => {
    await relayer?.stop();
    rpc?.close();
    await proxy?.close();
    await chain?.stop();
  });

  /** EDR's own controls (past the node, as the harness's are): blocks, the next base fee, the pool, chain time. */
  const edr = (method: string, params: unknown[] = []) => chain.provider.request({ method, params });
  const automine = (on: boolean) => edr("evm_setAutomine", [on]);
  const mine = () => edr("evm_mine");
  const setNextBlockBaseFee = (wei: bigint) => edr("hardhat_setNextBlockBaseFeePerGas", [numberToHex(wei)]);
  /** Chain time `seconds` on, in an empty block (what waits in the pool stays there unless it is priced for it). */
  const later = async (seconds: number) => {
    await edr("evm_increaseTime", [seconds]);
    await mine();
  };
  /** A block that uses more than half its gas limit (transactions of #10 to INVALID, which spends all their gas at once), mined now; blocks then stay stopped. */
  const fillBlock = async () => {
    const looper = "0x000000000000000000000000000000000000100f";
    await edr("hardhat_setCode", [looper, "0xfe"]);
    const { gasLimit } = (await edr("eth_getBlockByNumber", ["latest", false])) as { gasLimit: Hex };
    const from = privateKeyToAccount(localAccount(10).privateKey).address;
    // A transaction may use at most 2^24 gas: as many as it takes to pass half the block's limit.
    const each = 16_000_000n;
    await automine(false);
    for (let used = 0n; used * 2n <= BigInt(gasLimit); used += each) await edr("eth_sendTransaction", [{ from, to: looper, gas: numberToHex(each) }]);
    await mine();
    const full = (await edr("eth_getBlockByNumber", ["latest", false])) as { gasUsed: Hex; gasLimit: Hex };
    expect(BigInt(full.gasUsed) * 2n > BigInt(full.gasLimit)).to.equal(true);
  };
  const pool = async () => ((await edr("eth_pendingTransactions")) as Array<{ hash: Hex }>).map((tx) => tx.hash);
  /** The node's refusals so far, as it answered them. */
  const refusals = () => node.refusals().recent.map((refusal) => refusal.message);
  const direct = () => chain.publicClient;
  const count = (tag: "latest" | "pending") => direct().getTransactionCount({ address: RELAYER, blockTag: tag });
  /** The nonces of the transactions that reached the proxy, in arrival order (repeats included). */
  const sentNonces = () => proxy.broadcasts.map((raw) => parseTransaction(raw).nonce);
  const kinds = (kind: RelayerEvent["kind"]) => events.filter((event) => event.kind === kind);
  const send = (hooks?: RelayHooks, deadline?: number) => relayer.send(TRANSFER, RELAYER, hooks, deadline);

  it("concurrent sends reach the node in nonce order: none refused for a gap", async () => {
    await open();
    await automine(false);
    const sent = await Promise.all(Array.from({ length: 12 }, () => send()));
    expect(sent.map((tx) => tx.nonce)).to.deep.equal([...Array(12).keys()]);
    expect(sentNonces()).to.deep.equal([...Array(12).keys()]);
    expect(refusals()).to.deep.equal([]);
    expect(await count("pending")).to.equal(12);
    await mine();
    expect(await count("latest")).to.equal(12);
  });

  it("a send that never reached the node (no answer): the next one, refused for the gap, sends it first, then itself, in nonce order", async () => {
    await open();
    await automine(false);
    await send();
    proxy.fail({ kind: "reset", method: "eth_sendRawTransaction", times: 1 });
    const lost = await rejection(send(), RelaySendError);
    expect(lost).to.include({ maybeSent: true });
    const third = await send();
    expect(third.nonce).to.equal(2);
    expect(refusals()).to.deep.equal([`invalid nonce; got 2, expected 1: invalid sequence: invalid sequence`]);
    // Nonce 1 (the lost one) went out again before nonce 2 was tried again.
    expect(sentNonces()).to.deep.equal([0, 1, 2, 1, 2]);
    expect(kinds("refused")).to.deep.equal([{ kind: "refused", from: RELAYER, nonce: 2, hash: third.hash, refusal: "nonceAhead" }]);
    expect(kinds("rebroadcast").map((event) => (event as { nonce: number }).nonce)).to.deep.equal([1]);
    expect(await count("pending")).to.equal(3);
  });

  it("adopts the nonce the node expects when the key was used elsewhere: one refusal, sent there, no gap left", async () => {
    await open();
    await send();
    // Two transactions of the key signed elsewhere (EDR signing for the unlocked account), mined.
    for (let i = 0; i < 2; i++) await edr("eth_sendTransaction", [{ from: RELAYER, to: RELAYER, value: numberToHex(parseEther("0.001")) }]);
    const outcomes: Array<[number, string]> = [];
    const sent = await send({ afterBroadcast: (tx, outcome) => outcomes.push([tx.nonce, outcome]) });
    expect(sent.nonce).to.equal(3);
    expect(outcomes).to.deep.equal([
      [1, "refused"],
      [3, "accepted"],
    ]);
    expect(refusals()).to.deep.equal([`invalid nonce; got 1, expected 3: invalid sequence: invalid sequence`]);
    expect(kinds("nonceAdopted")).to.deep.equal([{ kind: "nonceAdopted", from: RELAYER, nonce: 1, expected: 3 }]);
    expect(await count("latest")).to.equal(4);
  });

  it("a lagging backend refuses a correct nonce while the previous transaction waits in a pool: tried again after a wait, taken once", async () => {
    await open();
    await automine(false);
    const first = await send();
    node.hold("lag", { lag: { blocks: 60, refusals: 1 } });
    const outcomes: string[] = [];
    const second = await send({ afterBroadcast: (_tx, outcome) => outcomes.push(outcome) });
    expect(second.nonce).to.equal(1);
    expect(refusals()).to.deep.equal([`invalid nonce; got 1, expected 0: invalid sequence: invalid sequence`]);
    // The very same signed transaction twice: refused, then taken; reported once, as taken.
    expect(proxy.broadcasts.slice(1).map((raw) => keccak256(raw))).to.deep.equal([second.hash, second.hash]);
    expect(outcomes).to.deep.equal(["accepted"]);
    expect(kinds("rebroadcast")).to.deep.equal([]);
    expect(await pool()).to.have.members([first.hash, second.hash]);
  });

  it("a backend that lags past the send's deadline: RelaySendError (nothing sent), and the nonce stays free for the next send", async () => {
    await open();
    await send();
    node.hold("lag", { lag: { blocks: 60, refusals: 1_000, sticky: true } });
    const outcomes: string[] = [];
    const error = await rejection(send({ afterBroadcast: (_tx, outcome) => outcomes.push(outcome) }, performance.now() + 400), RelaySendError);
    expect(error).to.include({ maybeSent: false });
    expect(outcomes).to.deep.equal(["refused"]);
    expect(relayer.status()[0]!.localNonce).to.equal(1);
    expect(await count("pending")).to.equal(1);
    node.release("lag");
    expect((await send()).nonce).to.equal(1);
    expect(await count("latest")).to.equal(2);
  });

  it("a node that lost its pool: a new send, refused for the gap, puts the key's transactions back in nonce order first", async () => {
    await open();
    await automine(false);
    const before: SentTransaction[] = [];
    for (let i = 0; i < 3; i++) before.push(await send());
    expect((await node.losePool()).length).to.equal(3);
    const fourth = await send();
    expect(fourth.nonce).to.equal(3);
    expect(sentNonces()).to.deep.equal([0, 1, 2, 3, 0, 1, 2, 3]);
    expect(kinds("dropped").map((event) => (event as { nonce: number }).nonce)).to.deep.equal([0, 1, 2]);
    expect(await pool()).to.have.members([...before.map((tx) => tx.hash), fourth.hash]);
    await mine();
    expect(await count("latest")).to.equal(4);
  });

  it("a node that lost its pool, nothing new sent: the lifecycle puts the key's transactions back, in nonce order", async () => {
    await open();
    await automine(false);
    for (let i = 0; i < 3; i++) await send();
    expect(await node.losePool()).to.have.length(3);
    // Chain time passes (an empty block), past the replacement delay: the next round looks.
    await later(5);
    await relayer.tend();
    expect(sentNonces()).to.deep.equal([0, 1, 2, 0, 1, 2]);
    expect(refusals()).to.deep.equal([]);
    expect(kinds("rebroadcast").length).to.equal(3);
    await mine();
    expect(await count("latest")).to.equal(3);
  });

  for (const [mode, bump, refusal, text] of [
    ["disabled", false, "nonceBehind", /^invalid nonce; got 0, expected 1: invalid sequence: invalid sequence$/],
    ["asking a 50 % bump", 50, "replacementRefused", /^tx doesn't fit the replacement rule, oldPriority: \d+, newPriority: \d+, /],
  ] as const) {
    it(`replacement ${mode}: the stuck transaction keeps its original, broadcast again (tx already in mempool: known), mined once fees fall`, async () => {
      // Off: the node's `cronos.disable-tx-replacement` (the no-replacement fault); else its `mempool.feebump`.
      await open(bump === false ? undefined : { feeBump: bump });
      if (bump === false) node.hold("off", { replacement: false });
      // Sent after a block over its gas target, the transaction tips what the node suggests (an eighth of the base fee).
      await fillBlock();
      await automine(false);
      const sent = await send();
      const priced = await direct().getTransaction({ hash: sent.hash });
      expect(priced.maxPriorityFeePerGas! > 0n).to.equal(true);
      // The next block asks a little more than its fee cap: it stays. The replacement tips the node's new
      // suggestion, under 1.5 × the old tip.
      await setNextBlockBaseFee((priced.maxFeePerGas! * 105n) / 100n);
      await later(5);
      await relayer.tend();
      // (A replacement priced from a quote older than the spiked block is refused for its fee first, and re-priced.)
      const answers = node.refusals().recent.filter((answer) => answer.kind !== "base-fee").map((answer) => answer.message);
      expect(answers.length, JSON.stringify(refusals())).to.equal(2);
      expect(answers[0]).to.match(text);
      expect(answers[1]).to.equal("tx already in mempool");
      expect(kinds("refused").map((event) => (event as { refusal: string }).refusal).filter((kind) => kind !== "feeTooLow")).to.deep.equal([refusal]);
      expect([kinds("replaced").length, kinds("dropped").length, kinds("rebroadcast").length]).to.deep.equal([0, 0, 0]);
      expect(sent.hashes()).to.deep.equal([sent.hash]);
      expect(sent.superseded).to.equal(false);
      await setNextBlockBaseFee(1n);
      await mine();
      expect((await direct().getTransactionReceipt({ hash: sent.hash })).status).to.equal("success");
    });
  }

  it("a fee under the chain's minimum gas price: re-priced to it within the cap, sent once at the same nonce", async () => {
    await open();
    const base = (await direct().getBlock()).baseFeePerGas!;
    node.hold("minimum", { minGasPrice: base * 5n });
    const versions: Array<[number, bigint, string]> = [];
    const sent = await send({ afterBroadcast: (tx, outcome) => versions.push([tx.nonce, tx.feeCap, outcome]) });
    expect(refusals()).to.have.length(1);
    expect(refusals()[0]).to.match(/^provided fee < minimum global fee \(\d+ < \d+\)\. Please increase the priority tip/);
    expect(versions.map(([nonce, , outcome]) => [nonce, outcome])).to.deep.equal([
      [0, "refused"],
      [0, "accepted"],
    ]);
    // What the node weighed against its minimum: min(fee cap, base fee + tip), at the base fee it admitted it under.
    const mined = await direct().getTransaction({ hash: sent.hash });
    expect([mined.nonce, mined.maxFeePerGas! >= base * 5n, base + mined.maxPriorityFeePerGas! >= base * 5n]).to.deep.equal([0, true, true]);
    expect(kinds("refused").map((event) => (event as { refusal: string }).refusal)).to.deep.equal(["feeTooLow"]);
  });

  it("a minimum gas price above the fee cap: FeeCapError, nothing left in the key's sequence; the next send takes the same nonce", async () => {
    await open();
    const capped = new Relayer({ client, chainId: 338, privateKeys: [KEY], maxFeePerGasWei: parseEther("0.000001"), onEvent: (event) => events.push(event) });
    node.hold("minimum", { minGasPrice: parseEther("0.000002") });
    const outcomes: string[] = [];
    const error = await rejection(capped.send(TRANSFER, RELAYER, { afterBroadcast: (_tx, outcome) => outcomes.push(outcome) }), FeeCapError);
    expect(error).to.include({ capWei: parseEther("0.000001"), neededWei: parseEther("0.000002") });
    expect(outcomes).to.deep.equal(["refused"]);
    expect([capped.status()[0]!.localNonce, await count("pending")]).to.deep.equal([0, 0]);
    // Lifted: the next block's base fee is the minimum it was raised to, then falls back by itself, 12.5 % a block, until the cap takes it.
    node.release("minimum");
    await mine();
    const headBaseFee = async () => BigInt(((await edr("eth_getBlockByNumber", ["latest", false])) as { baseFeePerGas: Hex }).baseFeePerGas);
    for (let i = 0; i < 40 && (await headBaseFee()) * 2n > parseEther("0.000001"); i++) await mine();
    expect((await headBaseFee()) * 2n <= parseEther("0.000001")).to.equal(true);
    const again = await capped.send(TRANSFER, RELAYER).catch((e: unknown) => e);
    expect(again, JSON.stringify(refusals())).to.not.be.instanceOf(Error);
    expect((again as SentTransaction).nonce).to.equal(0);
    expect(await count("latest")).to.equal(1);
  });

  it("a refusal that no wait can change (the sender's funds): RelaySendError at once, nothing sent, the nonce stays free", async () => {
    await open();
    proxy.fail({ kind: "rpcError", method: "eth_sendRawTransaction", times: 1, error: { code: -32000, message: "sender balance < tx cost (1000 < 2100000000000000000): insufficient funds" } });
    const error = await rejection(send(), RelaySendError);
    expect(error).to.include({ maybeSent: false });
    expect(kinds("refused").map((event) => (event as { refusal: string }).refusal)).to.deep.equal(["fundsLow"]);
    expect((await send()).nonce).to.equal(0);
    expect(await waitUntil(async () => (await count("latest")) === 1, 5_000)).to.equal(true);
  });
});
