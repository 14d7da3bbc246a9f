import { BaseError, ContractFunctionRevertedError, decodeErrorResult, isHex, type Hex } from "viem";
import type { SettleErrorCode } from "../protocol/reasons.js";
import { nodeErrorText, OUT_OF_GAS_TEXT, REVERT_REASON_TEXT } from "./node-errors.js";

/** FiatToken v2 revert strings and the settle error code each maps to (wire-format table). */
const REVERTS: ReadonlyArray<readonly [string, SettleErrorCode]> = [
  ["FiatTokenV2: authorization is used or canceled", "alreadyUsed"],
  ["FiatTokenV2: authorization is expired", "expired"],
  ["FiatTokenV2: authorization is not yet valid", "notYetValid"],
  ["ERC20: transfer amount exceeds balance", "insufficientBalance"],
  ["FiatTokenV2: invalid signature", "invalidSignature"],
  ["EIP3009: invalid signature", "invalidSignature"],
  // Circle's ECRecover: "ECRecover: invalid signature", "… 's' value", "… 'v' value", "… length".
  ["ECRecover: invalid signature", "invalidSignature"],
];

/** The revert reason string inside a viem error, if the node returned one. */
export function revertReason(error: unknown): string | undefined {
  if (error instanceof BaseError) {
    const reverted = error.walk((e) => e instanceof ContractFunctionRevertedError);
    if (reverted instanceof ContractFunctionRevertedError && reverted.reason) return reverted.reason;
    // A raw JSON-RPC error (e.g. `eth_estimateGas` asked directly) carries the revert data.
    const data = revertData(error);
    if (data) return data;
  }
  // Nodes that do not return revert data still name the reason in the message.
  const match = REVERT_REASON_TEXT.exec(nodeErrorText(error));
  return match?.[1] ?? match?.[2]?.trim();
}

/** `Error(string)`'s message from the `data` of an RPC error in the chain, when there is one. */
function revertData(error: BaseError): string | undefined {
  let reason: string | undefined;
  error.walk((e) => {
    const data = (e as { data?: unknown }).data;
    const hex = typeof data === "string" ? data : (data as { data?: unknown } | undefined)?.data;
    if (typeof hex === "string" && isHex(hex) && hex.startsWith("0x08c379a0")) {
      try {
        const decoded = decodeErrorResult({ data: hex as Hex, abi: [] });
        if (typeof decoded.args?.[0] === "string") reason = decoded.args[0];
      } catch {
        // not an Error(string) after all
      }
    }
    return reason !== undefined;
  });
  return reason;
}

/**
 * Whether a viem error is an on-chain revert (as opposed to a transport or RPC fault): viem's revert
 * errors, a JSON-RPC error with EIP-1474 code 3, a call that returned no data, or a node message
 * naming a revert reason.
 */
export function isRevert(error: unknown): boolean {
  if (!(error instanceof BaseError)) return revertReason(error) !== undefined;
  const found = error.walk((e) => {
    const name = (e as { name?: string }).name;
    return (
      (e as { code?: unknown }).code === 3 ||
      name === "ContractFunctionRevertedError" ||
      name === "ExecutionRevertedError" ||
      name === "ContractFunctionZeroDataError"
    );
  });
  return found !== null || revertReason(error) !== undefined;
}

/** Maps a token revert reason to its settle error code; anything unknown is a generic on-chain failure. */
export function settleErrorOfRevert(reason: string | undefined): SettleErrorCode {
  if (reason === undefined) return "failedOnChain";
  for (const [prefix, code] of REVERTS) {
    if (reason === prefix || reason.startsWith(prefix)) return code;
  }
  return "failedOnChain";
}

/**
 * Whether a node refused a call or an estimate for the gas limit it was given: the call needs more
 * (geth and Cronos: "gas required exceeds allowance", "out of gas"; Hardhat/EDR: "Transaction ran out
 * of gas"). Distinct from a revert and from a transport fault.
 */
export function isOutOfGas(error: unknown): boolean {
  let found = false;
  const test = (e: unknown) => {
    if (e instanceof Error && OUT_OF_GAS_TEXT.test(nodeErrorText(e))) found = true;
  };
  if (error && typeof error === "object" && "walk" in error && typeof error.walk === "function") {
    error.walk((e: unknown) => {
      test(e);
      return false;
    });
  } else test(error);
  return found;
}
