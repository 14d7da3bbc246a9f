import {
  getAddress,
  maxUint256,
  type Abi,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
  type Transport,
  type WalletClient,
  type Account,
} from "viem";
import { tokenAbi, tokenInitializeAbi } from "./token-abi.js";

/** The compiled BridgedUSDC contract (from Hardhat's artifacts). */
export interface TokenArtifact {
  abi: Abi;
  bytecode: Hex;
  deployedBytecode: Hex;
}

/** Parameters of {@link deployToken}. */
export interface DeployTokenParameters {
  publicClient: PublicClient;
  /** Signs the set-up transactions; becomes the token's owner, minter admin, pauser and blacklister. */
  walletClient: WalletClient<Transport, Chain | undefined, Account>;
  artifact: TokenArtifact;
  name: string;
  symbol: string;
  /** EIP-712 domain version. */
  version: string;
  decimals?: number;
  /**
   * Where to put the token. Given: the runtime code is placed there with `hardhat_setCode`
   * (a local development chain only) and initialized. Omitted: a normal deployment at a fresh address.
   */
  at?: Address;
}

/** Puts a BridgedUSDC on a local chain, initialized, and returns its address. */
export async function deployToken(parameters: DeployTokenParameters): Promise<Address> {
  const { publicClient, walletClient, artifact } = parameters;
  let address: Address;
  if (parameters.at) {
    address = getAddress(parameters.at);
    await publicClient.request({
      method: "hardhat_setCode" as never,
      params: [address, artifact.deployedBytecode] as never,
    });
  } else {
    const hash = await walletClient.deployContract({ abi: artifact.abi, bytecode: artifact.bytecode, chain: walletClient.chain });
    const receipt = await publicClient.waitForTransactionReceipt({ hash, pollingInterval: 20 });
    if (!receipt.contractAddress) throw new Error("BridgedUSDC deployment produced no contract address");
    address = receipt.contractAddress;
  }
  const hash = await walletClient.writeContract({
    address,
    abi: tokenInitializeAbi,
    functionName: "initialize",
    args: [parameters.name, parameters.symbol, parameters.version, parameters.decimals ?? 6, walletClient.account.address],
    chain: walletClient.chain,
  });
  await publicClient.waitForTransactionReceipt({ hash, pollingInterval: 20 });
  return address;
}

/** Parameters of {@link fundAccounts}. */
export interface FundAccountsParameters {
  publicClient: PublicClient;
  /** The token's master minter (the owner for BridgedUSDC); it makes itself a minter and mints. */
  walletClient: WalletClient<Transport, Chain | undefined, Account>;
  token: Address;
  accounts: readonly Address[];
  /** Amount per account, in base units. */
  amount: bigint;
}

/** Mints `amount` to each account. Works on BridgedUSDC and on a fork of real FiatToken (as its master minter). */
export async function fundAccounts(parameters: FundAccountsParameters): Promise<void> {
  const { publicClient, walletClient, token } = parameters;
  const minter = walletClient.account.address;
  const configure = await walletClient.writeContract({
    address: token,
    abi: tokenAbi,
    functionName: "configureMinter",
    args: [minter, maxUint256],
    chain: walletClient.chain,
  });
  await publicClient.waitForTransactionReceipt({ hash: configure, pollingInterval: 20 });
  for (const account of parameters.accounts) {
    const hash = await walletClient.writeContract({
      address: token,
      abi: tokenAbi,
      functionName: "mint",
      args: [account, parameters.amount],
      chain: walletClient.chain,
    });
    await publicClient.waitForTransactionReceipt({ hash, pollingInterval: 20 });
  }
}
