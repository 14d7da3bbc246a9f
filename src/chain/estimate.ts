import { numberToHex, type Address, type Hex, type PublicClient } from "viem";
import { isOutOfGas, isRevert, revertReason } from "./revert.js";

/** Parameters of {@link estimateGasWithin}. */
export interface EstimateGasWithinParameters {
  from: Address;
  to: Address;
  data: Hex;
  /** The most gas the call may take; also the node's search bound. */
  cap: bigint;
}

/** What a capped estimate found: the gas it needs, a revert (with the reason when the node gave one), or more gas than the cap. */
export type CappedEstimate =
  | { outcome: "fits"; gas: bigint }
  | { outcome: "reverts"; reason: string | undefined }
  | { outcome: "overCap" };

/**
 * Simulates a call with `eth_estimateGas`, the cap sent as the call's gas limit so the node never
 * searches beyond it (viem's `estimateGas` drops a given `gas`, hence the raw request). A revert and
 * a call that needs more than the cap are outcomes; only a transport or node fault throws.
 */
export async function estimateGasWithin(client: PublicClient, parameters: EstimateGasWithinParameters): Promise<CappedEstimate> {
  let gas: bigint;
  try {
    const answer = await client.request({
      method: "eth_estimateGas",
      params: [{ from: parameters.from, to: parameters.to, data: parameters.data, gas: numberToHex(parameters.cap) }],
    });
    gas = BigInt(answer);
  } catch (error) {
    // A revert reason first: a reason string may itself mention gas.
    const reason = revertReason(error);
    if (reason !== undefined) return { outcome: "reverts", reason };
    if (isOutOfGas(error)) return { outcome: "overCap" };
    if (isRevert(error)) return { outcome: "reverts", reason: undefined };
    throw error;
  }
  // A node that ignores the given limit may still answer more than the cap.
  return gas > parameters.cap ? { outcome: "overCap" } : { outcome: "fits", gas };
}
