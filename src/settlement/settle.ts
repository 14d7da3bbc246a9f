import { isAddressEqual, type Address, type Hex } from "viem";
import type { PayerPayload, Payment } from "../protocol/payment.js";
import type { SettleErrorCode, VerifyReasonCode } from "../protocol/reasons.js";
import type { SettlementDeps } from "./deps.js";
import { FacilitatorFault, PayerQuotaExceeded } from "./faults.js";
import type { NetworkRuntime } from "./runtime.js";
import { settleVerified } from "./settler.js";
import { penaltySubject, type BoundPayment, type SettlementRecord } from "../ledger/types.js";
import { decidePayment, termsOfAuthorization, type PaidTransfer } from "./decision.js";
import { authorizationDigest, identifierBoundElsewhere, paidUnderIdentifier } from "./payment-identifier.js";
import { verifyPayment } from "./verify.js";
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

/** Settle's failure for a verify refusal: settle's code where it has one, else verify's code and reason. */
function refusedSettlement(refused: RefusedPayment, txHash?: Hex): FailedSettlement {
  const { code } = refused;
  return hasSettleCode(code) ? failed(SETTLE_CODE_OF[code], txHash) : { settled: false, code, ...(refused.detail !== undefined ? { detail: refused.detail } : {}) };
}

function failed(code: SettleErrorCode, txHash?: Hex): SettleErrorOutcome {
  return { settled: false, code, ...(txHash ? { txHash } : {}) };
}

/** Options of {@link settlePayment}. */
export interface SettleOptions {
  /**
   * The per-payer quota, asked once the signature is proven the payer's (never before: a request that
   * only names a payer must not spend its quota). Gives the seconds to wait when the payer is over it.
   */
  admit?: (payer: Address, authorization: string) => Promise<number | undefined>;
}

/**
 * Settles a payment: re-verifies it on a fresh head, refuses a payer under a revert
 * penalty, asks the payer's quota ({@link PayerQuotaExceeded}, 429), claims the authorization in the ledger (with the payer's balance reservation), simulates
 * the token call within `maxSettleGas`, then sends it, or hands it to a relayer key holder, and waits
 * for the outcome. A settle of an authorization another settle owns (any instance) waits for that
 * outcome and answers `Authorization already used` with its hash: one transaction per authorization.
 * Protocol outcomes are returned as a {@link SettleOutcome}; a fault before anything was sent throws
 * {@link FacilitatorFault} (503).
 */
