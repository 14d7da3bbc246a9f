// The settle's simulation: the token call it sends, estimated within the gas cap, with the fee check, before anything is signed.
import { encodeFunctionData, parseSignature, type Hex } from "viem";
import { estimateGasWithin } from "../chain/estimate.js";
import { FeeCapError } from "../chain/fees.js";
import { settleErrorOfRevert } from "../chain/revert.js";
import { tokenAbi } from "../chain/token-abi.js";
import type { SettlementCall } from "../ledger/types.js";
import type { SettleErrorCode } from "../protocol/reasons.js";
import type { SettlementDeps } from "./deps.js";
import { FacilitatorFault } from "./faults.js";
import type { VerifiedPayment } from "./verify-outcome.js";

/** The simulated call, or the settle error that refuses it before anything is sent. */
export type Simulation = { call: SettlementCall } | { refusal: SettleErrorCode };

/** The token call that settles `payment`: `(v, r, s)` for an EOA signature, `bytes` for an ERC-1271 wallet. */
export function settlementCalldata(payment: VerifiedPayment): Hex {
  const a = payment.payload.authorization;
  const common = [a.from, a.to, payment.value, a.validAfter, a.validBefore, a.nonce] as const;
  if (!payment.contractWallet) {
    const { r, s, v } = parseSignature(a.signature);
    return encodeFunctionData({ abi: tokenAbi, functionName: "transferWithAuthorization", args: [...common, Number(v), r, s] });
  }
  return encodeFunctionData({ abi: tokenAbi, functionName: "transferWithAuthorization", args: [...common, a.signature] });
}

/**
 * Simulates the token call within the gas cap: the call with its gas limit, or the settle error that
 * refuses it. Runs after the claim, before anything is signed; with it, the fee check: while the network
 * needs more per gas than MAX_FEE_PER_GAS_GWEI it throws a {@link FacilitatorFault} (`fee_cap`, 503),
 * and the claim is withdrawn with nothing sent.
 */
export async function simulate(deps: Pick<SettlementDeps, "settings" | "logger">, payment: VerifiedPayment): Promise<Simulation> {
  const { client, relayer, config } = payment.runtime;
  const { maxSettleGas } = deps.settings.relayerSafety;
  const data = settlementCalldata(payment);
  const fees = relayer.checkFees().then(
    () => undefined,
    (error: unknown) => error,
  );
  let estimate;
  try {
    estimate = await estimateGasWithin(client, { from: relayer.pick()!, to: config.token, data, cap: maxSettleGas });
  } catch (error) {
    throw new FacilitatorFault({ code: "chain_unreadable", network: config.network, read: "simulation" }, { cause: error });
  }
  const feeFault = await fees;
  if (feeFault instanceof FeeCapError) throw new FacilitatorFault({ code: "fee_cap", neededWei: feeFault.neededWei, capWei: feeFault.capWei }, { cause: feeFault });
  if (feeFault !== undefined) throw new FacilitatorFault({ code: "chain_unreadable", network: config.network, read: "fees" }, { cause: feeFault });
  if (estimate.outcome === "reverts") return { refusal: settleErrorOfRevert(estimate.reason) };
  if (estimate.outcome === "overCap") {
    deps.logger.warn({ network: config.network, payer: payment.payload.authorization.from, maxSettleGas: String(maxSettleGas) }, "settle refused: gas estimate over MAX_SETTLE_GAS");
    return { refusal: "failedOnChain" };
  }
  return { call: { to: config.token, data, gas: bigMin(gasLimitOf(estimate.gas), maxSettleGas) } };
}

/**
 * The gas limit sent for an estimate: the estimate plus the larger of 10 % and 20,000 gas. The margin covers
 * state that moves between the estimate and the block: a payee's balance slot that a pending transfer had
 * filled when the node estimated (on a node that estimates against its pending state) but is empty when
 * ours runs costs 17,100 gas more; a contract wallet's check may vary. It stays small on purpose: Cronos
 * charges max(gas used, `min_gas_multiplier` (0.5) × the gas limit), so a limit past twice the gas used is
 * paid for outright, and admission holds gas limit × fee cap of the relayer's balance.
 */
function gasLimitOf(estimate: bigint): bigint {
  const tenth = (estimate + 9n) / 10n;
  return estimate + (tenth > 20_000n ? tenth : 20_000n);
}

function bigMin(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}

