// What became of a settle, for its answer; and the answer a row gives a settle that waited on it.
import type { Hex } from "viem";
import type { SettlementRecord } from "../ledger/types.js";
import type { SettleErrorCode } from "../protocol/reasons.js";
import { decideRow, type Applied, type DecisionDeps } from "./apply-decision.js";
import { paidTransferOf, type PaidTransfer } from "./decision.js";
import type { FaultFacts } from "./faults.js";
import type { NetworkRuntime } from "./runtime.js";

/** What became of a settle, for its answer. */
export type SettlementResult =
  /** Paid (by this settle's transaction, a copy of it, or the key holder it handed the send to): `transfer` as the paying receipt tells it. */
  | { kind: "settled"; record: SettlementRecord; transfer: PaidTransfer }
  /**
   * Another settle owns (or finished) the authorization: `Authorization already used`. `record` is that
   * settle's row: its transaction is named only once confirmed as this very payment's (the caller's part).
   */
  | { kind: "alreadyUsed"; record: SettlementRecord }
  /** `payment.failed` with `code` (and the hash of ours when it was sent; never another transaction's). */
  | { kind: "failed"; code: SettleErrorCode; txHash?: Hex }
  /** The payer's settles in flight already commit its balance. */
  | { kind: "overBalance" }
  /** Nothing was sent, and nothing will be: a fault (503), `fault` saying why. */
  | { kind: "notSent"; fault: Extract<FaultFacts, { code: "not_sent" | "fee_cap" }> }
  /**
   * The chain cannot tell yet whether the payment was made (a read failed, or the authorization is used
   * and no log of it was found): a fault, 503, no verdict. The row stays sent for the reconciler, and a
   * retry gets its outcome. `txHash`: ours.
   */
  | { kind: "undecided"; reason: string; txHash?: Hex }
  /**
   * Ours was sent and is not mined by the settle's deadline, and nothing else used the authorization: it
   * may still be mined (the reconciler follows the row; the status lookup tells the outcome). `txHash`: ours.
   */
  | { kind: "pending"; txHash?: Hex };

/**
 * The answer a row gives a settle waiting on it: its outcome once final; still claimed or sent (at the
 * settle's deadline), what the payment decision makes of it now over the row's transactions: paid,
 * failed, undecided (503), or, unused, `pending` (ours may still be mined; the reconciler follows it).
 */
export async function answerOfRow(deps: DecisionDeps, network: Pick<NetworkRuntime, "paymentReads" | "config">, record: SettlementRecord): Promise<SettlementResult> {
  if (record.status === "settled") return { kind: "settled", record, transfer: paidTransferOf(record) };
  if (record.status === "failed") {
    if (record.errorCode === "notSent") return { kind: "notSent", fault: { code: "not_sent", network: network.config.network, why: "givenUp" } };
    const code = record.errorCode ?? "failedOnChain";
    // Spent by something else: the row's hash is ours, which did not pay; the answer names none.
    const named = record.txHash && code !== "alreadyUsed" ? { txHash: record.txHash } : {};
    return { kind: "failed", code, ...named };
  }
  const applied = await decideRow(deps, network.paymentReads, record, { ours: record.transactions.map((tx) => tx.hash) });
  if (applied.outcome === "settled" || applied.outcome === "failed") return decidedAnswer(applied);
  if (applied.outcome === "undecided") return { kind: "undecided", reason: applied.reason, ...(record.txHash ? { txHash: record.txHash } : {}) };
  // The hash lets the caller trace it (the status lookup tells the rest).
  return { kind: "pending", ...(record.txHash ? { txHash: record.txHash } : {}) };
}

/**
 * A settle's answer for a row the decision settled or failed: a failure names our reverted transaction;
 * spent by something else, none (ours did not pay, and the other is not this payment).
 */
export function decidedAnswer(applied: Extract<Applied, { outcome: "settled" | "failed" }>): SettlementResult {
  if (applied.outcome === "settled") return { kind: "settled", record: applied.record, transfer: applied.transfer };
  return { kind: "failed", code: applied.code, ...(applied.cause === "reverted" && applied.txHash ? { txHash: applied.txHash } : {}) };
}
