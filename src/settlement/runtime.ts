// What a network is to the facilitator at run time: its settings, clients, state, relayer and chain reads.
import type { Address, Hex, PublicClient } from "viem";
import type { ChainState } from "../chain/cached-reads.js";
import type { ChainHistory, TokenIndex } from "../state/index.js";
import type { Relayer } from "../chain/relayer/index.js";
import type { NetworkName } from "../protocol/networks.js";
import type { PaymentReads } from "./payment-reads.js";

/** One network the facilitator serves. */
export interface NetworkConfig {
  network: NetworkName;
  chainId: number;
  /**
   * JSON-RPC endpoints in order of preference (`CRONOS_*_RPC_URL`, comma-separated): requests go to the
   * first that answers (docs/operations.md, "RPC failover"). Empty when the caller injects a transport
   * (embedded local chain).
   */
  rpcUrls: string[];
  token: Address;
  /** The EIP-712 domain the token must report on chain. */
  domain: { name: string; version: string };
}

/** Everything the facilitator holds for one network, built at start-up. */
export interface NetworkRuntime {
  config: NetworkConfig;
  client: PublicClient;
  state: ChainState;
  /** The token's state kept from its logs (`STATE_INDEX`); verify asks it first. Absent when off. */
  index?: TokenIndex;
  /** Binds the ledger's rows of this chain to its history (set once the ledger is open). */
  history?: ChainHistory;
  relayer: Relayer;
  /** The chain reads of the payment decision and the reconciler (receipts, the authorization lookup). */
  paymentReads: PaymentReads;
  /** The token's EIP-712 domain separator on this chain. */
  separator: Hex;
}

/** The bounds on what a settlement can cost the relayer (see docs/operations.md, threat model). */
export interface RelayerSafety {
  /** A settlement whose gas estimate exceeds this is refused before sending; the estimate searches no further. */
  maxSettleGas: bigint;
  /** Gas limit of the ERC-1271 `isValidSignature` call; a wallet that needs more has an invalid signature. */
  erc1271GasLimit: bigint;
  /** A payer whose settlement reverted on chain (its authorization used by nothing else) is refused this long (chain seconds). */
  revertPenaltySeconds: number;
}
