import type { Address, Hex } from "viem";
import type { NetworkName } from "../../protocol/networks.js";
import type { SettleResponse, VerifyResponse } from "../../protocol/schemas.js";

// The port through which the local stack lends the dashboard its buyers and a way to pay. The
// facilitator only defines it: the implementation signs with buyer keys (src/harness/playground.ts),
// which the facilitator must never hold. A production facilitator is given none, so it has no such routes.

/** What the try-it panel can ask for: a payment, or one that provokes a refusal. */
export const TRY_SCENARIOS = ["pay", "expired", "wrongAmount", "replay"] as const;
export type TryScenario = (typeof TRY_SCENARIOS)[number];

/** A funded local buyer. The key is one of Hardhat's PUBLIC test keys: LOCAL-ONLY. */
export interface PlaygroundBuyer {
  network: NetworkName;
  address: Address;
  privateKey: Hex;
  /** USDC.e balance in base units (decimal string), read from the chain now. */
  balance: string;
}

/** One payment to try. */
export interface TryRequest {
  network: NetworkName;
  buyer: Address;
  /** Base units of USDC.e. */
  amount: bigint;
  scenario: TryScenario;
}

/** One call the payment made to the facilitator, with its answer. */
export type TryStep = { route: "verify"; answer: VerifyResponse } | { route: "settle"; answer: SettleResponse };

/** The local stack's extras for the dashboard. */
export interface DashboardPlayground {
  /** The local chains' JSON-RPC URLs, shown in full. */
  rpcUrls: Partial<Record<NetworkName, string>>;
  buyers(): Promise<PlaygroundBuyer[]>;
  /** Signs and pays through the facilitator's own endpoints (verify, then settle when valid). */
  pay(request: TryRequest): Promise<TryStep[]>;
}
