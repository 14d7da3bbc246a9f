import { expect } from "chai";
import hre from "hardhat";
import { createPublicClient, decodeFunctionData, http, multicall3Abi, type Chain, type Hex } from "viem";
import * as viemChains from "viem/chains";
import { cronos, cronosTestnet } from "viem/chains";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { startLocalChain, START_BLOCK, type LocalChain } from "../../src/harness/chain.js";
import { MULTICALL3_ADDRESS, VIEM_CHAIN_NAME } from "../../src/harness/multicall3.js";
import { NETWORKS, type NetworkName } from "../../src/protocol/networks.js";

const CHAINS: ReadonlyArray<[NetworkName, Chain]> = [
  ["cronos-testnet", cronosTestnet],
  ["cronos-mainnet", cronos],
];

/** A viem client over HTTP to the local RPC, built on viem's own chain definition, that records each JSON-RPC request it sends. */
function clientFor(viemChain: Chain, rpcUrl: string, options: { multicallBatch?: boolean } = {}) {
  const bodies: unknown[] = [];
  const client = createPublicClient({
    chain: viemChain,
    transport: http(rpcUrl, {
      retryCount: 0,
      async onFetchRequest(request) {
        bodies.push(JSON.parse(await request.clone().text()));
      },
    }),
    ...(options.multicallBatch ? { batch: { multicall: true } } : {}),
  });
  return { client, bodies };
}