export async function settlePayment(payment: Payment, deps: SettlementDeps, options: SettleOptions = {}): Promise<SettleOutcome> {
  const outcome = await verifyPayment(payment, deps, { freshHead: true });
  if (!outcome.isValid) {
    // Paid already under this payment identifier: the same answer again, with the same transaction.
    if (outcome.code === "used" && payment.paymentId && outcome.runtime && outcome.payload) {
      const paid = await settledUnderIdentifier(outcome.runtime, outcome.payload.authorization, payment.paymentId, deps);
      if (paid) return paid;
    }
    let txHash: Hex | undefined;
    if (outcome.code === "used" && outcome.runtime && outcome.payload) txHash = await paidBy(outcome.runtime, outcome.payload.authorization, deps);
    return refusedSettlement(outcome, txHash);
  }
  const { runtime, payload, head } = outcome;
  const { config } = runtime;
  const authorization = payload.authorization;

  let penalty;
  try {
    penalty = await deps.ledger.activePenalty(config, [penaltySubject(authorization.from)], head.timestamp);
  } catch (error) {
    throw new FacilitatorFault({ code: "ledger_unavailable" }, { cause: error });
  }
  if (penalty) {
    deps.logger.warn({ network: config.network, payer: authorization.from, until: String(penalty.until) }, "settle refused: revert penalty");
    return failed("failedOnChain");
  }

  if (payment.paymentId) {
    // The id is bound to the first payment it came with (everything signed), for every instance: another
    // payment under it, one re-signed under the same nonce included, is refused before anything is claimed or sent.
    let bound: BoundPayment;
    try {
      bound = await deps.ledger.bindPaymentIdentifier(config, authorization.from, payment.paymentId, {
        nonce: authorization.nonce,
        digest: authorizationDigest(runtime, authorization),
      });
    } catch (error) {
      throw new FacilitatorFault({ code: "ledger_unavailable" }, { cause: error });
    }
    if (await identifierBoundElsewhere(runtime, authorization, payment.paymentId, deps, bound)) {
      return { settled: false, code: "paymentId", detail: payment.paymentId };
    }
  }

  if (options.admit) {
    const id = `${config.chainId}:${config.token}:${authorization.from}:${authorization.nonce}`.toLowerCase();
    // A quota store that fails lets the settle through, as the edge's limiters do: the claim decides next.
    const wait = await options.admit(authorization.from, id).catch((error: unknown) => {
      deps.logger.warn({ network: config.network, err: String(error) }, "payer quota unavailable; settle let through");
      return undefined;
    });
    if (wait !== undefined) throw new PayerQuotaExceeded(wait);
  }

  let result;
  try {
    result = await settleVerified(deps, outcome);
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
      // Another settle of this authorization (a repeat under the same payment identifier) sent it: its answer.
      const paid = payment.paymentId ? await settledUnderIdentifier(runtime, authorization, payment.paymentId, deps) : undefined;
      return paid ?? failed("alreadyUsed", await ownersTransaction(runtime, authorization, result.record, deps));
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

/** {@link paidUnderIdentifier} as settle's outcome: a repeat of a settlement made before. */
async function settledUnderIdentifier(
  runtime: NetworkRuntime,
  authorization: PayerPayload["authorization"],
  paymentId: string,
  deps: SettlementDeps,
): Promise<SettledPayment | undefined> {
  const paid = await paidUnderIdentifier(runtime, authorization, paymentId, deps);
  return paid && { ...settledAnswer(paid), repeat: true };
}

/** Settle's answer for a payment made: every field from the paying receipt and its block. */
function settledAnswer(transfer: PaidTransfer): SettledPayment {
  const { txHash, from, to, value, blockNumber, blockTimestamp } = transfer;
  return { settled: true, txHash, from, to, value, blockNumber, timestamp: new Date(Number(blockTimestamp) * 1000).toISOString() };
}

/**
 * The transaction to name when another settle owns this authorization: while it is in flight, its own
 * transaction of this very payment (same payee and value: the one that pays once mined); once settled,
 * only the paying transfer the payment decision confirms.
 */
async function ownersTransaction(runtime: NetworkRuntime, authorization: PayerPayload["authorization"], owner: SettlementRecord, deps: SettlementDeps): Promise<Hex | undefined> {
  if (owner.status === "settled") return paidBy(runtime, authorization, deps, owner.txHash);
  const same = isAddressEqual(owner.payee, authorization.to) && owner.value === BigInt(authorization.value);
  return same ? owner.txHash : undefined;
}

/**
 * The transaction to name in an `Authorization already used` answer: the paying transfer of this very
 * payment (the ledger's settled transaction, `candidate`, or what the authorization lookup finds), per
 * the payment decision; none when something else spent the nonce, or the chain cannot tell (best effort).
 */
async function paidBy(runtime: NetworkRuntime, authorization: PayerPayload["authorization"], deps: SettlementDeps, candidate?: Hex): Promise<Hex | undefined> {
  const { config } = runtime;
  const record = await deps.ledger.get({ chainId: config.chainId, token: config.token, authorizer: authorization.from, nonce: authorization.nonce }).catch(() => undefined);
  const ours = [candidate, record?.status === "settled" ? record.txHash : undefined].filter((hash): hash is Hex => hash !== undefined);
  const decision = await decidePayment(runtime.payments, termsOfAuthorization(config.token, authorization), { ours: [...new Set(ours)] });
  return decision.outcome === "paid" ? decision.transfer.txHash : undefined;
}
