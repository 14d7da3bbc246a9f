// The settle pipeline: settle's checks before anything is claimed, then the settler, its result worded as settle's outcome.
import { isAddressEqual, type Hex } from "viem";
import { penaltySubject, type SettlementRecord } from "../ledger/types.js";
import type { PayerPayload, Payment } from "../protocol/payment.js";
import { decidePayment, termsOfAuthorization } from "./decision.js";
import type { SettlementDeps } from "./deps.js";
import { FacilitatorFault } from "./faults.js";
import { identifierGate, settledThis } from "./payment-identifier.js";
import type { NetworkRuntime } from "./runtime.js";
import { failed, refusedSettlement, settledAnswer, type SettleOutcome } from "./settle-outcome.js";
import { settleVerified } from "./settler.js";
import { verifyPayment } from "./verify.js";
import type { VerifiedPayment } from "./verify-outcome.js";

export type { FailedSettlement, RefusedSettlement, SettledPayment, SettleErrorOutcome, SettleFailureCode, SettleOutcome, UnwordedRefusal } from "./settle-outcome.js";

/**
 * What settle's checks made of a payment: its answer already (refused, or a repeat under its payment identifier),
 * or a payment ready to claim, proven the payer's (`bound`: its payment identifier is this payment's).
 */
export type CheckedSettle = { answer: SettleOutcome } | { ready: VerifiedPayment; bound: boolean };

/**
 * Settle's checks, before anything is claimed or sent: verify again on a fresh head, the payer's revert penalty,
 * and the payment identifier's gate (bound to this payment now, for every instance). A used authorization is
 * answered `Authorization already used` naming the paying transfer of this very payment, when the chain shows it;
 * a repeat under its payment identifier gets the same answer as the first settle. Throws {@link FacilitatorFault}
 * when the chain or the ledger cannot be read.
 */
export async function checkSettle(deps: SettlementDeps, payment: Payment): Promise<CheckedSettle> {
  const outcome = await verifyPayment(payment, deps, { freshHead: true });
  if (outcome.isValid) {
    const { config } = outcome.runtime;
    const payer = outcome.payload.authorization.from;
    let penalty;
    try {
      penalty = await deps.ledger.activePenalty(config, [penaltySubject(payer)], outcome.head.timestamp);
    } catch (error) {
      throw new FacilitatorFault({ code: "ledger_unavailable" }, { cause: error });
    }
    if (penalty) {
      deps.logger.warn({ network: config.network, payer, until: String(penalty.until) }, "settle refused: revert penalty");
      return { answer: failed("failedOnChain") };
    }
  }
  const gate = await identifierGate(deps, outcome, payment.paymentId, { bind: true });
  if (gate.verdict === "refuse") return { answer: { settled: false, code: "paymentId", detail: payment.paymentId! } };
  if (gate.verdict === "repeat") return { answer: settledAnswer(gate.transfer, true) };
  if (outcome.isValid) return { ready: outcome, bound: gate.bound };
  const txHash = outcome.code === "used" && outcome.runtime && outcome.payload ? await paidBy(deps, outcome.runtime, outcome.payload.authorization) : undefined;
  return { answer: refusedSettlement(outcome, txHash) };
}

/**
 * Settles a checked payment through the settler (claim, simulate, send or hand to a key holder, wait), and words
 * its result as settle's outcome. A settle of an authorization another settle owns (any instance) answers
 * `Authorization already used` with the owner's transaction of this very payment, or, under a payment identifier
 * bound to this payment, the owner's settlement as a repeat: one transaction per authorization. A fault before
 * anything was sent, or no verdict yet, throws {@link FacilitatorFault} (503).
 */
export async function settleChecked(deps: SettlementDeps, checked: { ready: VerifiedPayment; bound: boolean }): Promise<SettleOutcome> {
  const { runtime, payload } = checked.ready;
  const { config } = runtime;
  const authorization = payload.authorization;
  let result;
  try {
    result = await settleVerified(deps, checked.ready);
  } catch (error) {
    if (error instanceof FacilitatorFault) throw error;
    // The ledger failed before anything was recorded as sent: nothing went out.
    throw new FacilitatorFault({ code: "ledger_unavailable" }, { cause: error });
  }
  switch (result.kind) {
    case "settled":
      runtime.state.markUsed(authorization.from, authorization.nonce);
      return settledAnswer(result.transfer);
    case "alreadyUsed": {
      // Another settle of this authorization sent it; under this payment's own identifier its settlement is this one's answer.
      const repeat = checked.bound ? await settledThis(runtime, authorization, result.record) : undefined;
      return repeat ? settledAnswer(repeat, true) : failed("alreadyUsed", await ownersTransaction(deps, runtime, authorization, result.record));
    }
    case "failed":
      return failed(result.code, result.txHash);
    case "pending":
      // Ours is out and not mined by the settle time-out, and nothing else used the authorization: decisions.md
      // answers `payment.failed` with the transaction (it may have been sent); the status lookup tells the outcome.
      return failed("failedOnChain", result.txHash);
    case "overBalance":
      // The payer's settles in flight already promise its balance: this one would revert at the relayer's expense.
      return failed("insufficientBalance");
    case "notSent":
      throw new FacilitatorFault(result.fault);
    case "undecided":
      // No verdict either way: 503 (retryable); the retry gets the outcome the reconciler records.
      throw new FacilitatorFault({ code: "payment_undecided", network: config.network, reason: result.reason, ...(result.txHash ? { txHash: result.txHash } : {}) });
  }
}

/**
 * The transaction to name when another settle owns this authorization: while it is in flight, its own
 * transaction of this very payment (same payee and value: the one that pays once mined); once settled,
 * only the paying transfer the payment decision confirms.
 */
async function ownersTransaction(deps: SettlementDeps, runtime: NetworkRuntime, authorization: PayerPayload["authorization"], owner: SettlementRecord): Promise<Hex | undefined> {
  if (owner.status === "settled") return paidBy(deps, runtime, authorization, owner.txHash);
  const same = isAddressEqual(owner.payee, authorization.to) && owner.value === BigInt(authorization.value);
  return same ? owner.txHash : undefined;
}

/**
 * The transaction to name in an `Authorization already used` answer: the paying transfer of this very
 * payment (the ledger's settled transaction, `candidate`, or what the authorization lookup finds), per
 * the payment decision; none when something else spent the nonce, or the chain cannot tell (best effort).
 */
async function paidBy(deps: SettlementDeps, runtime: NetworkRuntime, authorization: PayerPayload["authorization"], candidate?: Hex): Promise<Hex | undefined> {
  const { config } = runtime;
  const record = await deps.ledger.get({ chainId: config.chainId, token: config.token, authorizer: authorization.from, nonce: authorization.nonce }).catch(() => undefined);
  const ours = [candidate, record?.status === "settled" ? record.txHash : undefined].filter((hash): hash is Hex => hash !== undefined);
  const decision = await decidePayment(runtime.paymentReads, termsOfAuthorization(config.token, authorization), { ours: [...new Set(ours)] });
  return decision.outcome === "paid" ? decision.transfer.txHash : undefined;
}
