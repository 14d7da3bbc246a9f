import type { Hex, PublicClient } from "viem";
import type { ChainState } from "../chain/state.js";
import type { Relayer } from "../chain/relayer.js";
import type { NetworkName } from "../protocol/networks.js";
import type { NetworkConfig } from "./config.js";
import type { InFlightGuard } from "./in-flight.js";
import type { Logger } from "./logger.js";

/** Everything the facilitator holds for one network, built at start-up. */
export interface NetworkRuntime {
  config: NetworkConfig;
  client: PublicClient;
  state: ChainState;
  relayer: Relayer;
  /** The token's EIP-712 domain separator on this chain. */
  separator: Hex;
}

/** The injected dependencies of verify and settle. */
export interface FacilitatorContext {
  networks: ReadonlyMap<NetworkName, NetworkRuntime>;
  settleMarginSeconds: number;
  /** verify may reuse a chain head read this recently (settle always reads a fresh one). */
  headCacheMs: number;
  confirmations: number;
  settleTimeoutMs: number;
  pollingIntervalMs: number;
  logLookbackBlocks: number;
  inFlight: InFlightGuard;
  logger: Logger;
  /** Measurement hooks (metrics); optional. */
  observe?: {
    confirmationWait(network: string, seconds: number): void;
    rpcError(network: string): void;
  };
}

/** A fault (RPC down, a bug): not a protocol outcome. The HTTP layer answers `status`. */
export class FacilitatorFault extends Error {
  override name = "FacilitatorFault";
  constructor(
    message: string,
    readonly status: 500 | 503,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
