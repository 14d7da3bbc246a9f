import type { Address } from "viem";

/** One token on one chain. */
export interface TokenScope {
  chainId: number;
  token: Address;
}
