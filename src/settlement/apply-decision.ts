// The one place a payment decision changes the ledger: the row (settled or failed, its balance reservation released
// with it), the states of our transactions, and the payer's penalty.
import type { Hex } from "viem";
import { IllegalTransitionError, type SettlementRecord } from "../ledger/types.js";
import type { SettleErrorCode } from "../protocol/reasons.js";
import { decidePayment, penaltyOf, termsOf, type DecideOptions, type DecisionChain, type FailureCause, type PaidTransfer, type PaymentDecision } from "./decision.js";
import type { SettlementDeps } from "./deps.js";
import { PaymentAttribute, step } from "../telemetry/spans.js";

/** What applying a decision takes: the ledger's writes, the outbox that keeps them while it is unreachable, the penalty's length. */
export type DecisionDeps = Pick<SettlementDeps, "ledger" | "outbox" | "logger" | "observer" | "settings">;

/** What a decision made of a row. */
export type Applied =
  /** Settled by the paying transfer (ours, or a copy of ours mined first). */
  | { outcome: "settled"; record: SettlementRecord; transfer: PaidTransfer }
  /** Failed, for good; `txHash` is ours when it was mined (never the transaction that spent the nonce). */
  | { outcome: "failed"; code: SettleErrorCode; cause: FailureCause; txHash?: Hex }
  /** The chain cannot tell yet: the row is left as it is. */
  | { outcome: "undecided"; reason: string }
  /** Nothing used the authorization and none of ours reverted: the row is left as it is. */
  | { outcome: "unused" };

/** What the decision saw of our transactions. */
export interface OurTransactions {
  /** Ours that was mined (the hash a failure names, and the one a copy's payment is told apart from). */
  mined?: Hex;
  /** Ours that was mined and reverted, and the other versions at its nonce, which can never be mined now. */
  reverted?: { hash: Hex; versions: readonly Hex[] };
}

/**
 * Asks the payment decision for `row` ({@link decidePayment}, with our transactions in `options.ours`) and
 * applies it ({@link applyDecision}).
 */
export async function decideRow(
  deps: DecisionDeps,
  chain: DecisionChain,
  row: SettlementRecord,
  options: DecideOptions,
  ours: OurTransactions = {},
): Promise<Applied> {
  // Within a traced request (a settle's), the decision is a span naming its outcome.
  const decision = await step("x402 decision", {}, async (span) => {
    const decided = await decidePayment(chain, termsOf(row), options);
    span?.setAttribute(PaymentAttribute.outcome, decided.outcome);
    return decided;
  });
  return applyDecision(deps, chain, row, decision, ours);
}

/**
 * Applies a decision to `row`: our reverted transaction marked so (its other versions replaced), whatever
 * paid; paid → settled with the paying transfer; failed → failed, its payer penalised; undecided or unused
 * → nothing more. Every write the ledger refuses while unreachable is kept in the outbox (mined is mined);
 * a row decided otherwise meanwhile ({@link IllegalTransitionError}) rejects.
 */
export async function applyDecision(
  deps: DecisionDeps,
  chain: Pick<DecisionChain, "blockTime">,
  row: SettlementRecord,
  decision: PaymentDecision,
  ours: OurTransactions = {},
): Promise<Applied> {
  const { ledger } = deps;
  if (ours.reverted) {
    const { hash, versions } = ours.reverted;
    for (const other of versions) if (other !== hash) await keep(deps, `transaction ${other} replaced`, () => ledger.markTransaction(other, "replaced"));
    await keep(deps, `transaction ${hash} reverted`, () => ledger.markTransaction(hash, "reverted"));
  }
  switch (decision.outcome) {
    case "paid":
      // Anyone can resend our transaction's input from the pending pool with a higher tip: the copy paid
      // the payee, ours reverted. The payment was made, and the payer did nothing wrong.
      if (ours.mined && decision.transfer.txHash !== ours.mined) {
        deps.logger.warn({ id: row.id, txHash: ours.mined, paidBy: decision.transfer.txHash, payer: row.key.authorizer }, "settle transaction reverted: another transaction used the authorization first; settled with its hash");
      }
      return settled(deps, row, decision.transfer);
    case "undecided":
      return { outcome: "undecided", reason: decision.reason };
    case "unused":
      return { outcome: "unused" };
    case "failed": {
      const mine = decision.cause === "reverted" ? decision.by.txHash : ours.mined;
      const failure = { code: decision.code, ...(mine ? { txHash: mine } : {}) };
      await keep(deps, `settlement ${row.id} failed`, () => ledger.markFailed(row.id, failure));
      await penalize(deps, chain, row, decision);
      return { outcome: "failed", code: decision.code, cause: decision.cause, ...(mine ? { txHash: mine } : {}) };
    }
  }
}

/** Records the row settled by `transfer`. With the ledger unreachable it is settled all the same, its record kept in the outbox. */
async function settled(deps: DecisionDeps, row: SettlementRecord, transfer: PaidTransfer): Promise<Applied> {
  const outcome = { txHash: transfer.txHash, blockNumber: transfer.blockNumber, blockTimestamp: transfer.blockTimestamp };
  try {
    return { outcome: "settled", record: await deps.ledger.markSettled(row.id, outcome), transfer };
  } catch (error) {
    if (error instanceof IllegalTransitionError) throw error;
    deps.outbox.add(`settlement ${row.id} settled by ${outcome.txHash}`, () => deps.ledger.markSettled(row.id, outcome));
    deps.observer.ledgerFault(error);
    deps.logger.warn({ id: row.id, txHash: outcome.txHash, err: String(error) }, "settlement mined while the ledger is unreachable: answered settled, record kept in the outbox");
    return { outcome: "settled", record: { ...row, status: "settled", ...outcome }, transfer };
  }
}

/** A payment failed by its payer's doing (a revert, a cancel, a substitute under its nonce): refuse the payer for a while. */
async function penalize(deps: DecisionDeps, chain: Pick<DecisionChain, "blockTime">, row: SettlementRecord, failed: Extract<PaymentDecision, { outcome: "failed" }>): Promise<void> {
  const { logger, ledger } = deps;
  const { revertPenaltySeconds } = deps.settings.relayerSafety;
  logger.warn({ id: row.id, txHash: failed.by.txHash, payer: row.key.authorizer, cause: failed.cause }, failed.cause === "reverted" ? "settlement reverted on chain" : "settlement failed: the authorization was spent by another transaction");
  if (revertPenaltySeconds <= 0) return;
  // The deciding block's time; the wall clock only when the chain cannot say (a penalty, not a payment).
  const blockTime = await chain.blockTime(failed.by.blockNumber).catch(() => BigInt(Math.floor(Date.now() / 1000)));
  const penalty = penaltyOf(row, failed, blockTime, revertPenaltySeconds);
  if (penalty) await keep(deps, `revert penalty of ${row.key.authorizer}`, () => ledger.penalize(penalty));
}

/** Writes now; a write the ledger refuses while unreachable is kept for the outbox's next drain (a row decided otherwise meanwhile rejects). */
async function keep(deps: DecisionDeps, what: string, write: () => Promise<unknown>): Promise<void> {
  try {
    await write();
  } catch (error) {
    if (error instanceof IllegalTransitionError) throw error;
    deps.outbox.add(what, write);
    deps.observer.ledgerFault(error);
    deps.logger.warn({ what, err: String(error) }, "ledger write deferred to the outbox");
  }
}
