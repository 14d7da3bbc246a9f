import { expect } from "chai";
import { createPublicClient, keccak256, parseEther, parseTransaction, type Hex, type PublicClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { FeeCapError, Relayer, RelaySendError, type RelayerEvent, type RelayHooks, type SentTransaction } from "../../src/chain/relayer/index.js";
import { rpcTransport, type RpcTransport } from "../../src/chain/rpc-transport.js";
import { cronosFront, type CronosFront } from "../helpers/cronos-front.js";
import { HARDHAT_KEYS } from "../helpers/facilitator.js";
import { openProxiedChain, type ProxiedChain } from "../helpers/proxied-chain.js";
import type { FaultProxy } from "../helpers/rpc-proxy.js";
import { waitUntil } from "../helpers/wait.js";

// The relayer against a Cronos node's admission (strict nonces, its replacement rule, its texts, its minimum
// fee), put in front of the local EDR chain by an RPC proxy (test/helpers/cronos-front.ts). Each test reads
// what reached the node (the proxy's broadcasts, in arrival order) and what the node holds or mined.

const KEY = HARDHAT_KEYS.relayer;
const RELAYER = privateKeyToAccount(KEY).address;
const SELLER = privateKeyToAccount(HARDHAT_KEYS.seller).address;
const TRANSFER = { to: SELLER, data: "0x" as Hex, gas: 21_000n };

describe("relayer on a Cronos node: refusals read from the one table, nonces kept in order", function () {
  this.timeout(60_000);
  let proxied: ProxiedChain;
  let proxy: FaultProxy;
  let front: CronosFront;
  let rpc: RpcTransport;
  let client: PublicClient;
  let events: RelayerEvent[];
  let relayer: Relayer;

  beforeEach(async () => {
    proxied = await openProxiedChain(1);
    proxy = proxied.proxies[0]!;
    front = cronosFront(proxy);
    rpc = rpcTransport({ urls: [proxy.url], timeoutMs: 5_000, rankIntervalMs: 60_000, chainId: 338 });
    client = createPublicClient({ transport: rpc.transport, cacheTime: 0 }) as PublicClient;
    events = [];
    relayer = new Relayer({ client, chainId: 338, privateKeys: [KEY], pollingIntervalMs: 50, replaceAfterSeconds: 3, onEvent: (event) => events.push(event) });
  });
  afterEach(async () => {
    await relayer.stop();
    rpc.close();
    await proxy.chain.automine(true).catch(() => undefined);
    await proxied.close();
  });

  const direct = () => proxied.chain.publicClient;
  const count = (tag: "latest" | "pending") => direct().getTransactionCount({ address: RELAYER, blockTag: tag });
  /** The nonces of the transactions that reached the proxy, in arrival order (repeats included). */
  const sentNonces = () => proxy.broadcasts.map((raw) => parseTransaction(raw).nonce);
  const kinds = (kind: RelayerEvent["kind"]) => events.filter((event) => event.kind === kind);
  const send = (hooks?: RelayHooks, deadline?: number) => relayer.send(TRANSFER, RELAYER, hooks, deadline);

  it("concurrent sends reach the node in nonce order: none refused for a gap", async () => {
    await proxy.chain.automine(false);
    const sent = await Promise.all(Array.from({ length: 12 }, () => send()));
    expect(sent.map((tx) => tx.nonce)).to.deep.equal([...Array(12).keys()]);
    expect(sentNonces()).to.deep.equal([...Array(12).keys()]);
    expect(front.refusals).to.deep.equal([]);
    expect(await count("pending")).to.equal(12);
    await proxy.chain.mine();
    expect(await count("latest")).to.equal(12);
  });

  it("a send that never reached the node (no answer): the next one, refused for the gap, sends it first, then itself, in nonce order", async () => {
    await proxy.chain.automine(false);
    await send();
    proxy.fail({ kind: "reset", method: "eth_sendRawTransaction", times: 1 });
    const lost = await send().catch((error: unknown) => error);
    expect(lost).to.be.instanceOf(RelaySendError).and.include({ maybeSent: true });
    const third = await send();
    expect(third.nonce).to.equal(2);
    expect(front.refusals).to.deep.equal([`invalid nonce; got 2, expected 1: invalid sequence: invalid sequence`]);
    // Nonce 1 (the lost one) went out again before nonce 2 was tried again.
    expect(sentNonces()).to.deep.equal([0, 1, 2, 1, 2]);
    expect(kinds("refused")).to.deep.equal([{ kind: "refused", from: RELAYER, nonce: 2, hash: third.hash, refusal: "nonceAhead" }]);
    expect(kinds("rebroadcast").map((event) => (event as { nonce: number }).nonce)).to.deep.equal([1]);
    expect(await count("pending")).to.equal(3);
  });

  it("adopts the nonce the node expects when the key was used elsewhere: one refusal, sent there, no gap left", async () => {
    await send();
    const wallet = await proxied.chain.viem.getWalletClient(RELAYER);
    for (let i = 0; i < 2; i++) await wallet.sendTransaction({ to: RELAYER, value: parseEther("0.001") });
    const outcomes: Array<[number, string]> = [];
    const sent = await send({ afterBroadcast: (tx, outcome) => outcomes.push([tx.nonce, outcome]) });
    expect(sent.nonce).to.equal(3);
    expect(outcomes).to.deep.equal([
      [1, "refused"],
      [3, "accepted"],
    ]);
    expect(front.refusals).to.deep.equal([`invalid nonce; got 1, expected 3: invalid sequence: invalid sequence`]);
    expect(kinds("nonceAdopted")).to.deep.equal([{ kind: "nonceAdopted", from: RELAYER, nonce: 1, expected: 3 }]);
    expect(await count("latest")).to.equal(4);
  });

  it("a lagging backend refuses a correct nonce while the previous transaction waits in a pool: tried again after a wait, taken once", async () => {
    await proxy.chain.automine(false);
    const first = await send();
    front.lag(1);
    const outcomes: string[] = [];
    const second = await send({ afterBroadcast: (_tx, outcome) => outcomes.push(outcome) });
    expect(second.nonce).to.equal(1);
    expect(front.refusals).to.deep.equal([`invalid nonce; got 1, expected 0: invalid sequence: invalid sequence`]);
    // The very same signed transaction twice: refused, then taken; reported once, as taken.
    expect(proxy.broadcasts.slice(1).map((raw) => keccak256(raw))).to.deep.equal([second.hash, second.hash]);
    expect(outcomes).to.deep.equal(["accepted"]);
    expect(kinds("rebroadcast")).to.deep.equal([]);
    expect(await proxy.chain.pending()).to.have.members([first.hash, second.hash]);
  });

  it("a backend that lags past the send's deadline: RelaySendError (nothing sent), and the nonce stays free for the next send", async () => {
    await send();
    front.lag(1_000, { every: true });
    const outcomes: string[] = [];
    const error = await send({ afterBroadcast: (_tx, outcome) => outcomes.push(outcome) }, performance.now() + 400).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(RelaySendError).and.include({ maybeSent: false });
    expect(outcomes).to.deep.equal(["refused"]);
    expect(relayer.status()[0]!.localNonce).to.equal(1);
    expect(await count("pending")).to.equal(1);
    front.lag(0);
    expect((await send()).nonce).to.equal(1);
    expect(await count("latest")).to.equal(2);
  });

  it("a node that lost its pool: a new send, refused for the gap, puts the key's transactions back in nonce order first", async () => {
    await proxy.chain.automine(false);
    const before: SentTransaction[] = [];
    for (let i = 0; i < 3; i++) before.push(await send());
    expect(await front.losePool()).to.equal(3);
    const fourth = await send();
    expect(fourth.nonce).to.equal(3);
    expect(sentNonces()).to.deep.equal([0, 1, 2, 3, 0, 1, 2, 3]);
    expect(kinds("dropped").map((event) => (event as { nonce: number }).nonce)).to.deep.equal([0, 1, 2]);
    expect(await proxy.chain.pending()).to.have.members([...before.map((tx) => tx.hash), fourth.hash]);
    await proxy.chain.mine();
    expect(await count("latest")).to.equal(4);
  });

  it("a node that lost its pool, nothing new sent: the lifecycle puts the key's transactions back, in nonce order", async () => {
    await proxy.chain.automine(false);
    for (let i = 0; i < 3; i++) await send();
    await front.losePool();
    // Chain time passes (an empty block), past the replacement delay: the next round looks.
    await proxied.chain.networkHelpers.time.increase(5);
    await relayer.tend();
    expect(sentNonces()).to.deep.equal([0, 1, 2, 0, 1, 2]);
    expect(front.refusals).to.deep.equal([]);
    expect(kinds("rebroadcast").length).to.equal(3);
    await proxy.chain.mine();
    expect(await count("latest")).to.equal(3);
  });

  for (const [mode, bump, refusal, text] of [
    ["disabled", false, "nonceBehind", /^invalid nonce; got 0, expected 1: invalid sequence: invalid sequence$/],
    ["asking a 50 % bump", 50, "replacementRefused", /^tx doesn't fit the replacement rule, oldPriority: \d+, newPriority: \d+, /],
  ] as const) {
    it(`replacement ${mode}: the stuck transaction keeps its original, broadcast again (tx already in mempool: known), mined once fees fall`, async () => {
      front.replacement(bump);
      await proxy.chain.automine(false);
      const sent = await send();
      const priced = await direct().getTransaction({ hash: sent.hash });
      await proxy.chain.setNextBlockBaseFee(priced.maxFeePerGas! * 4n);
      await proxied.chain.networkHelpers.time.increase(5);
      await relayer.tend();
      expect(front.refusals.length).to.equal(2);
      expect(front.refusals[0]).to.match(text);
      expect(front.refusals[1]).to.equal("tx already in mempool");
      expect(kinds("refused").map((event) => (event as { refusal: string }).refusal)).to.deep.equal([refusal]);
      expect([kinds("replaced").length, kinds("dropped").length, kinds("rebroadcast").length]).to.deep.equal([0, 0, 0]);
      expect(sent.hashes()).to.deep.equal([sent.hash]);
      expect(sent.superseded).to.equal(false);
      await proxy.chain.setNextBlockBaseFee(1n);
      await proxy.chain.mine();
      expect((await direct().getTransactionReceipt({ hash: sent.hash })).status).to.equal("success");
    });
  }

  it("a fee under the chain's minimum gas price: re-priced to it within the cap, sent once at the same nonce", async () => {
    const base = (await direct().getBlock()).baseFeePerGas!;
    front.minGasPriceWei = base * 5n;
    const versions: Array<[number, bigint, string]> = [];
    const sent = await send({ afterBroadcast: (tx, outcome) => versions.push([tx.nonce, tx.feeCap, outcome]) });
    expect(front.refusals).to.have.length(1);
    expect(front.refusals[0]).to.match(/^provided fee < minimum global fee \(\d+\.0+ < \d+\.0+\)\. Please increase the priority tip/);
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
    const capped = new Relayer({ client, chainId: 338, privateKeys: [KEY], maxFeePerGasWei: parseEther("0.000001"), onEvent: (event) => events.push(event) });
    front.minGasPriceWei = parseEther("0.000002");
    const outcomes: string[] = [];
    const error = await capped.send(TRANSFER, RELAYER, { afterBroadcast: (_tx, outcome) => outcomes.push(outcome) }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(FeeCapError).and.include({ capWei: parseEther("0.000001"), neededWei: parseEther("0.000002") });
    expect(outcomes).to.deep.equal(["refused"]);
    expect([capped.status()[0]!.localNonce, await count("pending")]).to.deep.equal([0, 0]);
    front.minGasPriceWei = undefined;
    expect((await capped.send(TRANSFER, RELAYER)).nonce).to.equal(0);
    expect(await count("latest")).to.equal(1);
  });

  it("a refusal that no wait can change (the sender's funds): RelaySendError at once, nothing sent, the nonce stays free", async () => {
    proxy.fail({ kind: "rpcError", method: "eth_sendRawTransaction", times: 1, error: { code: -32000, message: "sender balance < tx cost (1000 < 2100000000000000000): insufficient funds" } });
    const error = await send().catch((e: unknown) => e);
    expect(error).to.be.instanceOf(RelaySendError).and.include({ maybeSent: false });
    expect(kinds("refused").map((event) => (event as { refusal: string }).refusal)).to.deep.equal(["fundsLow"]);
    expect((await send()).nonce).to.equal(0);
    expect(await waitUntil(async () => (await count("latest")) === 1, 5_000)).to.equal(true);
  });
});
