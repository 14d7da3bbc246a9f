import type { Address, LocalAccount } from "viem";
import type { NetworkName } from "../protocol/networks.js";
import type { ChainReader } from "./chain.js";

/** One network of the facilitator under test, with what the run knows about it. */
export interface Target {
  /** The canonical network. */
  network: NetworkName;
  chainId: number;
  /** The USDC.e contract the facilitator must accept on this network. */
  token: Address;
  /** The token's EIP-712 domain (read from the chain when an RPC is given). */
  domain: { name: string; version: string };
  /** The network's JSON-RPC, when given. */
  chain?: ChainReader;
  /** A funded buyer, when given. Its key never leaves this object. */
  buyer?: LocalAccount;
  /** Who payments go to: `--pay-to`, else the buyer itself (a payment to oneself moves nothing), else a fixed address. */
  payTo: Address;
  /** The facilitator's relayer addresses, when known: a settlement must be sent by one of them. */
  relayers?: readonly Address[];
}

/** The smallest payment: 1 base unit = 0.000001 USDC.e. */
export const SMALLEST_AMOUNT = 1n;
