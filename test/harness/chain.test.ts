import { expect } from "chai";
import hre from "hardhat";
import { privateKeyToAddress } from "viem/accounts";
import { decodeFunctionResult, encodeFunctionData, type Address } from "viem";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { NETWORKS } from "../../src/protocol/networks.js";
import { buyerIndexes, localAccount } from "../../src/harness/accounts.js";
import { CRONOS_BLOCK_TIME_MS, startLocalChain, type LocalChain } from "../../src/harness/chain.js";
import { PortInUseError } from "../../src/harness/errors.js";
import { occupyPort, portIsFree, postJson } from "../helpers/http.js";
import { balanceOfData, rpc, type WireResponse } from "../helpers/rpc.js";
import { rejection } from "../helpers/reject.js";
import { waitUntil } from "../helpers/wait.js";

async function callToken(chain: LocalChain, functionName: "name" | "version" | "symbol" | "decimals"): Promise<unknown> {
  const data = encodeFunctionData({ abi: tokenAbi, functionName });
  const result = await rpc<`0x${string}`>(chain.rpcUrl, "eth_call", [{ to: chain.token, data }, "latest"]);
  return decodeFunctionResult({ abi: tokenAbi, functionName, data: result });
}

describe("local chain over HTTP (src/harness/chain.ts)", function () {
  const started: LocalChain[] = [];
  const start = async (options: Parameters<typeof startLocalChain>[0]) => {
    const chain = await startLocalChain({ hre, port: 0, ...options });
    started.push(chain);
    return chain;
  };
  afterEach(async () => {
    await Promise.all(started.splice(0).map((chain) => chain.stop()));
  });

  it("answers eth_chainId 338 on cronos-testnet and 25 on cronos-mainnet over HTTP", async () => {
    const [testnet, mainnet] = await Promise.all([start({ network: "cronos-testnet" }), start({ network: "cronos-mainnet" })]);
    expect(testnet.rpcUrl).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(await rpc(testnet.rpcUrl, "eth_chainId")).to.equal("0x152");
    expect(await rpc(mainnet.rpcUrl, "eth_chainId")).to.equal("0x19");
    expect(await rpc(testnet.rpcUrl, "net_version")).to.equal("338");
  });

  it("answers batch requests in order, with an error object for each failing item", async () => {
    const chain = await start({ network: "cronos-testnet", buyers: 1 });
    const { status, json } = await postJson(chain.rpcUrl, [
      { jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] },
      { jsonrpc: "2.0", id: "two", method: "eth_no_such_method", params: [] },
      { jsonrpc: "2.0", id: 3, method: "eth_call", params: [{ to: chain.token, data: balanceOfData(chain.buyers[0]!.address) }, "latest"] },
      { jsonrpc: "2.0", method: "eth_chainId", params: [] },
      { jsonrpc: "2.0", id: 5 },
    ]);
    expect(status).to.equal(200);
    const responses = json as WireResponse[];
    // The notification (no id) gets no response.
    expect(responses.map((r) => r.id)).to.deep.equal([1, "two", 3, 5]);
    expect(responses[0]!.result).to.equal("0x152");
    expect(responses[1]!.error?.code).to.be.a("number");
    expect(BigInt(responses[2]!.result as string)).to.equal(1_000_000_000n);
    expect(responses[3]!.error?.code).to.equal(-32600);
  });

  it("answers malformed bodies and reverts with JSON-RPC error objects", async () => {
    const chain = await start({ network: "cronos-mainnet", buyers: 1 });
    const parse = await postJson(chain.rpcUrl, "{not json");
    expect(parse.json).to.deep.include({ jsonrpc: "2.0", id: null });
    expect((parse.json as WireResponse).error?.code).to.equal(-32700);
    const empty = await postJson(chain.rpcUrl, []);
    expect((empty.json as WireResponse).error?.code).to.equal(-32600);
    const get = await fetch(chain.rpcUrl);
    expect(get.status).to.equal(405);
    // transfer(to, 2^255) from a buyer reverts: code 3 with the revert data as hex, as geth and anvil answer.
    const data = encodeFunctionData({ abi: tokenAbi, functionName: "transfer", args: [chain.buyers[0]!.address, 2n ** 255n] });
    const revert = (await postJson(chain.rpcUrl, { jsonrpc: "2.0", id: 7, method: "eth_call", params: [{ from: chain.buyers[0]!.address, to: chain.token, data }, "latest"] })).json as WireResponse;
    expect(revert.id).to.equal(7);
    expect(revert.error?.code).to.equal(3);
    expect(revert.error?.data).to.match(/^0x08c379a0/);
  });

  it("has USDC.e at the real address with the real name, version, symbol and decimals", async () => {
    const [testnet, mainnet] = await Promise.all([start({ network: "cronos-testnet" }), start({ network: "cronos-mainnet" })]);
    for (const chain of [testnet, mainnet]) {
      const info = NETWORKS[chain.network];
      expect(chain.token).to.equal(info.token);
      expect(await rpc(chain.rpcUrl, "eth_getCode", [info.token, "latest"])).to.not.equal("0x");
      expect(await callToken(chain, "name")).to.equal(info.domain.name);
      expect(await callToken(chain, "version")).to.equal(info.domain.version);
      expect(await callToken(chain, "symbol")).to.equal(info.tokenSymbol);
      expect(await callToken(chain, "decimals")).to.equal(6);
      expect(chain.domain).to.deep.equal(info.domain);
      expect(chain.tokenDeployed).to.equal(true);
    }
  });

  it("funds exactly the requested buyers (#2 upward, skipping the relayer #9) with the exact balance", async () => {
    const chain = await start({ network: "cronos-testnet", buyers: 9, buyerBalance: 12_345_678n });
    expect(chain.buyers.map((b) => b.index)).to.deep.equal([2, 3, 4, 5, 6, 7, 8, 10, 11]);
    expect(buyerIndexes(19).at(-1)).to.equal(21);
    for (const buyer of chain.buyers) {
      expect(privateKeyToAddress(buyer.privateKey)).to.equal(buyer.address);
      expect(BigInt(await rpc<string>(chain.rpcUrl, "eth_call", [{ to: chain.token, data: balanceOfData(buyer.address) }, "latest"]))).to.equal(12_345_678n);
    }
    const notBuyers: Address[] = [localAccount(0).address, localAccount(1).address, localAccount(9).address, localAccount(12).address];
    for (const address of notBuyers) {
      expect(BigInt(await rpc<string>(chain.rpcUrl, "eth_call", [{ to: chain.token, data: balanceOfData(address) }, "latest"]))).to.equal(0n);
    }
    // Hardhat's well-known account #2, to catch a derivation mistake.
    expect(chain.buyers[0]!.address).to.equal("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC");
  });

  it("gives buyers past the pre-funded accounts native gas too", async () => {
    const chain = await start({ network: "cronos-mainnet", buyers: 20, buyerBalance: 1n });
    const last = chain.buyers.at(-1)!;
    expect(last.index).to.equal(22);
    expect(BigInt(await rpc<string>(chain.rpcUrl, "eth_getBalance", [last.address, "latest"])) > 0n).to.equal(true);
  });

  it("mines a block on every transaction by default and on an interval with blockTimeMs", async () => {
    const auto = await start({ network: "cronos-testnet", buyers: 0 });
    const before = BigInt(await rpc<string>(auto.rpcUrl, "eth_blockNumber"));

    const timed = await start({ network: "cronos-testnet", buyers: 1, blockTimeMs: 100 });
    const first = BigInt(await rpc<string>(timed.rpcUrl, "eth_blockNumber"));
    await waitUntil("3 blocks at one per 100 ms", async () => BigInt(await rpc<string>(timed.rpcUrl, "eth_blockNumber")) >= first + 3n);
    // Meanwhile (three blocks of the other chain's interval), none on the chain that mines only on a transaction.
    expect(BigInt(await rpc<string>(auto.rpcUrl, "eth_blockNumber"))).to.equal(before);
    // No automine: a transaction waits in the pool for the next block.
    const hash = await rpc<string>(timed.rpcUrl, "eth_sendTransaction", [{ from: localAccount(0).address, to: localAccount(1).address, value: "0x1" }]);
    await waitUntil("the transaction mined by the next block", async () => (await rpc(timed.rpcUrl, "eth_getTransactionReceipt", [hash])) !== null);
  });

  it("at the Cronos pace (500 ms) lets blocks share a timestamp, so chain time keeps the wall clock's pace", async () => {
    const chain = await start({ network: "cronos-mainnet", buyers: 0, blockTimeMs: CRONOS_BLOCK_TIME_MS });
    const head = async () => (await chain.publicClient.getBlock({ blockTag: "latest" })).number;
    const first = await chain.publicClient.getBlock();
    // The chain's clock against the wall clock (the property itself, not a speed: a loaded machine only
    // gives the chain more wall time to stay within).
    const wallStart = Date.now();
    await waitUntil("8 blocks at one per 500 ms", async () => (await head()) >= first.number + 8n);
    const wallSeconds = (Date.now() - wallStart) / 1000;
    const last = await chain.publicClient.getBlock();
    // One second per block (the automine rule) would have moved chain time by at least 8 s in about 4 s.
    expect(Number(last.timestamp - first.timestamp)).to.be.at.most(Math.ceil(wallSeconds) + 1);
    for (let n = first.number + 1n; n <= last.number; n++) {
      const [a, b] = await Promise.all([chain.publicClient.getBlock({ blockNumber: n - 1n }), chain.publicClient.getBlock({ blockNumber: n })]);
      expect(b.timestamp >= a.timestamp).to.equal(true);
    }
  });

  it("fails with PortInUseError naming the port when the RPC port is taken, and frees its port on stop", async () => {
    const holder = await occupyPort();
    try {
      const error = await rejection(startLocalChain({ hre, network: "cronos-testnet", port: holder.port }), PortInUseError);
      expect(error.port).to.equal(holder.port);
      expect(error.role).to.equal("cronos-testnet-rpc");
      expect(error.message).to.contain(String(holder.port));
    } finally {
      await holder.release();
    }
    const chain = await startLocalChain({ hre, network: "cronos-testnet", port: 0, buyers: 0 });
    expect(await portIsFree(chain.port)).to.equal(false);
    await chain.stop();
    await chain.stop();
    expect(await portIsFree(chain.port)).to.equal(true);
  });
});
