import { expect } from "chai";
import { createPublicClient, decodeFunctionData, http, numberToHex, parseAbi, toHex, webSocket, type Address, type Hex, type PublicClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { MEMORY, openSqliteLedger } from "../../src/ledger/sqlite.js";
import type { Ledger } from "../../src/ledger/types.js";
import { TokenIndex, type TokenIndexParameters } from "../../src/state/index.js";
import { TRAIL_BLOCKS } from "../../src/state/token-index-follower.js";
import { HARDHAT_KEYS, makePayment, useAuthorizationOnChain } from "../helpers/facilitator.js";
import { openProxiedChain, type ProxiedChain } from "../helpers/proxied-chain.js";
import type { JsonRpcRequest } from "../helpers/rpc-proxy.js";
import { signCancelAuthorization } from "../helpers/sign.js";
import { waitUntil } from "../helpers/wait.js";
import { postgresBackend, TestClock } from "../helpers/ledger.js";

const quiet = { info() {}, warn() {}, debug() {} };
const freshNonce = () => toHex(crypto.getRandomValues(new Uint8Array(32)));
const authorizationState = parseAbi(["function authorizationState(address authorizer, bytes32 nonce) view returns (bool)"]);

/** How many `authorizationState` calls the proxy saw (in `eth_call`s). */
function authorizationStateCalls(requests: readonly JsonRpcRequest[]): number {
  return requests.filter((request) => {
    if (request.method !== "eth_call") return false;
    const data = (request.params as [{ data?: Hex; input?: Hex }])[0];
    try {
      return decodeFunctionData({ abi: authorizationState, data: (data.data ?? data.input)! }).functionName === "authorizationState";
    } catch {
      return false;
    }
  }).length;
}

describe("token state index: verify's state from the token's logs", function () {
  this.timeout(60_000);
  let proxied: ProxiedChain;
  let client: PublicClient;
  let ledger: Ledger;
  const indexes: TokenIndex[] = [];
  const requests: JsonRpcRequest[] = [];
  const buyer = privateKeyToAccount(HARDHAT_KEYS.buyer);
  const seller = privateKeyToAccount(HARDHAT_KEYS.seller);

  beforeEach(async () => {
    proxied = await openProxiedChain();
    client = createPublicClient({ transport: http(proxied.rpcUrls, { batch: { wait: 0 } }), cacheTime: 0 }) as PublicClient;
    ledger = openSqliteLedger({ location: MEMORY });
    requests.length = 0;
    proxied.proxies[0]!.rewrite((request) => {
      requests.push(request);
      return undefined;
    });
  });
  afterEach(async () => {
    await Promise.all(indexes.splice(0).map((index) => index.stop()));
    await ledger.close();
    await proxied.close();
  });

  const chain = () => proxied.chain;
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
      ...overrides,
    });
    indexes.push(index);
    index.start();
    return index;
  };
  const backfilled = async (index: TokenIndex) => {
    expect(await waitUntil(async () => index.status().backfill.state === "done", 10_000, 10), JSON.stringify(index.status())).to.equal(true);
  };
  /** Refuses the backfill's ranges of logs (a provider's cap) until `end`: with no tail read block by block (`tailBlocks: 0`), the backfill cannot finish meanwhile. */
  const refuseBackfill = () => {
    let refuse = true;
    proxied.proxies[0]!.rewrite((request) =>
      refuse && request.method === "eth_getLogs" && (request.params as [{ blockHash?: Hex }])[0].blockHash === undefined
        ? { error: { code: -32005, message: "query returned more than 10000 results" } }
        : undefined,
    );
    return { end: () => void (refuse = false) };
  };
  /** A backfilled index whose history changes are recorded, and the chain's controls (snapshots, reverts). */
  const watched = async () => {
    const changes: string[] = [];
    const index = open({ observe: { historyChange: (kind) => changes.push(kind) } });
    await backfilled(index);
    return { index, changes, controls: proxied.proxies[0]!.chain };
  };
  const head = () => chain().publicClient.getBlockNumber({ cacheTime: 0 });
  const balance = (address: Address) => chain().contract.read.balanceOf([address]);
  /** Uses an authorization of the buyer on chain (the relayer of these tests is the chain's deployer). */
  const useAuthorization = (nonce: Hex) => useAuthorizationOnChain(chain(), nonce);
  const cancelAuthorization = async (nonce: Hex) => {
    const { info, token } = chain();
    const domain = { name: info.domain.name, version: info.domain.version, chainId: info.chainId, verifyingContract: token };
    const { v, r, s } = await signCancelAuthorization({ account: buyer, domain, message: { authorizer: buyer.address, nonce } });
    await chain().contract.write.cancelAuthorization([buyer.address, nonce, v, r, s]);
  };

  it("answers a payer's balance and a fresh nonce from memory: after the first read of the payer, no RPC call at all", async () => {
    const index = open();
    await backfilled(index);
    const first = await index.payer(buyer.address, freshNonce(), 60_000);
    expect(first).to.deep.include({ balance: await balance(buyer.address), used: false });
    expect(first!.head.number).to.equal(await head());
    requests.length = 0;
    const second = await index.payer(buyer.address, freshNonce(), 60_000);
    expect(second).to.deep.equal(first);
    expect(requests).to.deep.equal([]);
    expect(index.status()).to.deep.include({ state: "following", payers: 1, mode: "poll", paused: false });
  });

  it("keeps a held balance current from Transfer logs: drained by a plain transfer, the next ask (head confirmed afresh) says so at that block", async () => {
    const index = open();
    await backfilled(index);
    const before = (await index.payer(buyer.address, freshNonce(), 60_000))!;
    const buyerWallet = chain().wallets.find((wallet) => wallet.account.address.toLowerCase() === buyer.address.toLowerCase())!;
    await chain().viem.getContractAt("BridgedUSDC", chain().token, { client: { wallet: buyerWallet } }).then((token) => token.write.transfer([seller.address, before.balance - 7n]));
    requests.length = 0;
    const after = (await index.payer(buyer.address, freshNonce(), 0))!;
    expect(after.balance).to.equal(7n);
    expect(after.head.number).to.equal(await head());
    // The new block's header and its token logs were read; the balance was not read again.
    expect(requests.map((r) => r.method)).to.include.members(["eth_getBlockByNumber", "eth_getLogs"]);
    expect(requests.filter((r) => r.method === "eth_call")).to.deep.equal([]);
    // The payee is held too once asked: read once, then kept.
    expect((await index.payer(seller.address, freshNonce(), 0))!.balance).to.equal(await balance(seller.address));
  });

  it("knows nonces used and canceled before it started (backfilled from the token's deployment block), without asking authorizationState", async () => {
    const used = freshNonce();
    const canceled = freshNonce();
    await useAuthorization(used);
    await cancelAuthorization(canceled);
    const index = open();
    await backfilled(index);
    const status = index.status();
    expect(status.backfill).to.deep.include({ state: "done", throughBlock: status.backfill.targetBlock });
    // The deployment block, found by a binary search over eth_getCode, is where it began.
    const deployedAt = await binaryFirstCode(chain().token);
    expect(status.backfill.fromBlock).to.equal(deployedAt);
    expect(await ledger.nonceIndexProgress({ chainId: 338, token: chain().token })).to.deep.equal({ fromBlock: BigInt(deployedAt), throughBlock: BigInt(status.backfill.targetBlock!) });
    requests.length = 0;
    expect((await index.payer(buyer.address, used, 60_000))!.used).to.equal(true);
    expect((await index.payer(buyer.address, canceled, 60_000))!.used).to.equal(true);
    expect((await index.payer(buyer.address, freshNonce(), 60_000))!.used).to.equal(false);
    expect(authorizationStateCalls(requests)).to.equal(0);
  });

  it("answers 'ask the chain' for a nonce while the backfill has not finished, and nothing it cannot vouch for", async () => {
    const refusal = refuseBackfill();
    const index = open({ startBlock: 0n, tailBlocks: 0 });
    expect(await waitUntil(async () => index.status().state === "following", 10_000, 10)).to.equal(true);
    expect((await index.payer(buyer.address, freshNonce(), 60_000))!.used).to.equal(undefined);
    refusal.end();
    await backfilled(index);
    expect((await index.payer(buyer.address, freshNonce(), 60_000))!.used).to.equal(false);
  });

  it("backfills in ranges a provider takes: a refused range is halved until it passes, every nonce found", async () => {
    const nonces = [freshNonce(), freshNonce(), freshNonce()];
    for (const nonce of nonces) {
      await useAuthorization(nonce);
      await chain().networkHelpers.mine(300);
    }
    const widest: bigint[] = [];
    proxied.proxies[0]!.rewrite((request) => {
      const [filter] = request.params as [{ fromBlock?: Hex; toBlock?: Hex; blockHash?: Hex }];
      if (request.method !== "eth_getLogs" || filter.blockHash) return undefined;
      const span = BigInt(filter.toBlock!) - BigInt(filter.fromBlock!) + 1n;
      if (span > 100n) return { error: { code: -32005, message: "block range is too wide (max 100)" } };
      widest.push(span);
      return undefined;
    });
    const index = open({ startBlock: 0n, logRangeBlocks: 1_000 });
    await backfilled(index);
    expect(widest.length).to.be.greaterThan(1);
    expect(widest.every((span) => span <= 100n)).to.equal(true);
    for (const nonce of nonces) expect((await index.payer(buyer.address, nonce, 60_000))!.used).to.equal(true);
    expect(await ledger.indexedNonces({ chainId: 338, token: chain().token }, { limit: 10 })).to.have.length(3);
  });

  it("resumes from the stored progress: a second index on the same ledger loads the nonces and reads only the blocks after", async () => {
    const early = freshNonce();
    await useAuthorization(early);
    // Every block by range (no tail read block by block): the ranges read show where each backfill began.
    const first = open({ tailBlocks: 0 });
    await backfilled(first);
    const through = first.status().backfill.throughBlock!;
    await first.stop();
    const late = freshNonce();
    await useAuthorization(late);
    requests.length = 0;
    const second = open({ tailBlocks: 0 });
    await backfilled(second);
    const ranges = requests
      .filter((r) => r.method === "eth_getLogs" && (r.params as [{ blockHash?: Hex }])[0].blockHash === undefined)
      .map((r) => (r.params as [{ fromBlock: Hex }])[0].fromBlock);
    expect(ranges).to.deep.equal([numberToHex(through + 1)]);
    // No second search for the deployment block.
    expect(requests.filter((r) => r.method === "eth_getCode")).to.deep.equal([]);
    expect((await second.payer(buyer.address, early, 60_000))!.used).to.equal(true);
    expect((await second.payer(buyer.address, late, 60_000))!.used).to.equal(true);
  });

  it("shares the backfill through PostgreSQL: a second instance on its own connection pool loads the first's nonces and reads only the blocks after", async function () {
    this.timeout(120_000);
    const backend = postgresBackend();
    await backend.setUp();
    try {
      const store = await backend.store(new TestClock());
      const [first, second] = [await store.open(), await store.open()];
      const early = freshNonce();
      await useAuthorization(early);
      const a = open({ store: first });
      await backfilled(a);
      const late = freshNonce();
      await useAuthorization(late);
      // The first instance stores what it follows live (every 2 s): then the second starts after it.
      await a.payer(buyer.address, freshNonce(), 0);
      expect(await waitUntil(async () => (await first.nonceIndexProgress({ chainId: 338, token: chain().token }))!.throughBlock === (await head()), 10_000, 50)).to.equal(true);
      requests.length = 0;
      const b = open({ store: second });
      await backfilled(b);
      // Nothing left to backfill: no range read, no search for the deployment block.
      expect(requests.filter((r) => r.method === "eth_getLogs" && !(r.params as [{ blockHash?: Hex }])[0].blockHash)).to.deep.equal([]);
      expect(requests.filter((r) => r.method === "eth_getCode")).to.deep.equal([]);
      expect((await b.payer(buyer.address, early, 60_000))!.used).to.equal(true);
      expect((await b.payer(buyer.address, late, 60_000))!.used).to.equal(true);
      await store.dispose();
    } finally {
      await backend.tearDown();
    }
  });

  it("spentAt: the block of the AuthorizationUsed or AuthorizationCanceled log of a spent authorization, unspent for a fresh one", async () => {
    const used = freshNonce();
    await useAuthorization(used);
    const usedBlock = await head();
    const index = open();
    await backfilled(index);
    const canceled = freshNonce();
    await cancelAuthorization(canceled);
    const canceledBlock = await head();
    // The first from the backfill (the ledger), the second from the live follower.
    expect(await index.spentAt(buyer.address, used)).to.deep.equal({ spent: true, blockNumber: usedBlock });
    expect(await index.spentAt(buyer.address, canceled)).to.deep.equal({ spent: true, blockNumber: canceledBlock });
    expect(await index.spentAt(buyer.address, freshNonce())).to.deep.equal({ spent: false });
    // Another authorizer's nonce of the same value is its own.
    expect(await index.spentAt(seller.address, used)).to.deep.equal({ spent: false });
    // The chain agrees.
    const state = (nonce: Hex) => chain().contract.read.authorizationState([buyer.address, nonce]);
    expect([await state(used), await state(canceled)]).to.deep.equal([true, true]);
  });

  it("spentAt: undefined while the backfill has not finished, or while the index is behind the chain", async () => {
    const refusal = refuseBackfill();
    const used = freshNonce();
    await useAuthorization(used);
    const index = open({ startBlock: 0n, tailBlocks: 0 });
    expect(await waitUntil(async () => index.status().state === "following", 10_000, 10)).to.equal(true);
    expect(await index.spentAt(buyer.address, used)).to.equal(undefined);
    expect(await index.spentAt(buyer.address, freshNonce())).to.equal(undefined);
    refusal.end();
    await backfilled(index);
    expect(await index.spentAt(buyer.address, used)).to.deep.include({ spent: true });
    // Behind: the new block's logs cannot be read.
    proxied.proxies[0]!.fail({ kind: "http503", method: "eth_getLogs" });
    const late = freshNonce();
    await useAuthorization(late);
    expect(await index.spentAt(buyer.address, late)).to.equal(undefined);
    expect(await index.spentAt(buyer.address, freshNonce())).to.equal(undefined);
    expect(index.status().state).to.equal("behind");
    proxied.proxies[0]!.clear();
    expect(await waitUntil(async () => (await index.spentAt(buyer.address, late)) !== undefined, 10_000, 20)).to.equal(true);
    expect(await index.spentAt(buyer.address, late)).to.deep.equal({ spent: true, blockNumber: await head() });
  });

  it("spentAt: a nonce found spent by a direct read (block unknown) is answered from the ledger once stored, else not at all", async () => {
    const index = open();
    await backfilled(index);
    const nonce = freshNonce();
    index.rememberUsed(buyer.address, nonce);
    expect(await index.spentAt(buyer.address, nonce)).to.equal(undefined);
    await ledger.recordIndexedNonces({ chainId: 338, token: chain().token }, [{ authorizer: buyer.address, nonce, blockNumber: 5n }], { fromBlock: 0n, throughBlock: 0n });
    expect(await index.spentAt(buyer.address, nonce)).to.deep.equal({ spent: true, blockNumber: 5n });
  });

  it("holds at most maxNonces spent nonces in memory: the older ones are asked of the ledger (only when a filter says they may be spent), every answer exact", async () => {
    const spentOnChain = freshNonce();
    await useAuthorization(spentOnChain);
    // A first index backfills; then the ledger holds 3,000 more spent nonces (as after a long history).
    const first = open();
    await backfilled(first);
    await first.stop();
    const scope = { chainId: 338, token: chain().token };
    const stored = Array.from({ length: 3_000 }, (_, i) => ({ authorizer: buyer.address, nonce: freshNonce(), blockNumber: BigInt(1 + (i % 4)) }));
    const progress = (await ledger.nonceIndexProgress(scope))!;
    await ledger.recordIndexedNonces(scope, stored, { fromBlock: progress.throughBlock, throughBlock: progress.throughBlock });
    // The second index is bounded; the ledger's point lookups are counted, and can be made to fail.
    let lookups = 0;
    let down = false;
    const counted = new Proxy(ledger, {
      get(target, property, receiver) {
        if (property === "indexedNonce") {
          return (...args: Parameters<Ledger["indexedNonce"]>) => {
            lookups++;
            return down ? Promise.reject(new Error("the ledger is down")) : target.indexedNonce(...args);
          };
        }
        const value = Reflect.get(target, property, receiver) as unknown;
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const index = open({ store: counted, maxNonces: 1_000 });
    await backfilled(index);
    // Held: at most the bound (forgotten a sixteenth below it at a time), the rest in the filter.
    const { nonces: held, evictedNonces } = index.status();
    expect(held).to.be.at.most(1_000).and.at.least(1_000 - 1_000 / 16);
    expect(held + evictedNonces).to.equal(3_001);
    for (const { nonce, blockNumber } of stored) {
      expect((await index.payer(buyer.address, nonce, 60_000))!.used).to.equal(true);
      expect(await index.spentAt(buyer.address, nonce, 60_000)).to.deep.equal({ spent: true, blockNumber });
    }
    expect((await index.payer(buyer.address, spentOnChain, 60_000))!.used).to.equal(true);
    // Fresh nonces: unspent, and (about 2,000 forgotten in a filter of 64,000 bits) almost never a ledger read.
    lookups = 0;
    for (let i = 0; i < 1_000; i++) expect((await index.payer(buyer.address, freshNonce(), 60_000))!.used).to.equal(false);
    expect(lookups).to.be.below(20);
    // A nonce spent after the start is held (not yet stored: never forgotten before it is).
    const live = freshNonce();
    await useAuthorization(live);
    expect((await index.payer(buyer.address, live, 0))!.used).to.equal(true);
    expect(index.status().nonces).to.be.at.most(1_001);
    // The ledger down: a forgotten nonce is not answered (verify reads the chain), never answered unspent.
    down = true;
    const answers = await Promise.all(stored.map((n) => index.payer(buyer.address, n.nonce, 60_000)));
    expect(answers.every((answer) => answer === undefined || answer.used === true)).to.equal(true);
    expect(answers.filter((answer) => answer === undefined).length).to.be.at.least(2_000);
    const spent = await Promise.all(stored.map((n) => index.spentAt(buyer.address, n.nonce, 60_000)));
    expect(spent.every((answer) => answer === undefined || answer.spent)).to.equal(true);
  });

  it("falls behind while the RPC drops eth_getLogs answers (answers nothing meanwhile), then catches up by itself", async () => {
    const index = open();
    await backfilled(index);
    await index.payer(buyer.address, freshNonce(), 60_000);
    proxied.proxies[0]!.fail({ kind: "http503", method: "eth_getLogs" });
    const nonce = freshNonce();
    await useAuthorization(nonce);
    expect(await index.payer(buyer.address, nonce, 0)).to.equal(undefined);
    expect(index.status().state).to.equal("behind");
    expect(index.status().chainBlock! - index.status().block!).to.equal(1);
    proxied.proxies[0]!.clear();
    proxied.proxies[0]!.rewrite((request) => void requests.push(request));
    expect(await waitUntil(async () => index.status().state === "following", 10_000, 20)).to.equal(true);
    const caught = (await index.payer(buyer.address, nonce, 60_000))!;
    expect(caught).to.deep.include({ used: true, balance: await balance(buyer.address) });
    expect(caught.head.number).to.equal(await head());
  });

  it("reads a block the RPC's head skipped: the nonce used in it is known", async () => {
    const index = open();
    await backfilled(index);
    const skipped = (await head()) + 1n;
    const before = await proxied.proxies[0]!.chain.call("eth_getBlockByNumber", [numberToHex(skipped - 1n), false]);
    proxied.proxies[0]!.rewrite((request) => (request.method === "eth_getBlockByNumber" && (request.params as [string])[0] === "latest" ? { result: before } : undefined));
    const nonce = freshNonce();
    await useAuthorization(nonce); // block `skipped`, which the RPC does not admit to
    await chain().networkHelpers.mine();
    proxied.proxies[0]!.clear();
    proxied.proxies[0]!.rewrite((request) => void requests.push(request));
    const answer = (await index.payer(buyer.address, nonce, 0))!;
    expect(answer.head.number).to.equal(skipped + 1n);
    expect(answer.used).to.equal(true);
  });

  it("asks again for the logs of a block whose bloom names the token when an answer comes back empty", async () => {
    const index = open();
    await backfilled(index);
    await index.payer(buyer.address, freshNonce(), 60_000);
    let emptied = 0;
    proxied.proxies[0]!.rewrite((request) => {
      if (request.method !== "eth_getLogs" || !(request.params as [{ blockHash?: Hex }])[0].blockHash || emptied > 0) return undefined;
      emptied++;
      return { result: [] };
    });
    const nonce = freshNonce();
    await useAuthorization(nonce);
    requests.length = 0;
    const answer = (await index.payer(buyer.address, nonce, 0))!;
    expect(emptied).to.equal(1);
    expect(requests.filter((r) => r.method === "eth_getLogs")).to.have.length(2);
    expect(answer).to.deep.include({ used: true, balance: await balance(buyer.address) });
  });

  it("reads the logs of a block whose bloom is all zero while it holds transactions (a node reporting empty blooms), and none of an empty block's", async () => {
    const index = open();
    await backfilled(index);
    await index.payer(buyer.address, freshNonce(), 60_000);
    const zeroBloom = `0x${"0".repeat(512)}`;
    proxied.proxies[0]!.rewrite((request, answer) => {
      if (!String(request.method).startsWith("eth_getBlockBy") || !answer.result) return undefined;
      return { result: { ...(answer.result as object), logsBloom: zeroBloom } };
    });
    const nonce = freshNonce();
    await useAuthorization(nonce);
    requests.length = 0;
    const answer = (await index.payer(buyer.address, nonce, 0))!;
    // The chain's truth: used, and the balance after the transfer.
    expect(await chain().contract.read.authorizationState([buyer.address, nonce])).to.equal(true);
    expect(answer).to.deep.include({ used: true, balance: await balance(buyer.address) });
    expect(answer.head.number).to.equal(await head());
    expect(await index.spentAt(buyer.address, nonce)).to.deep.equal({ spent: true, blockNumber: await head() });
    expect(requests.filter((r) => r.method === "eth_getLogs")).to.have.length(1);
    // An empty block under the same node: no logs asked.
    await chain().networkHelpers.mine();
    requests.length = 0;
    expect((await index.payer(buyer.address, nonce, 0))!.head.number).to.equal(await head());
    expect(requests.filter((r) => r.method === "eth_getLogs")).to.deep.equal([]);
    expect(index.status().state).to.equal("following");
  });

  it("applies nothing from blocks that do not follow its head (an inconsistent RPC) and answers nothing until they do", async () => {
    const index = open();
    await backfilled(index);
    await index.payer(buyer.address, freshNonce(), 60_000);
    let forged = true;
    proxied.proxies[0]!.rewrite((request, answer) => {
      if (!forged || request.method !== "eth_getBlockByNumber" || (request.params as [string])[0] === "latest") return undefined;
      return { result: { ...(answer.result as object), parentHash: `0x${"ab".repeat(32)}` } };
    });
    const nonce = freshNonce();
    await useAuthorization(nonce);
    expect(await index.payer(buyer.address, nonce, 0)).to.equal(undefined);
    forged = false;
    expect(await waitUntil(async () => index.status().state === "following", 10_000, 20)).to.equal(true);
    expect((await index.payer(buyer.address, nonce, 0))!.used).to.equal(true);
  });

  it("follows a snapshot revert with no block after it: at once back at the snapshot's block, the nonce spent after it unspent again; then a new block at that height", async () => {
    const { index, changes, controls } = await watched();
    const snapshotBlock = await head();
    const snapshot = await controls.call<Hex>("evm_snapshot");
    const nonce = freshNonce();
    await useAuthorization(nonce);
    expect((await index.payer(buyer.address, nonce, 0))!.used).to.equal(true);
    await controls.call("evm_revert", [snapshot]);
    // The chain's truth, and the index's answer right after: unspent, the balance of before, at the snapshot's block.
    expect(await chain().contract.read.authorizationState([buyer.address, nonce])).to.equal(false);
    requests.length = 0;
    const after = (await index.payer(buyer.address, nonce, 0))!;
    // The held balance went back by the forgotten block's transfer: not read again.
    expect(requests.filter((r) => r.method === "eth_call")).to.deep.equal([]);
    expect(after).to.deep.include({ used: false, balance: await balance(buyer.address) });
    expect(after.head.number).to.equal(snapshotBlock);
    expect(await index.spentAt(buyer.address, nonce)).to.deep.equal({ spent: false });
    expect(index.status()).to.deep.include({ state: "following", block: Number(snapshotBlock), chainBlock: Number(snapshotBlock) });
    expect(changes).to.deep.equal(["rewind"]);
    // Another block at the height the spent nonce was at: followed, the nonce still unspent, a new one spent.
    const other = freshNonce();
    await useAuthorization(other);
    const next = (await index.payer(buyer.address, other, 0))!;
    expect(next).to.deep.include({ used: true, balance: await balance(buyer.address) });
    expect(next.head.number).to.equal(snapshotBlock + 1n);
    expect((await index.payer(buyer.address, nonce, 0))!.used).to.equal(false);
  });

  it("follows a revert followed by more blocks than it had read: back to the newest block both have, by hash, then forward on the new ones", async () => {
    const { index, changes, controls } = await watched();
    const snapshot = await controls.call<Hex>("evm_snapshot");
    const kept = freshNonce();
    const reverted = freshNonce();
    await useAuthorization(reverted);
    await chain().networkHelpers.mine(2);
    expect((await index.payer(buyer.address, reverted, 0))!.used).to.equal(true);
    await controls.call("evm_revert", [snapshot]);
    await chain().networkHelpers.mine(3);
    await useAuthorization(kept);
    await chain().networkHelpers.mine(2);
    const answer = (await index.payer(buyer.address, reverted, 0))!;
    expect(answer).to.deep.include({ used: false, balance: await balance(buyer.address) });
    expect(answer.head).to.deep.equal({ number: await head(), timestamp: (await chain().publicClient.getBlock()).timestamp, hash: (await chain().publicClient.getBlock()).hash });
    expect((await index.payer(buyer.address, kept, 0))!.used).to.equal(true);
    expect(await index.spentAt(buyer.address, kept)).to.deep.equal({ spent: true, blockNumber: (await head()) - 2n });
    expect(index.status().state).to.equal("following");
    expect(changes).to.deep.equal(["rewind"]);
  });

  it("starts over when the chain went back further than the blocks it keeps the hashes of, and knows again only what the chain has (not the ledger's rows of the history it left)", async () => {
    const { index, changes, controls } = await watched();
    const scope = { chainId: 338, token: chain().token };
    const before = freshNonce();
    await useAuthorization(before);
    const snapshot = await controls.call<Hex>("evm_snapshot");
    const snapshotBlock = await head();
    const reverted = freshNonce();
    await useAuthorization(reverted);
    // One by one (hardhat_mine's blocks report no parent hash).
    for (let i = 0; i < TRAIL_BLOCKS + 50; i++) await controls.call("evm_mine");
    // Asked with a maximum age, the index polls often and stores what it follows live: the spent nonce of the history
    // about to be left is in the ledger before the revert (what a loaded machine did by chance, on the 5 s idle poll).
    expect(await waitUntil(async () => (await index.payer(buyer.address, reverted, 60_000))?.head.number === (await head()), 30_000, 20), JSON.stringify({ changes, status: index.status(), head: String(await head()) })).to.equal(true);
    expect(await waitUntil(async () => (await ledger.indexedNonce(scope, buyer.address, reverted)) !== undefined, 10_000, 20)).to.equal(true);
    await controls.call("evm_revert", [snapshot]);
    expect(await waitUntil(async () => index.status().backfill.state === "done" && changes.includes("rebuild") && (await index.payer(buyer.address, reverted, 0)) !== undefined, 20_000, 20), JSON.stringify({ changes, status: index.status() })).to.equal(true);
    expect(changes).to.deep.equal(["rebuild"]);
    // No history to bind the ledger to the chain here: its row of the block the chain no longer has is still there, after the head.
    expect(await ledger.indexedNonce(scope, buyer.address, reverted)).to.deep.include({ blockNumber: snapshotBlock + 1n });
    expect(await head()).to.equal(snapshotBlock);
    const answer = (await index.payer(buyer.address, reverted, 0))!;
    expect(answer).to.deep.include({ used: false, balance: await balance(buyer.address) });
    expect(answer.head.number).to.equal(snapshotBlock);
    expect(await index.spentAt(buyer.address, reverted)).to.deep.equal({ spent: false });
    expect(await chain().contract.read.authorizationState([buyer.address, reverted])).to.equal(false);
    expect((await index.payer(buyer.address, before, 0))!.used).to.equal(true);
    expect(index.status()).to.deep.include({ state: "following", block: Number(await head()) });
  });

  it("holds spent only the ledger's nonces through the block it starts at: a row of a later block (an instance whose node is ahead, a forged row, a history the chain left) proves nothing at its head", async () => {
    const scope = { chainId: 338, token: chain().token };
    const early = freshNonce();
    await useAuthorization(early);
    const at = await head();
    const ahead = freshNonce();
    // The ledger says every block through at + 5 is read, with `early` where the chain has it and `ahead` in block at + 3.
    await ledger.openNonceIndex(scope, 0n);
    await ledger.recordIndexedNonces(
      scope,
      [
        { authorizer: buyer.address, nonce: early, blockNumber: at },
        { authorizer: buyer.address, nonce: ahead, blockNumber: at + 3n },
      ],
      { fromBlock: 0n, throughBlock: at + 5n },
    );
    requests.length = 0;
    const index = open();
    await backfilled(index);
    // Nothing read by range: the stored rows were loaded (`early` among them), `ahead` not held spent.
    expect(requests.filter((r) => r.method === "eth_getLogs" && !(r.params as [{ blockHash?: Hex }])[0].blockHash)).to.deep.equal([]);
    expect(index.status()).to.deep.include({ nonces: 1, block: Number(at) });
    expect((await index.payer(buyer.address, early, 0))!.used).to.equal(true);
    const answer = (await index.payer(buyer.address, ahead, 0))!;
    expect(answer).to.deep.include({ used: false, head: { number: at, timestamp: (await chain().publicClient.getBlock()).timestamp, hash: (await chain().publicClient.getBlock()).hash } });
    expect(await index.spentAt(buyer.address, ahead)).to.deep.equal({ spent: false });
    // Past that block the chain itself says: it has no such authorization, nor has the index.
    await chain().networkHelpers.mine(5);
    const later = (await index.payer(buyer.address, ahead, 0))!;
    expect(later).to.deep.include({ used: false });
    expect(later.head.number).to.equal(at + 5n);
    expect(await chain().contract.read.authorizationState([buyer.address, ahead])).to.equal(false);
  });

  it("over a WebSocket RPC, learns of new blocks by eth_subscribe (no verify asking) and answers from them", async () => {
    const wsClient = createPublicClient({ transport: webSocket(proxied.bridge.wsUrl), cacheTime: 0 }) as PublicClient;
    try {
      const index = open({ client: wsClient, subscribe: true });
      await backfilled(index);
      expect(index.status().mode).to.equal("subscribe");
      const used = freshNonce();
      await useAuthorization(used);
      const mined = Number(await head());
      // Announced, read and applied with no one asking (the background poll is seconds away).
      expect(await waitUntil(async () => index.status().block === mined, 2_000, 10), JSON.stringify(index.status())).to.equal(true);
      const answer = (await index.payer(buyer.address, used, 250))!;
      expect(answer.used).to.equal(true);
      expect(answer.head.number).to.equal(BigInt(mined));
      await index.stop();
    } finally {
      // viem keeps the socket (and reconnects it) until closed.
      const socket = await (wsClient.transport as unknown as { getRpcClient(): Promise<{ close(): void }> }).getRpcClient();
      socket.close();
    }
  });

  it("follows Pause and Unpause", async () => {
    const index = open();
    await backfilled(index);
    await chain().contract.write.pause();
    await index.payer(buyer.address, freshNonce(), 0);
    expect(index.status().paused).to.equal(true);
    await chain().contract.write.unpause();
    await index.payer(buyer.address, freshNonce(), 0);
    expect(index.status().paused).to.equal(false);
  });

  /** The first block with the token's code, asked straight of the chain (not through the proxy). */
  async function binaryFirstCode(token: Address): Promise<number> {
    const latest = await head();
    for (let n = 0n; n <= latest; n++) {
      const code = await chain().publicClient.getCode({ address: token, blockNumber: n });
      if (code && code !== "0x") return Number(n);
    }
    throw new Error("no code");
  }
});
