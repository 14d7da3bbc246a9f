import type { Address, Hex, PublicClient } from "viem";
import type { ChainState } from "../chain/state.js";
import type { SignerRecovery } from "../chain/recovery-pool.js";
import type { ChainHistory, TokenIndex } from "../state/index.js";
import type { Relayer } from "../chain/relayer/index.js";
import type { NetworkName } from "../protocol/networks.js";
import type { SettlementLogger } from "./logger.js";
import type { Ledger } from "../ledger/types.js";
import type { SettlementService } from "./service.js";
import type { SettlementChain } from "./chain.js";
import type { StageClock } from "./stages.js";
import { KitError } from "../protocol/errors.js";

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
  payments: SettlementChain;
  /** The token's EIP-712 domain separator on this chain. */
  separator: Hex;
}

/** The injected dependencies of verify and settle; `L` the logger (the facilitator passes its own, with `child`). */
export interface FacilitatorContext<L extends SettlementLogger = SettlementLogger> {
  networks: ReadonlyMap<NetworkName, NetworkRuntime>;
  settleMarginSeconds: number;
  /** verify may reuse a chain head read this recently (settle always reads a fresh one). */
  headCacheMs: number;
  confirmations: number;
  settleTimeoutMs: number;
  pollingIntervalMs: number;
  /** What the relayer may pay for: gas caps and revert penalties (balance reservations are ledger claims). */
  relayerSafety: RelayerSafety;
  /** The settlement ledger: claims, reservations, penalties, status (never touched by verify). */
  ledger: Ledger;
  /** Sends claimed settlements (or hands them to a relayer key holder) and waits for their outcome. */
  settlements: SettlementService;
  logger: L;
  /** Recovers payers' signatures on every core (a {@link RecoveryPool}); absent: on the calling thread. */
  recovery?: SignerRecovery;
  /** Times verify's stages on the CPU clock (`METRICS_VERIFY_STAGES`); absent, as by default, nothing is timed. */
  stages?: StageClock;
  /** Measurement hooks (metrics); optional. */
  observe?: {
    confirmationWait(network: string, seconds: number): void;
    rpcError(network: string): void;
    /** Gas the relayer paid for a settlement that reverted on chain. */
    revertedGas(network: string, gas: bigint): void;
    /** Where a verify's chain state came from: the token state index, or reads of the chain. */
    verifyStateSource?(network: string, source: "index" | "chain"): void;
  };
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

/**
 * A fault (RPC down, the ledger unreachable): not a protocol outcome. The HTTP layer answers it by
 * route, as decided: verify 500; settle 503 (thrown only before anything was sent).
 */
export class FacilitatorFault extends KitError<"facilitator_fault"> {
  override name = "FacilitatorFault";
  constructor(message: string, options?: ErrorOptions) {
    super("facilitator_fault", message, options);
  }
}

/**
 * A settle refused because the payer (whose signature was proven) spent its settle quota: answered
 * 429 with `Retry-After`. Nothing was claimed or sent.
 */
export class PayerQuotaExceeded extends KitError<"payer_quota_exceeded"> {
  override name = "PayerQuotaExceeded";
  constructor(readonly retryAfterSeconds: number) {
    super("payer_quota_exceeded", `the payer's settle quota is spent; retry in ${retryAfterSeconds} s`);
  }
}
