import { expect } from "chai";
import { createPublicClient, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { rpcTransport } from "../../src/chain/rpc-transport.js";
import { describeRpcFailure } from "../../src/chain/rpc-url.js";
import type { RunningFacilitator } from "../../src/facilitator/start.js";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { HARDHAT_KEYS, makePayment } from "../helpers/facilitator.js";
import { openProxiedChain, startFacilitatorOnProxies, type ProxiedChain } from "../helpers/proxied-chain.js";
import type { FaultProxy } from "../helpers/rpc-proxy.js";
import { post } from "../helpers/instances.js";
import { waitUntil } from "../helpers/wait.js";

// Issue 29 item 7: an RPC URL that accepts requests and never answers costs a request in flight one
// time-out, after which it goes to the next URL and never back; /healthcheck does not wait for it; an
// RPC's JSON-RPC error is described by its code and message.

const RELAYER = privateKeyToAccount(HARDHAT_KEYS.relayer).address;
const SELLER = privateKeyToAccount(HARDHAT_KEYS.seller).address;

/** The ranking's pings: not requests of the caller. */
const isPing = (method: string) => method === "eth_blockNumber" || method === "eth_chainId";

describe("floods: a hung RPC URL", function () {
  this.timeout(120_000);
  let proxied: ProxiedChain;
  let running: RunningFacilitator | undefined;
  beforeEach(async () => {
    proxied = await openProxiedChain(2);
  });
  afterEach(async () => {
    await running?.close(0);
    running = undefined;
    await proxied.close();
  });

  it("a request in flight when its URL hangs goes to the next URL after one time-out, and is never sent to the hung one again, although the ranking re-sorts meanwhile", async () => {
    const [first, second] = proxied.proxies as [FaultProxy, FaultProxy];
    const rpc = rpcTransport({ urls: [first.url, second.url], timeoutMs: 1_500, rankIntervalMs: 100, chainId: 338 });
    try {
      const client = createPublicClient({ transport: rpc.transport, cacheTime: 0 });
      await rpc.states();
      first.fail({ kind: "hang" });
      // The ranking's pings (time-out 1 s) demote the hung URL while the request waits on it (1.5 s).
      const balance = await client.getBalance({ address: RELAYER });
      expect(balance).to.equal(await proxied.chain.publicClient.getBalance({ address: RELAYER }));
      expect(first.methods.filter((m) => !isPing(m))).to.deep.equal(["eth_getBalance"]);
      expect(second.methods.filter((m) => !isPing(m))).to.deep.equal(["eth_getBalance"]);
      const [hung, serving] = rpc.snapshot();
      expect([hung!.ok, hung!.error, serving!.ok]).to.deep.equal([false, "no answer within 1000 ms", true]);
      // Later requests go to the second URL at once.
      await client.getBalance({ address: SELLER });
      expect(first.methods.filter((m) => !isPing(m))).to.deep.equal(["eth_getBalance"]);
    } finally {
      rpc.close();
    }
  });

  it("10 settles in flight when the first URL hangs: every one settled, mined once, the relayer's nonces without a gap; /healthcheck answers meanwhile and names the hung URL", async () => {
    running = await startFacilitatorOnProxies(proxied, { RPC_TIMEOUT_MS: "1500", RPC_RANK_INTERVAL_MS: "100", HEALTH_CACHE_MS: "0" });
    const [first] = proxied.proxies as [FaultProxy, FaultProxy];
    const payments = await Promise.all(Array.from({ length: 10 }, (_, i) => makePayment(proxied.chain, { amount: 1_000n + BigInt(i) })));
    const payeeBefore = await proxied.chain.contract.read.balanceOf([SELLER]);
    const nonceBefore = await proxied.chain.publicClient.getTransactionCount({ address: RELAYER, blockTag: "pending" });
    const sentBefore = first.methods.length;
    const settles = payments.map((payment) => post(running!.url, "/v2/x402/settle", payment.body, "127.0.0.1"));
    // The hang starts while the burst is under way.
    expect(await waitUntil(async () => first.methods.length > sentBefore + 5, 10_000, 1)).to.equal(true);
    first.fail({ kind: "hang" });
    const health = await fetch(`${running.url}/healthcheck`);
    const answers = await Promise.all(settles);
    expect(answers.map((a) => [a.status, a.body.event])).to.deep.equal(Array(10).fill([200, "payment.settled"]));
    for (const [i, answer] of answers.entries()) {
      const receipt = await proxied.chain.publicClient.getTransactionReceipt({ hash: answer.body.txHash as Hex });
      expect(receipt.status, `settle ${i}`).to.equal("success");
      const used = await proxied.chain.publicClient.readContract({
        address: proxied.chain.token,
        abi: tokenAbi,
        functionName: "authorizationState",
        args: [payments[i]!.message.from, payments[i]!.message.nonce],
      });
      expect(used).to.equal(true);
    }
    expect(new Set(answers.map((a) => a.body.txHash)).size).to.equal(10);
    expect(await proxied.chain.publicClient.getTransactionCount({ address: RELAYER, blockTag: "latest" })).to.equal(nonceBefore + 10);
    expect(await proxied.chain.contract.read.balanceOf([SELLER])).to.equal(payeeBefore + 10n * 1_000n + 45n);
    // The healthcheck asked while the URL hung was answered, healthy: the other URL serves.
    expect(health.status).to.equal(200);
    // Once the ranking has seen the hang, the healthcheck names it from the ranking's pings.
    expect(await waitUntil(async () => {
      const body = (await (await fetch(`${running!.url}/healthcheck`)).json()) as { results: { networks: Record<string, { rpc?: Array<{ ok: boolean; error?: string }> }> } };
      const rpc = body.results.networks["cronos-testnet"]!.rpc!;
      return rpc[0]!.ok === false && rpc[0]!.error === "no answer within 1000 ms" && rpc[1]!.ok === true;
    }, 10_000)).to.equal(true);
  });

  it("/healthcheck does not wait for a sole RPC URL that hangs: it answers from the last checks with a warning, then fails once the checks time out", async function () {
    const [only] = proxied.proxies as [FaultProxy];
    running = await startFacilitatorOnProxies(proxied, { CRONOS_TESTNET_RPC_URL: only.url, RPC_TIMEOUT_MS: "3000", HEALTH_CACHE_MS: "0", HEALTH_TIMEOUT_MS: "300" });
    const ok = (await (await fetch(`${running.url}/healthcheck`)).json()) as { status: string };
    expect(ok.status).to.equal("success");
    only.fail({ kind: "hang" });
    const slow = await fetch(`${running.url}/healthcheck`);
    const body = (await slow.json()) as { status: string; results: { message: string } };
    expect(slow.status).to.equal(200);
    expect(body.results.message).to.match(
      /^OK \(cronos-testnet: CRONOS_TESTNET_RPC_URL: the checks did not finish within \d+ ms \(the RPC is slow\); those of \d+ s ago are shown\)$/,
    );
    // The checks running meanwhile time out (RPC_TIMEOUT_MS): the answers after say the RPC does not answer.
    let seen = "";
    expect(
      await waitUntil(async () => {
        const answer = await fetch(`${running!.url}/healthcheck`);
        seen = `${answer.status} ${((await answer.json()) as { results: { message: string } }).results.message}`;
        // The last finished checks failed; a run still going on is said to be slow after them.
        return seen.startsWith(`503 cronos-testnet: CRONOS_TESTNET_RPC_URL: the RPC at ${only.url} does not answer (no answer within 3000 ms)`);
      }, 20_000, 100),
      seen,
    ).to.equal(true);
  });

  it("describes an RPC's JSON-RPC error by its code and message, never as [object Object]", async () => {
    const [only] = proxied.proxies as [FaultProxy];
    running = await startFacilitatorOnProxies(proxied, { CRONOS_TESTNET_RPC_URL: only.url, HEALTH_CACHE_MS: "0" });
    only.rewrite((request) => (request.method === "eth_chainId" ? { error: { code: -32000, message: "header not found" } } : undefined));
    const answer = await fetch(`${running.url}/healthcheck`);
    const body = (await answer.json()) as { results: { message: string } };
    expect([answer.status, body.results.message]).to.deep.equal([
      503,
      `cronos-testnet: CRONOS_TESTNET_RPC_URL: the RPC at ${only.url} does not answer (JSON-RPC error -32000: header not found)`,
    ]);
    // A bare JSON-RPC error object (as some providers' errors carry it as their cause).
    expect(describeRpcFailure(new Error("request failed", { cause: { code: -32005, message: "limit exceeded\nmore" } }))).to.equal("JSON-RPC error -32005: limit exceeded");
  });
});
