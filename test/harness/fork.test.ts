import { createServer, type AddressInfo } from "node:net";
import { expect } from "chai";
import hre from "hardhat";
import { decodeFunctionResult, encodeFunctionData } from "viem";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { NETWORKS } from "../../src/protocol/networks.js";
import { localAccount } from "../../src/harness/accounts.js";
import { startLocalChain, type LocalChain } from "../../src/harness/chain.js";
import { serveJsonRpc } from "../../src/harness/rpc-bridge.js";
import { loadKitArtifact } from "../../src/harness/hardhat.js";
import { MULTICALL3_ADDRESS } from "../../src/harness/multicall3.js";
import { balanceOfData, rpc } from "../helpers/rpc.js";

async function balanceOf(rpcUrl: string, token: string, address: string): Promise<bigint> {
  return BigInt(await rpc<string>(rpcUrl, "eth_call", [{ to: token, data: balanceOfData(address) }, "latest"]));
}

describe("local chain forking another node (src/harness/chain.ts)", function () {
  let origin: LocalChain | undefined;
  let fork: LocalChain | undefined;
  afterEach(async () => {
    await fork?.stop();
    await origin?.stop();
    fork = origin = undefined;
  });

  it("uses the forked token as is, keeps forked balances and funds new buyers via the master minter", async () => {
    // The "remote" node: a chain of our own on an ephemeral port, token deployed, two buyers funded.
    origin = await startLocalChain({ hre, network: "cronos-testnet", port: 0, buyers: 2, buyerBalance: 9_000_000n });
    const token = NETWORKS["cronos-testnet"].token;
    // Something only the origin has, to prove the fork reads the origin's state.
    const marker = localAccount(15).address;
    await origin.fund([marker], 424_242n);

    const originHead = await rpc<{ number: string; hash: string }>(origin.rpcUrl, "eth_getBlockByNumber", ["latest", false]);
    fork = await startLocalChain({ hre, network: "cronos-testnet", port: 0, forkUrl: origin.rpcUrl, buyers: 3, buyerBalance: 7_000_000n });
    // Forked at the node's latest block (not EDR's default of 128 blocks back).
    expect((await rpc<{ hash: string }>(fork.rpcUrl, "eth_getBlockByNumber", [originHead.number, false])).hash).to.equal(originHead.hash);
    expect(fork.tokenDeployed).to.equal(false);
    // The origin has Multicall3 at the canonical address: the fork uses it as is.
    expect(fork.multicall3Deployed).to.equal(false);
    expect(await rpc(fork.rpcUrl, "eth_getCode", [MULTICALL3_ADDRESS, "latest"])).to.equal(await rpc(origin.rpcUrl, "eth_getCode", [MULTICALL3_ADDRESS, "latest"]));
    expect(fork.forkUrl).to.equal(origin.rpcUrl);
    expect(fork.rpcUrl).to.not.equal(origin.rpcUrl);
    expect(await rpc(fork.rpcUrl, "eth_chainId")).to.equal("0x152");
    expect(fork.domain).to.deep.equal(NETWORKS["cronos-testnet"].domain);
    const masterMinter = decodeFunctionResult({
      abi: tokenAbi,
      functionName: "masterMinter",
      data: await rpc<`0x${string}`>(fork.rpcUrl, "eth_call", [{ to: token, data: encodeFunctionData({ abi: tokenAbi, functionName: "masterMinter" }) }, "latest"]),
    });
    expect(masterMinter).to.equal(localAccount(0).address);

    const [b2, b3, b4] = fork.buyers;
    expect(await balanceOf(fork.rpcUrl, token, marker)).to.equal(424_242n);
    // Already above the target: kept, never taken away.
    expect(await balanceOf(fork.rpcUrl, token, b2!.address)).to.equal(9_000_000n);
    expect(await balanceOf(fork.rpcUrl, token, b3!.address)).to.equal(9_000_000n);
    // New on the fork: minted there, through the impersonated master minter.
    expect(await balanceOf(fork.rpcUrl, token, b4!.address)).to.equal(7_000_000n);
    expect(await balanceOf(origin.rpcUrl, token, b4!.address)).to.equal(0n);

    // More funding later works too, and stays on the fork.
    const late = localAccount(30).address;
    await fork.fund([late], 123n);
    expect(await balanceOf(fork.rpcUrl, token, late)).to.equal(123n);
    expect(await balanceOf(origin.rpcUrl, token, late)).to.equal(0n);
  });

  it("places the token itself when the forked node has none at the address", async () => {
    // An empty node (no token anywhere), served by the same JSON-RPC bridge.
    const empty = await hre.network.create({ network: "cronosMainnet" });
    const bridge = await serveJsonRpc(empty.provider, { port: 0, role: "cronos-mainnet-rpc" });
    try {
      fork = await startLocalChain({ hre, network: "cronos-mainnet", port: 0, forkUrl: bridge.url, buyers: 1, buyerBalance: 5n });
      expect(fork.tokenDeployed).to.equal(true);
      expect(await balanceOf(fork.rpcUrl, fork.token, fork.buyers[0]!.address)).to.equal(5n);
      expect(await rpc(bridge.url, "eth_getCode", [fork.token, "latest"])).to.equal("0x");
      // Multicall3 is placed on the fork, which keeps the forked node's height (no history is mined).
      expect(fork.multicall3Deployed).to.equal(true);
      expect(await rpc(fork.rpcUrl, "eth_getCode", [MULTICALL3_ADDRESS, "latest"])).to.equal((await loadKitArtifact(hre, "Multicall3")).deployedBytecode);
      expect(await rpc(bridge.url, "eth_getCode", [MULTICALL3_ADDRESS, "latest"])).to.equal("0x");
      expect(BigInt(await rpc<string>(fork.rpcUrl, "eth_blockNumber")) < 100n).to.equal(true);
    } finally {
      await fork?.stop();
      fork = undefined;
      await bridge.close();
      await empty.close();
    }
  });

  it("fails on its first request, naming the URL, when the node to fork hangs up without answering", async () => {
    // A node that accepts connections and resets each one unanswered, held for the whole test: its port
    // cannot be freed and taken by another process meanwhile (a closed port could be).
    const silent = createServer((socket) => socket.resetAndDestroy());
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    let connections = 0;
    silent.on("connection", () => connections++);
    try {
      const error = await startLocalChain({ hre, network: "cronos-testnet", port: 0, forkUrl: url }).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      // The kit's own probe (one eth_chainId request) failed, rather than EDR's fork retrying for ~50 s.
      expect(error?.message).to.equal(`cronos-testnet: cannot fork ${url}: ECONNRESET`);
      expect(connections).to.equal(1);
    } finally {
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});
