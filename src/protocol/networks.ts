import type { Address } from "viem";

/** A network the kit knows: the chain, its USDC.e token and the token's EIP-712 domain. */
export interface NetworkInfo {
  /** Canonical x402 network string. */
  readonly network: NetworkName;
  readonly chainId: number;
  /** The USDC.e token contract on the real network. */
  readonly token: Address;
  readonly tokenSymbol: string;
  readonly tokenDecimals: number;
  /** EIP-712 domain of the token (`name()` / `version()` on chain). */
  readonly domain: { readonly name: string; readonly version: string };
}

export const CRONOS_TESTNET = "cronos-testnet";
export const CRONOS_MAINNET = "cronos-mainnet";
/** The docs' seller example calls mainnet plain `cronos`; accepted on input as an alias of `cronos-mainnet`. */
export const CRONOS_MAINNET_ALIAS = "cronos";

export type NetworkName = typeof CRONOS_TESTNET | typeof CRONOS_MAINNET;

/** The real Cronos networks (facts from the public Cronos documentation and the official client). */
export const NETWORKS: Readonly<Record<NetworkName, NetworkInfo>> = {
  [CRONOS_TESTNET]: {
    network: CRONOS_TESTNET,
    chainId: 338,
    token: "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0",
    tokenSymbol: "devUSDC.e",
    tokenDecimals: 6,
    domain: { name: "Bridged USDC (Stargate)", version: "1" },
  },
  [CRONOS_MAINNET]: {
    network: CRONOS_MAINNET,
    chainId: 25,
    token: "0xf951eC28187D9E5Ca673Da8FE6757E6f0Be5F77C",
    tokenSymbol: "USDC.e",
    tokenDecimals: 6,
    domain: { name: "Bridged USDC (Stargate)", version: "2" },
  },
};

export const NETWORK_NAMES: readonly NetworkName[] = [CRONOS_TESTNET, CRONOS_MAINNET];

/** Maps a network string as sent on the wire (including the `cronos` alias) to its canonical name. */
export function canonicalNetwork(network: string): NetworkName | undefined {
  if (network === CRONOS_MAINNET_ALIAS) return CRONOS_MAINNET;
  return (NETWORK_NAMES as readonly string[]).includes(network) ? (network as NetworkName) : undefined;
}
