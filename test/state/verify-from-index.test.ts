import { expect } from "chai";
import { toHex, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { RunningFacilitator } from "../../src/facilitator/start.js";
import { VerifyReason, SettleError } from "../../src/protocol/reasons.js";
import { HARDHAT_KEYS, makePayment, useAuthorizationOnChain } from "../helpers/facilitator.js";
import { postJson } from "../helpers/http.js";
import { openProxiedChain, startFacilitatorOnProxies, type ProxiedChain } from "../helpers/proxied-chain.js";
import { signCancelAuthorization } from "../helpers/sign.js";
import { metric } from "../helpers/metrics.js";
import { waitUntil } from "../helpers/wait.js";

const freshNonce = () => toHex(crypto.getRandomValues(new Uint8Array(32)));

describe("verify from the token state index: the truth it must keep", function () {
  this.timeout(60_000);
  let proxied: ProxiedChain;
  let running: RunningFacilitator;
  const buyer = privateKeyToAccount(HARDHAT_KEYS.buyer);
  const seller = privateKeyToAccount(HARDHAT_KEYS.seller);

  beforeEach(async () => {
    proxied = await openProxiedChain();
  });
  afterEach(async () => {
    await running?.close(0);
    await proxied.close();
  });

  const chain = () => proxied.chain;
  const proxy = () => proxied.proxies[0]!;
  const start = async (env: Record<string, string> = {}) => {
    running = await startFacilitatorOnProxies(proxied, env);
    return running;
  };
  const index = () => running.facilitator.context.networks.get("cronos-testnet")!.index!;
  const followingAndBackfilled = async () => {
    expect(await waitUntil(async () => index().status().backfill.state === "done" && index().status().state === "following", 10_000, 10), JSON.stringify(index().status())).to.equal(true);
  };
  const verify = async (body: object) => (await postJson(`${running.url}/v2/x402/verify`, body, { "X402-Version": "1" })).json as { isValid: boolean; invalidReason: string | null };
  const metrics = async () => (await fetch(running.metricsUrl!)).text();
  const fromIndex = async () => metric(await metrics(), 'x402_verify_state_source_total{network="cronos-testnet",source="index"}');
  const fromChain = async () => metric(await metrics(), 'x402_verify_state_source_total{network="cronos-testnet",source="chain"}');
  const useAuthorization = (nonce: Hex) => useAuthorizationOnChain(chain(), nonce);

  it("refuses an authorization used on chain before the facilitator started, and one canceled before it, as Authorization already used, from the index", async () => {
    const used = freshNonce();
    const canceled = freshNonce();
    await useAuthorization(used);
    const { info, token } = chain();
    const domain = { name: info.domain.name, version: info.domain.version, chainId: info.chainId, verifyingContract: token };
    const cancel = await signCancelAuthorization({ account: buyer, domain, message: { authorizer: buyer.address, nonce: canceled } });
    await chain().contract.write.cancelAuthorization([buyer.address, canceled, cancel.v, cancel.r, cancel.s]);
    await start({ HEAD_CACHE_MS: "1000" });
    await followingAndBackfilled();
    const before = await fromIndex();
    const calls = proxy().count("eth_call");
    expect(await verify((await makePayment(chain(), { nonce: used })).body)).to.deep.equal({ isValid: false, invalidReason: VerifyReason.alreadyUsed });
    expect(await verify((await makePayment(chain(), { nonce: canceled })).body)).to.deep.equal({ isValid: false, invalidReason: VerifyReason.alreadyUsed });
    expect(await verify((await makePayment(chain())).body)).to.deep.equal({ isValid: true, invalidReason: null });
    expect((await fromIndex()) - before).to.equal(3);
    // The payer's balance was read once (its first verify); nonce states never.
    expect(proxy().count("eth_call") - calls).to.equal(1);
  });

  it("refuses a payer whose balance a plain transfer drained, within one block of it (the next block the index reads)", async () => {
    await start({ HEAD_CACHE_MS: "0" });
    await followingAndBackfilled();
    expect(await verify((await makePayment(chain(), { amount: 1_000_000n })).body)).to.deep.equal({ isValid: true, invalidReason: null });
    const balance = await chain().contract.read.balanceOf([buyer.address]);
    const wallet = chain().wallets.find((w) => w.account.address.toLowerCase() === buyer.address.toLowerCase())!;
    const token = await chain().viem.getContractAt("BridgedUSDC", chain().token, { client: { wallet } });
    await token.write.transfer([seller.address, balance - 999_999n]);
    expect(await verify((await makePayment(chain(), { amount: 1_000_000n })).body)).to.deep.equal({ isValid: false, invalidReason: VerifyReason.insufficientBalance });
    expect(await verify((await makePayment(chain(), { amount: 999_999n })).body)).to.deep.equal({ isValid: true, invalidReason: null });
    expect(index().status().block).to.equal(Number(await chain().publicClient.getBlockNumber({ cacheTime: 0 })));
  });

  it("refuses a blacklisted payer's settle before sending anything (settle checks the chain, whatever the index holds)", async () => {
    await start({ HEAD_CACHE_MS: "60000" });
    await followingAndBackfilled();
    const payment = await makePayment(chain());
    expect(await verify(payment.body)).to.deep.equal({ isValid: true, invalidReason: null });
    await chain().contract.write.blacklist([buyer.address]);
    const sends = proxy().count("eth_sendRawTransaction");
    const before = await chain().contract.read.balanceOf([buyer.address]);
    const answer = (await postJson(`${running.url}/v2/x402/settle`, payment.body, { "X402-Version": "1" })).json as Record<string, unknown>;
    expect([answer.event, answer.error]).to.deep.equal(["payment.failed", SettleError.failedOnChain]);
    expect(proxy().count("eth_sendRawTransaction")).to.equal(sends);
    expect(await chain().contract.read.balanceOf([buyer.address])).to.equal(before);
  });

  it("while the RPC drops eth_getLogs answers: verify reads the chain (still the truth), /healthcheck and /metrics show the index behind; then it catches up and answers again", async () => {
    await start({ HEAD_CACHE_MS: "0" });
    await followingAndBackfilled();
    expect(await verify((await makePayment(chain())).body)).to.deep.equal({ isValid: true, invalidReason: null });
    proxy().fail({ kind: "http503", method: "eth_getLogs" });
    const used = freshNonce();
    await useAuthorization(used);
    const chainBefore = await fromChain();
    expect(await verify((await makePayment(chain(), { nonce: used })).body)).to.deep.equal({ isValid: false, invalidReason: VerifyReason.alreadyUsed });
    expect((await fromChain()) - chainBefore).to.equal(1);
    const health = (await (await fetch(`${running.url}/healthcheck`)).json()) as { status: string; results: { networks: Record<string, { stateIndex?: { state: string; block: number; chainBlock: number } }> } };
    expect(health.status).to.equal("success"); // verify still serves: the index is an aid, not a dependency
    const behind = health.results.networks["cronos-testnet"]!.stateIndex!;
    expect([behind.state, behind.chainBlock - behind.block]).to.deep.equal(["behind", 1]);
    const page = await metrics();
    expect(metric(page, 'x402_state_index_following{network="cronos-testnet"}')).to.equal(0);
    expect(metric(page, 'x402_state_index_lag_blocks{network="cronos-testnet"}')).to.equal(1);
    expect(metric(page, 'x402_state_index_follow_errors_total{network="cronos-testnet",kind="rpc"}')).to.be.greaterThan(0);

    proxy().clear();
    expect(await waitUntil(async () => index().status().state === "following", 10_000, 20)).to.equal(true);
    const indexBefore = await fromIndex();
    expect(await verify((await makePayment(chain(), { nonce: used })).body)).to.deep.equal({ isValid: false, invalidReason: VerifyReason.alreadyUsed });
    expect((await fromIndex()) - indexBefore).to.equal(1);
    expect(metric(await metrics(), 'x402_state_index_following{network="cronos-testnet"}')).to.equal(1);
  });

  it("is off with STATE_INDEX=false: verify reads the chain, /healthcheck shows no index", async () => {
    await start({ STATE_INDEX: "false" });
    expect(running.facilitator.context.networks.get("cronos-testnet")!.index).to.equal(undefined);
    expect(await verify((await makePayment(chain())).body)).to.deep.equal({ isValid: true, invalidReason: null });
    expect([await fromIndex(), await fromChain()]).to.deep.equal([0, 1]);
    const health = (await (await fetch(`${running.url}/healthcheck`)).json()) as { results: { networks: Record<string, object> } };
    expect(health.results.networks["cronos-testnet"]).to.not.have.property("stateIndex");
  });

  it("runs a facilitator on a ws:// RPC URL: the index subscribes, verify and settle answer, the payee is paid", async () => {
    await start({ CRONOS_TESTNET_RPC_URL: proxied.bridge.wsUrl, HEAD_CACHE_MS: "250" });
    await followingAndBackfilled();
    expect(index().status().mode).to.equal("subscribe");
    const payment = await makePayment(chain());
    expect(await verify(payment.body)).to.deep.equal({ isValid: true, invalidReason: null });
    const before = await chain().contract.read.balanceOf([seller.address]);
    const answer = (await postJson(`${running.url}/v2/x402/settle`, payment.body, { "X402-Version": "1" })).json as Record<string, unknown>;
    expect(answer.event).to.equal("payment.settled");
    expect(await chain().contract.read.balanceOf([seller.address])).to.equal(before + 1_000_000n);
    // The settlement's block reaches the index by subscription: the same authorization is now spent, from the index.
    expect(await waitUntil(async () => index().status().block === Number(answer.blockNumber), 2_000, 10)).to.equal(true);
    expect(await verify(payment.body)).to.deep.equal({ isValid: false, invalidReason: VerifyReason.alreadyUsed });
  });
});
