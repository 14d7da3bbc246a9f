import hre from "hardhat";
import type { Address } from "viem";
import { deployToken, fundAccounts, type TokenArtifact } from "../../src/chain/deploy.js";
import { NETWORKS, type NetworkName } from "../../src/protocol/networks.js";
import { closeAfter, once } from "./teardown.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).

/** When in-process test chains start; they then advance with the wall clock. */
export const TEST_CHAIN_START = "2026-06-01T00:00:00Z";

/** The hardhat network of each Cronos network name. */
export const HARDHAT_NETWORK: Record<NetworkName, string> = {
  "cronos-testnet": "cronosTestnet",
  "cronos-mainnet": "cronosMainnet",
};

/** The compiled BridgedUSDC. */
export async function tokenArtifact(): Promise<TokenArtifact> {
  const artifact = await hre.artifacts.readArtifact("BridgedUSDC");
  return { abi: artifact.abi, bytecode: artifact.bytecode as `0x${string}`, deployedBytecode: artifact.deployedBytecode as `0x${string}` };
}

/**
 * Opens a fresh local chain for `network` (338 or 25) with the token at its real address and funded buyers.
 * Closed when the test (or the suite whose `before` opened it) ends; `close` closes it sooner.
 */
export async function openChain(network: NetworkName, options: { fund?: bigint; buyers?: number; at?: Address | null } = {}) {
  // A fixed start date keeps the signed vectors (validBefore 2030-01-01) valid whenever the suite runs.
  const connection = await hre.network.create({ network: HARDHAT_NETWORK[network], override: { initialDate: TEST_CHAIN_START } });
  const close = closeAfter(`local chain ${network}`, once(() => connection.close()));
  const { viem } = connection;
  const publicClient = await viem.getPublicClient();
  const wallets = await viem.getWalletClients();
  const [deployer] = wallets;
  if (!deployer) throw new Error("no wallet clients on the local chain");
  const info = NETWORKS[network];
  const token = await deployToken({
    publicClient,
    walletClient: deployer,
    artifact: await tokenArtifact(),
    name: info.domain.name,
    symbol: info.tokenSymbol,
    version: info.domain.version,
    at: options.at === null ? undefined : (options.at ?? info.token),
  });
  const buyers = wallets.slice(2, 2 + (options.buyers ?? 3));
  await fundAccounts({
    publicClient,
    walletClient: deployer,
    token,
    accounts: buyers.map((wallet) => wallet.account.address),
    amount: options.fund ?? 1_000_000_000n,
  });
  const contract = await viem.getContractAt("BridgedUSDC", token);
  return { connection, viem, publicClient, wallets, deployer, buyers, token, contract, info, networkHelpers: connection.networkHelpers, close };
}
