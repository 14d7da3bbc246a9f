// What settle answers, whichever dialect asked: a settled payment, or a failure as settle's code (or verify's, where settle has no word).
import type { Address, Hex } from "viem";
import type { SettleErrorCode, VerifyReasonCode } from "../protocol/reasons.js";
import type { PaidTransfer } from "./decision.js";
import type { RefusedPayment } from "./verify-outcome.js";

/** Settle's own code for each verify refusal it has a word for (its text is settle's, not verify's). */
const SETTLE_CODE_OF = {
  signature: "invalidSignature",
  notYetValid: "notYetValid",
  expired: "expired",
  used: "alreadyUsed",
  balance: "insufficientBalance",
} as const satisfies Partial<Record<VerifyReasonCode, SettleErrorCode>>;

/** A verify refusal settle has no word of its own for: it answers with verify's reason. */
export type UnwordedRefusal = Exclude<VerifyReasonCode, keyof typeof SETTLE_CODE_OF>;

/** Why a settlement failed: settle's own code, or a verify refusal settle has no word for. */
export type SettleFailureCode = SettleErrorCode | UnwordedRefusal;

/** What settle did, whichever dialect asked: each dialect's codec turns it into its own answer. */
export type SettleOutcome = SettledPayment | FailedSettlement;

/** The authorization was transferred on chain. */
export interface SettledPayment {
  settled: true;
  txHash: Hex;
  from: Address;
  to: Address;
  value: bigint;
  blockNumber: bigint;
  /** The block's time, ISO-8601. */
  timestamp: string;
  /**
   * Answered again for a payment settled before (a repeat under its payment identifier): the same answer,
   * and nothing new happened (nothing is recorded for it, the discovery catalog included).
   */
  repeat?: true;
}

/** Nothing was transferred: settle's code, answered with its text (`SettleError`) at the HTTP edge. */
export interface SettleErrorOutcome {
  settled: false;
  code: SettleErrorCode;
  /** The transaction that was sent (or that paid this very payment already), when known. */
  txHash?: Hex;
}

/** Nothing was transferred: a verify refusal settle has no word for, answered with verify's text (it names what was refused: `detail`). */
export interface RefusedSettlement {
  settled: false;
  code: UnwordedRefusal;
  detail?: string;
  /** Refused before anything was sent or looked up. */
  txHash?: undefined;
}

/** Nothing was transferred. */
export type FailedSettlement = SettleErrorOutcome | RefusedSettlement;

function hasSettleCode(code: VerifyReasonCode): code is keyof typeof SETTLE_CODE_OF {
  return Object.hasOwn(SETTLE_CODE_OF, code);
}

/** Settle's failure for a verify refusal: settle's code where it has one, else verify's code and what it refused. */
export function refusedSettlement(refused: RefusedPayment, txHash?: Hex): FailedSettlement {
  const { code } = refused;
  return hasSettleCode(code) ? failed(SETTLE_CODE_OF[code], txHash) : { settled: false, code, ...(refused.detail !== undefined ? { detail: refused.detail } : {}) };
}

export function failed(code: SettleErrorCode, txHash?: Hex): SettleErrorOutcome {
  return { settled: false, code, ...(txHash ? { txHash } : {}) };
}

/** Settle's answer for a payment made: every field from the paying receipt and its block. */
export function settledAnswer(transfer: PaidTransfer, repeat = false): SettledPayment {
  const { txHash, from, to, value, blockNumber, blockTimestamp } = transfer;
  return { settled: true, txHash, from, to, value, blockNumber, timestamp: new Date(Number(blockTimestamp) * 1000).toISOString(), ...(repeat ? { repeat: true as const } : {}) };
}
