import { expect } from "chai";
import { createPublicClient, createWalletClient, http, type Address, type Chain, type Hex, type PublicClient, type TransactionReceipt } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { cronos, cronosTestnet } from "viem/chains";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { createChainReader } from "../../src/conformance/chain.js";
import { expectSettlementOnChain as checkSettlementOnChain, type SettlementOnChain } from "../../src/conformance/settlement.js";
import { localAccount } from "../../src/harness/accounts.js";
import { startLocalChain, type LocalChain, type LocalChainOptions } from "../../src/harness/chain.js";
import type { LocalStack } from "../../src/harness/stack.js";
import type { NetworkName } from "../../src/protocol/networks.js";
import { rpc } from "./rpc.js";
import { closeAfter } from "./teardown.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// A local chain over its JSON-RPC URL (as any other process would reach it): balances, clock, token writes, settlements.

/** A local chain over HTTP (`startLocalChain`), stopped with the scope that starts it (test/helpers/teardown.ts). */
export async function startTestChain(options: LocalChainOptions): Promise<LocalChain> {
  const chain = await startLocalChain(options);
  // Its stop runs once, however often it is called.
  closeAfter(`local chain ${chain.network} at ${chain.rpcUrl}`, () => chain.stop());
  return chain;
}

/** A transaction hash as the facilitator answers it. */
export const TX_HASH = /^0x[0-9a-f]{64}$/;

const VIEM_CHAIN: Record<NetworkName, Chain> = { "cronos-testnet": cronosTestnet, "cronos-mainnet": cronos };

const clients = new Map<string, PublicClient>();

/** A viem client over HTTP JSON-RPC. */
export function rpcClient(rpcUrl: string): PublicClient {
  let client = clients.get(rpcUrl);
  if (!client) {
    client = createPublicClient({ transport: http(rpcUrl), pollingInterval: 20, cacheTime: 0 }) as PublicClient;
    clients.set(rpcUrl, client);
  }
  return client;
}

/** USDC.e balance of `account`, read over `rpcUrl`. */
export function tokenBalance(rpcUrl: string, token: Address, account: Address): Promise<bigint> {
  return rpcClient(rpcUrl).readContract({ address: token, abi: tokenAbi, functionName: "balanceOf", args: [account] });
}

/** USDC.e balances of several accounts. */
export function tokenBalances(rpcUrl: string, token: Address, accounts: readonly Address[]): Promise<bigint[]> {
  return Promise.all(accounts.map((account) => tokenBalance(rpcUrl, token, account)));
}

/** The latest block's timestamp (the chain's clock, which verify and the token use). */
export async function chainTime(rpcUrl: string): Promise<bigint> {
  return (await rpcClient(rpcUrl).getBlock({ blockTag: "latest" })).timestamp;
}

/** Moves the chain's clock forward by `seconds` and mines a block at the new time. */
export async function increaseTime(rpcUrl: string, seconds: number): Promise<void> {
  await rpc(rpcUrl, "evm_increaseTime", [seconds]);
  await rpc(rpcUrl, "evm_mine", []);
}

type WriteFunction = "pause" | "unpause" | "blacklist" | "unBlacklist" | "transfer" | "cancelAuthorization";

/**
 * Sends a token transaction signed by `privateKey` over `rpcUrl` and waits for it to be mined.
 * The owner (pauser, blacklister) is Hardhat account #0: {@link ownerKey}.
 */
export async function writeToken(
  network: NetworkName,
  rpcUrl: string,
  token: Address,
  privateKey: Hex,
  functionName: WriteFunction,
  args: readonly unknown[] = [],
): Promise<TransactionReceipt> {
  const wallet = createWalletClient({ account: privateKeyToAccount(privateKey), chain: VIEM_CHAIN[network], transport: http(rpcUrl) });
  const hash = await wallet.writeContract({ address: token, abi: tokenAbi, functionName, args } as never);
  const receipt = await rpcClient(rpcUrl).waitForTransactionReceipt({ hash, pollingInterval: 20 });
  expect(receipt.status, `${functionName} mined`).to.equal("success");
  return receipt;
}

/** Hardhat account #0's key: deployer and owner (pauser, blacklister) of the local tokens. A PUBLIC key, LOCAL-ONLY. */
export function ownerKey(): Hex {
  return localAccount(0).privateKey;
}

/** The token events of a settlement receipt, decoded (the conformance catalog's reading). */
export { tokenEvents } from "../../src/conformance/chain.js";

/**
 * Checks a settlement on chain with the conformance catalog's own check: the receipt succeeded, was sent
 * by the relayer to the token, and holds exactly AuthorizationUsed(from, nonce) then Transfer(from, to,
 * value); balances moved by it. Returns the receipt and its block's ISO timestamp.
 */
export function expectSettlementOnChain(
  stack: LocalStack,
  network: NetworkName,
  txHash: Hex,
  expected: { from: Address; to: Address; value: bigint; nonce: Hex },
): Promise<SettlementOnChain> {
  const info = stack.networks[network]!;
  return checkSettlementOnChain(createChainReader(info.rpcUrl), { token: info.token, txHash, ...expected, relayers: [stack.relayer] });
}
