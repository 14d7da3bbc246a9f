import { getAddress, type Address, type Chain, type Hex } from "viem";
import { cronos, cronosTestnet } from "viem/chains";
import type { EthereumProvider } from "hardhat/types/providers";
import type { NetworkName } from "../protocol/networks.js";

/** The viem chain definition that matches each network, by its export name in `viem/chains`. */
export const VIEM_CHAIN_NAME = { "cronos-testnet": "cronosTestnet", "cronos-mainnet": "cronos" } as const satisfies Record<NetworkName, string>;

/** The name of a viem chain definition the local chains match (`import { cronosTestnet } from "viem/chains"`). */
export type ViemChainName = (typeof VIEM_CHAIN_NAME)[NetworkName];

/** The viem chain definitions themselves. */
export const VIEM_CHAINS: Readonly<Record<ViemChainName, Chain>> = { cronosTestnet, cronos };

/** Where viem's Cronos definitions (and ethers, and most tooling) expect Multicall3. */
export const MULTICALL3_ADDRESS: Address = getAddress(cronos.contracts.multicall3.address);

/**
 * Puts Multicall3's runtime code at {@link MULTICALL3_ADDRESS} with `hardhat_setCode` unless code is
 * already there (a fork of a real network has the real one). Returns whether it placed it.
 */
export async function placeMulticall3(provider: EthereumProvider, runtimeCode: Hex): Promise<boolean> {
  const code = (await provider.request({ method: "eth_getCode", params: [MULTICALL3_ADDRESS, "latest"] })) as Hex;
  if (code !== "0x") return false;
  await provider.request({ method: "hardhat_setCode", params: [MULTICALL3_ADDRESS, runtimeCode] });
  return true;
}
