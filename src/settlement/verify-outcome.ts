// What verify answers: a verified payment with what settle needs, a refusal with its code, or a repeat.
import type { Hex } from "viem";
import type { Head } from "../chain/cached-reads.js";
import type { PayerPayload } from "../protocol/payment.js";
import type { VerifyReasonCode, VerifyRefusal } from "../protocol/reasons.js";
import type { NetworkRuntime } from "./runtime.js";

/** A payment that passed every check, with what settle needs to send it. */
export interface VerifiedPayment {
  isValid: true;
  runtime: NetworkRuntime;
  payload: PayerPayload;
  value: bigint;
  head: Head;
  /** The payer's token balance at `head`. */
  balance: bigint;
  /** Whether the payer is a contract wallet (its signature goes through ERC-1271). */
  contractWallet: boolean;
}

/** A refused payment: its code and detail (a dialect's codec words it), and what verify learned before it. */
export interface RefusedPayment extends VerifyRefusal {
  isValid: false;
  runtime?: NetworkRuntime;
  payload?: PayerPayload;
  head?: Head;
}

export type VerifyOutcome = VerifiedPayment | RefusedPayment;

/**
 * A repeat, under its payment identifier (x402 v2), of a payment already settled: answered valid, as
 * the first verify of it was, so that a seller's retry reaches settle and gets the same transaction.
 */
export interface RepeatedPayment {
  isValid: true;
  repeat: true;
  runtime: NetworkRuntime;
  payload: PayerPayload;
  txHash: Hex;
}

/** What the verify route answers from: a verify outcome, or a repeat of a settled payment. */
export type VerifyAnswerOutcome = VerifyOutcome | RepeatedPayment;

/** A refusal with its code (and what was refused, where its text names it), and what verify learned before it. */
export function refuse(code: VerifyReasonCode, detail?: string, extra: Partial<RefusedPayment> = {}): RefusedPayment {
  return { isValid: false, code, ...(detail !== undefined ? { detail } : {}), ...extra };
}
