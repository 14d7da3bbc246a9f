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

/**
 * The block each local chain's own history starts at: blocks 1 up to it are empty and 1 s apart, so
 * the chain stands past the block at which viem's `cronos` / `cronosTestnet` definitions say Multicall3
 * was created (mainnet 1,963,112, testnet 10,191,251) and block-pinned multicall reads pass viem's check.
 */
export const START_BLOCK: Readonly<Record<NetworkName, bigint>> = {
  "cronos-testnet": 10_200_000n,
  "cronos-mainnet": 2_000_000n,
};

/**
 * Milliseconds between blocks on the real Cronos EVM networks since the 2025 block-time change:
 * 500 ms (Cronos 2025 whitepaper, whitepaper.cronos.org: "500ms block times"; before mid-2025 it
 * was 5 to 6 s). `--block-time cronos` mines at this pace.
 */
export const CRONOS_BLOCK_TIME_MS = 500;

/**
 * How a local chain admits transactions and answers: `cronos`, as a Cronos v1.7 node (strict nonces, its
 * replacement rule and refusal texts, its log caps and `pending` views: docs/cronos-node.md); `ethereum`,
 * as EDR does on its own (geth's pool: gaps queued, `Known transaction`, `Replacement transaction underpriced`).
 */
export type NodeKind = "cronos" | "ethereum";
/** Every {@link NodeKind}. */
export const NODE_KINDS: readonly NodeKind[] = ["cronos", "ethereum"];
/** The local chains answer as the real networks' nodes do unless told otherwise. */
export const DEFAULT_NODE: NodeKind = "cronos";
