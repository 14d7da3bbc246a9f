import { expect } from "chai";
import { decodeFunctionData, parseAbi, toHex, type Hex } from "viem";
import type { RunningFacilitator } from "../../src/facilitator/start.js";
import { makePayment, useAuthorizationOnChain, v2BodyOf } from "../helpers/facilitator.js";
import { postJson } from "../helpers/http.js";
import { cutLogsShort, type CutLogsOptions } from "../helpers/log-faults.js";
import { metric } from "../helpers/metrics.js";
import { openProxiedChain, startFacilitatorOnProxies, type ProxiedChain } from "../helpers/proxied-chain.js";
import type { JsonRpcRequest } from "../helpers/rpc-proxy.js";
import { waitUntil } from "../helpers/wait.js";

// Issue 38, finding 1: a fresh facilitator whose log reads were cut 60 blocks short answered verify `isValid: true`
// for an authorization spent one block earlier. Through a proxy that answers eth_getLogs as a Cronos backend behind
// the head does (what it has, without error), verify must refuse it, in both dialects, with the spec's text.

const freshNonce = () => toHex(crypto.getRandomValues(new Uint8Array(32)));
const authorizationState = parseAbi(["function authorizationState(address authorizer, bytes32 nonce) view returns (bool)"]);
const ALREADY_USED = "Authorization already used";

describe("verify through log reads cut short: a spend the index cannot prove it missed is refused", function () {
  this.timeout(90_000);
  let proxied: ProxiedChain;
  let running: RunningFacilitator | undefined;
  const seen: JsonRpcRequest[] = [];

  beforeEach(async () => {
    proxied = await openProxiedChain();
    seen.length = 0;
    proxied.proxies[0]!.rewrite((request) => void seen.push(request));
  });
  afterEach(async () => {
    await running?.close(0);
    running = undefined;
    await proxied.close();
  });

  const chain = () => proxied.chain;
  const index = () => running!.facilitator.context.networks.get("cronos-testnet")!.index!;
  const metrics = async () => (await fetch(running!.metricsUrl!)).text();
  const source = async (from: "index" | "chain") => metric(await metrics(), `x402_verify_state_source_total{network="cronos-testnet",source="${from}"}`);
  /** `authorizationState` reads the facilitator sent to the chain. */
  const stateReads = () =>
    seen.filter((request) => {
      if (request.method !== "eth_call") return false;
      const call = (request.params as [{ data?: Hex; input?: Hex }])[0];
      try {
        return decodeFunctionData({ abi: authorizationState, data: (call.data ?? call.input)! }).functionName === "authorizationState";
      } catch {
        return false;
      }
    }).length;
  /** Verify's answers to the payment of `nonce` in both dialects: the Cronos v1 body, and the x402 v2 one. */
  const verifyBoth = async (nonce: Hex) => {
    const made = await makePayment(chain(), { nonce });
    const cronos = (await postJson(`${running!.url}/v2/x402/verify`, made.body, { "X402-Version": "1" })).json;
    const v2 = (await postJson(`${running!.url}/v2/x402/verify`, v2BodyOf(made))).json;
    return { cronos, v2, payer: made.message.from };
  };
  const refusedBoth = async (nonce: Hex) => {
    const { cronos, v2, payer } = await verifyBoth(nonce);
    expect(cronos).to.deep.equal({ isValid: false, invalidReason: ALREADY_USED });
    expect(v2).to.deep.equal({ isValid: false, invalidReason: "invalid_exact_evm_nonce_already_used", invalidMessage: ALREADY_USED, payer });
  };
  const start = async (cut: CutLogsOptions) => {
    const rule = cutLogsShort(proxied.proxies[0]!, cut);
    running = await startFacilitatorOnProxies(proxied, { HEAD_CACHE_MS: "1000" });
    return rule;
  };

  it("a gateway that splits batches, logs cut 60 blocks short: a fresh instance refuses at verify an authorization spent a block ago, from its index (the block proven by its receipt)", async () => {
    const nonce = freshNonce();
    await useAuthorizationOnChain(chain(), nonce);
    await chain().networkHelpers.mine(1);
    const cut = await start({ lagBlocks: 60, batch: "split" });
    expect(await waitUntil(async () => index().status().backfill.state === "done" && index().status().state === "following", 20_000, 20), JSON.stringify(index().status())).to.equal(true);
    expect(cut.changed).to.be.greaterThan(0);
    const [fromIndex, reads] = [await source("index"), stateReads()];
    await refusedBoth(nonce);
    expect((await source("index")) - fromIndex).to.equal(2);
    expect(stateReads() - reads).to.equal(0);
    // A fresh authorization of the same payer is still good.
    const { cronos } = await verifyBoth(freshNonce());
    expect(cronos).to.deep.equal({ isValid: true, invalidReason: null });
  });

  it("one backend behind for every read (receipts too), a spend a block ago and one 300 blocks before: verify asks the chain and refuses both; honest again, the index reaches following and refuses them itself", async () => {
    const deep = freshNonce();
    await useAuthorizationOnChain(chain(), deep);
    await chain().networkHelpers.mine(300);
    const recent = freshNonce();
    await useAuthorizationOnChain(chain(), recent);
    await chain().networkHelpers.mine(1);
    const cut = await start({ lagBlocks: 60, batch: "same-backend", receiptsLag: true });
    // The index follows the chain's new blocks, but its backfill proves nothing it was cut short of.
    expect(await waitUntil(async () => index().status().state === "following" && cut.changed >= 3, 20_000, 20), JSON.stringify(index().status())).to.equal(true);
    expect(index().status().backfill.state).to.equal("running");
    const reads = stateReads();
    await refusedBoth(recent);
    await refusedBoth(deep);
    // Each answer rests on the chain's authorizationState, never on "unused" from memory.
    expect(stateReads() - reads).to.be.at.least(2);
    const health = (await (await fetch(`${running!.url}/healthcheck`)).json()) as { results: { networks: Record<string, { stateIndex: { backfill: { state: string } } }> } };
    expect(health.results.networks["cronos-testnet"]!.stateIndex.backfill.state).to.equal("running");

    cut.end();
    expect(await waitUntil(async () => index().status().backfill.state === "done" && index().status().state === "following", 20_000, 20), JSON.stringify(index().status())).to.equal(true);
    const [fromIndex, after] = [await source("index"), stateReads()];
    await refusedBoth(recent);
    await refusedBoth(deep);
    expect((await source("index")) - fromIndex).to.equal(4);
    expect(stateReads() - after).to.equal(0);
  });
});
