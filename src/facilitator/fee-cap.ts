// Each network's fee cap, settled at start-up from the chain's fees and MAX_FEE_PER_GAS_GWEI.
import { formatGwei, type PublicClient } from "viem";
import { chainMinimum, defaultFeeCap, readChainFees, type ChainFees } from "../chain/fees.js";
import { describeRpcFailure } from "../chain/rpc-url.js";
import { ENV_PREFIX, type NetworkConfig } from "./config/index.js";
import { StartupError } from "./startup-error.js";

/** A network's fee cap, and where it comes from. */
export interface NetworkFeeCap {
  capWei: bigint;
  /** True when MAX_FEE_PER_GAS_GWEI is unset: the cap follows the chain's fees at start-up. */
  followsChain: boolean;
  /** What the chain asked at start-up. */
  chain: ChainFees;
}

/**
 * The fee cap of `network`: `operatorCapWei` (MAX_FEE_PER_GAS_GWEI) when set, else one that follows the chain
 * ({@link defaultFeeCap}). A cap set under what the chain asks at the least now stops start-up naming the
 * variable: nothing could be sent, every settle would answer 503.
 */
export async function settleFeeCap(client: PublicClient, network: NetworkConfig, operatorCapWei: bigint | undefined): Promise<NetworkFeeCap> {
  let chain: ChainFees;
  try {
    chain = await readChainFees(client);
  } catch (error) {
    throw new StartupError(`${network.network}: ${ENV_PREFIX[network.network]}_RPC_URL: the chain's fees cannot be read (${describeRpcFailure(error)})`, { cause: error });
  }
  if (operatorCapWei === undefined) return { capWei: defaultFeeCap(chain), followsChain: true, chain };
  const minimum = chainMinimum(chain);
  if (operatorCapWei < minimum) {
    const what = chain.baseFeeWei !== undefined ? "its latest base fee" : "its gas price";
    throw new StartupError(
      `${network.network}: MAX_FEE_PER_GAS_GWEI: ${formatGwei(operatorCapWei)} gwei is under what the chain asks at the least now (${formatGwei(minimum)} gwei per gas, ${what}): nothing could be sent; raise it, or unset it for a cap that follows the chain`,
    );
  }
  return { capWei: operatorCapWei, followsChain: false, chain };
}