describe("the local chains through viem's cronos and cronosTestnet definitions", function () {
  const chains = new Map<NetworkName, LocalChain>();
  /** The wall clock (seconds) when the chains were started. */
  let startedAt = 0;
  before(async () => {
    startedAt = Math.floor(Date.now() / 1000);
    const started = await Promise.all(CHAINS.map(([network]) => startLocalChain({ hre, network, port: 0, buyers: 2, buyerBalance: 2_500_000n })));
    for (const chain of started) chains.set(chain.network, chain);
  });
  after(async () => {
    await Promise.all([...chains.values()].map((chain) => chain.stop()));
  });

  it("name the viem chain definition that matches each network", () => {
    for (const [network, viemChain] of CHAINS) {
      const chain = chains.get(network)!;
      expect(chain.viemChain).to.equal(VIEM_CHAIN_NAME[network]);
      expect(viemChains[chain.viemChain]).to.equal(viemChain);
      expect(viemChain.id).to.equal(NETWORKS[network].chainId);
      expect(viemChain.contracts?.multicall3?.address).to.equal(MULTICALL3_ADDRESS);
    }
  });

  it("stand past the block viem says Multicall3 was created at, on a history of empty blocks 1 s apart that ends about now", async () => {
    for (const [network, viemChain] of CHAINS) {
      const { client } = clientFor(viemChain, chains.get(network)!.rpcUrl);
      const created = BigInt(viemChain.contracts!.multicall3!.blockCreated!);
      expect(START_BLOCK[network] > created, `${network} starts past ${created}`).to.equal(true);
      const latest = await client.getBlock();
      expect(latest.number >= START_BLOCK[network]).to.equal(true);
      const [first, lastEmpty] = await Promise.all([client.getBlock({ blockNumber: 1n }), client.getBlock({ blockNumber: START_BLOCK[network] - 1n })]);
      expect(lastEmpty.timestamp - first.timestamp).to.equal(START_BLOCK[network] - 2n);
      expect(lastEmpty.transactions).to.deep.equal([]);
      // Chain time still follows the wall clock (what the facilitator's validity checks read): between the
      // chains' start and now, give or take a minute (however long the machine took in between).
      expect(Number(latest.timestamp)).to.be.within(startedAt - 60, Math.ceil(Date.now() / 1000) + 60);
    }
  });

  it("multicall reads the token's name and a buyer's balance, both successes with the right values", async () => {
    for (const [network, viemChain] of CHAINS) {
      const chain = chains.get(network)!;
      const { client, bodies } = clientFor(viemChain, chain.rpcUrl);
      const results = await client.multicall({
        contracts: [
          { address: chain.token, abi: tokenAbi, functionName: "name" },
          { address: chain.token, abi: tokenAbi, functionName: "balanceOf", args: [chain.buyers[1]!.address] },
        ],
      });
      expect(results).to.deep.equal([
        { status: "success", result: NETWORKS[network].domain.name },
        { status: "success", result: 2_500_000n },
      ]);
      expect(bodies).to.have.length(1);
      expect(bodies[0]).to.deep.include({ method: "eth_call" });
    }
  });

  it("a client with batch.multicall reads several values in ONE eth_call, to Multicall3's aggregate3", async () => {
    for (const [network, viemChain] of CHAINS) {
      const chain = chains.get(network)!;
      const { client, bodies } = clientFor(viemChain, chain.rpcUrl, { multicallBatch: true });
      const read = <F extends "name" | "symbol" | "decimals" | "version">(functionName: F) => client.readContract({ address: chain.token, abi: tokenAbi, functionName });
      const values = await Promise.all([
        read("name"),
        read("symbol"),
        read("decimals"),
        read("version"),
        client.readContract({ address: chain.token, abi: tokenAbi, functionName: "balanceOf", args: [chain.buyers[0]!.address] }),
      ]);
      const info = NETWORKS[network];
      expect(values).to.deep.equal([info.domain.name, info.tokenSymbol, 6, info.domain.version, 2_500_000n]);
      expect(bodies, JSON.stringify(bodies)).to.have.length(1);
      const [request] = bodies as Array<{ method: string; params: [{ to: string; data: Hex }, string] }>;
      expect(request!.method).to.equal("eth_call");
      expect(request!.params[0].to.toLowerCase()).to.equal(MULTICALL3_ADDRESS.toLowerCase());
      const call = decodeFunctionData({ abi: multicall3Abi, data: request!.params[0].data });
      expect(call.functionName).to.equal("aggregate3");
      expect(call.args![0]).to.have.length(5);
    }
  });

  it("reads pinned to the current block work, through multicall and through a batching client", async () => {
    for (const [network, viemChain] of CHAINS) {
      const chain = chains.get(network)!;
      const { client } = clientFor(viemChain, chain.rpcUrl, { multicallBatch: true });
      const blockNumber = await client.getBlockNumber({ cacheTime: 0 });
      const results = await client.multicall({
        blockNumber,
        contracts: [
          { address: chain.token, abi: tokenAbi, functionName: "balanceOf", args: [chain.buyers[0]!.address] },
          { address: MULTICALL3_ADDRESS, abi: multicall3Abi, functionName: "getCurrentBlockTimestamp" },
        ],
      });
      const block = await client.getBlock({ blockNumber });
      expect(results).to.deep.equal([
        { status: "success", result: 2_500_000n },
        { status: "success", result: block.timestamp },
      ]);
      const pinned = await Promise.all([
        client.readContract({ address: chain.token, abi: tokenAbi, functionName: "name", blockNumber }),
        client.readContract({ address: chain.token, abi: tokenAbi, functionName: "totalSupply", blockNumber }),
      ]);
      expect(pinned).to.deep.equal([NETWORKS[network].domain.name, 5_000_000n]);
    }
  });

  it("Multicall3 answers at viem's creation block too (the history carries it)", async () => {
    for (const [network, viemChain] of CHAINS) {
      const { client } = clientFor(viemChain, chains.get(network)!.rpcUrl);
      const blockNumber = BigInt(viemChain.contracts!.multicall3!.blockCreated!);
      const [result] = await client.multicall({ blockNumber, contracts: [{ address: MULTICALL3_ADDRESS, abi: multicall3Abi, functionName: "getCurrentBlockTimestamp" }] });
      expect(result).to.deep.equal({ status: "success", result: (await client.getBlock({ blockNumber })).timestamp });
    }
  });
});
