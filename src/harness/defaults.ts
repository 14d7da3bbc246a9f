import type { NetworkName } from "../protocol/networks.js";

// Plain constants, kept apart from chain.ts/stack.ts so the CLI can read them without loading Hardhat.

/** Default JSON-RPC port of each local chain. */
export const DEFAULT_RPC_PORT: Readonly<Record<NetworkName, number>> = {
  "cronos-testnet": 8545,
  "cronos-mainnet": 8546,
};

/** Default port of the local facilitator. */
export const DEFAULT_FACILITATOR_PORT = 8402;

/** Default number of funded buyers per chain. */
export const DEFAULT_BUYERS = 3;

/** Default USDC.e per buyer, in base units (1,000 USDC.e). */
export const DEFAULT_BUYER_BALANCE = 1_000_000_000n;

/** Most buyers a chain will fund (keeps start-up bounded). */
export const MAX_BUYERS = 100;
