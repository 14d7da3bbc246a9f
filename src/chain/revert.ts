import { BaseError, ContractFunctionRevertedError } from "viem";
import { SettleError } from "../protocol/reasons.js";

type SettleErrorText = (typeof SettleError)[keyof typeof SettleError];

/** FiatToken v2 revert strings and the settle error each maps to (wire-format table). */
const REVERTS: ReadonlyArray<readonly [string, SettleErrorText]> = [
  ["FiatTokenV2: authorization is used or canceled", SettleError.alreadyUsed],
  ["FiatTokenV2: authorization is expired", SettleError.expired],
  ["FiatTokenV2: authorization is not yet valid", SettleError.notYetValid],
  ["ERC20: transfer amount exceeds balance", SettleError.insufficientBalance],
  ["FiatTokenV2: invalid signature", SettleError.invalidSignature],
  ["EIP3009: invalid signature", SettleError.invalidSignature],
  // Circle's ECRecover: "ECRecover: invalid signature", "… 's' value", "… 'v' value", "… length".
  ["ECRecover: invalid signature", SettleError.invalidSignature],
];

/** The revert reason string inside a viem error, if the node returned one. */
export function revertReason(error: unknown): string | undefined {
  if (error instanceof BaseError) {
    const reverted = error.walk((e) => e instanceof ContractFunctionRevertedError);
    if (reverted instanceof ContractFunctionRevertedError && reverted.reason) return reverted.reason;
  }
  // Nodes that do not return revert data still name the reason in the message.
  const message = error instanceof Error ? `${error.message} ${(error as BaseError).details ?? ""}` : String(error);
  const match = /reverted with reason string '([^']*)'|execution reverted: ([^\n"]+)/.exec(message);
  return match?.[1] ?? match?.[2]?.trim();
}

/** Maps a token revert reason to the settle `error` text; anything unknown is a generic on-chain failure. */
export function settleErrorOfRevert(reason: string | undefined): SettleErrorText {
  if (reason === undefined) return SettleError.failedOnChain;
  for (const [prefix, text] of REVERTS) {
    if (reason === prefix || reason.startsWith(prefix)) return text;
  }
  return SettleError.failedOnChain;
}
