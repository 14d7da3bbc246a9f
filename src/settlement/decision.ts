import type { Address, Hex, TransactionReceipt } from "viem";
import { penaltySubject, type Penalty, type SettlementRecord } from "../ledger/types.js";
import type { PayerPayload } from "../protocol/payment.js";
import type { SettleErrorCode } from "../protocol/reasons.js";
import type { PaymentReads } from "./payment-reads.js";
import { spendOf, type PaymentTerms } from "./receipt-transfer.js";

export { spendOf, type PaymentTerms, type ReceiptSpend } from "./receipt-transfer.js";

/** A payment made, every field read from the paying receipt and its block. */
export interface PaidTransfer {
  txHash: Hex;
  from: Address;
  to: Address;
  value: bigint;
  blockNumber: bigint;
  /** Unix seconds of the block. */
  blockTimestamp: bigint;
}

/** Why a payment failed: the payer's doing in each case (only the payer can sign under its nonce). */
export type FailureCause =
  /** Our transaction reverted and nothing used the authorization (the balance moved away, the signature stopped validating). */
  | "reverted"
  /** Used by another transfer: another payee or value signed under the same nonce. */
  | "spentElsewhere"
  /** Canceled by the payer (`cancelAuthorization`). */
  | "canceled";

/** The one answer to "was this payment made". */
export type PaymentDecision =
  /** Paid by this receipt's transfer. */
  | { outcome: "paid"; transfer: PaidTransfer }
  /**
   * Failed, for good: `code` is settle's (`alreadyUsed` when something else spent the nonce,
   * `failedOnChain` for our revert); `by` is the transaction that decided it (ours that reverted, or the
   * one that spent the nonce), never the payment.
   */
  | { outcome: "failed"; cause: FailureCause; code: SettleErrorCode; by: { txHash: Hex; blockNumber: bigint } }
  /** Nothing spent the authorization and none of ours reverted: a transaction of ours may still be mined. */
  | { outcome: "unused" }
  /** The chain or its logs cannot tell now: never guessed either way. */
  | { outcome: "undecided"; reason: string };

/** What {@link decidePayment} reads. */
export type DecisionChain = Pick<PaymentReads, "receipt" | "blockTime" | "authorizationUsed" | "spender">;

/** Options of {@link decidePayment}. */
export interface DecideOptions {
  /** Our transactions for the payment: receipts in hand, or hashes whose receipts are read (unmined ones are skipped). */
  ours?: ReadonlyArray<Hex | TransactionReceipt>;
  /** A block whose time is known already (the latest seen while waiting for the receipt): spares a read. */
  knownBlock?: { number: bigint; timestamp: bigint };
}

const why = (what: string, error: unknown): PaymentDecision => ({ outcome: "undecided", reason: `${what}: ${error instanceof Error ? error.message : String(error)}` });

/**
 * Decides whether the payment of `terms` was made, from the chain alone. Paid only by a mined,
 * successful transaction whose receipt holds the token's `AuthorizationUsed(from, nonce)` followed by its
 * `Transfer(from, payTo, value)` ({@link spendOf}): ours first, else the one the authorization lookup
 * names (a copy of ours mined first pays all the same). Spent by anything else (a substitute under the
 * nonce, a cancel), or ours reverted with the authorization unused: failed. A read that fails, or an
 * authorization used with no log found: undecided.
 */
export async function decidePayment(chain: DecisionChain, terms: PaymentTerms, options: DecideOptions = {}): Promise<PaymentDecision> {
  const receipts: TransactionReceipt[] = [];
  for (const ours of options.ours ?? []) {
    if (typeof ours !== "string") {
      receipts.push(ours);
      continue;
    }
    try {
      const receipt = await chain.receipt(ours);
      if (receipt) receipts.push(receipt);
    } catch (error) {
      return why(`the receipt of ${ours} cannot be read`, error);
    }
  }
  const paying = receipts.find((receipt) => spendOf(receipt, terms).kind === "paid");
  if (paying) return paid(chain, paying, terms, options);
  const reverted = receipts.find((receipt) => receipt.status === "reverted");

  let used: boolean;
  try {
    used = await chain.authorizationUsed(terms.token, terms.from, terms.nonce);
  } catch (error) {
    return why("the token's authorizationState cannot be read", error);
  }
  if (!used) {
    if (!reverted) return { outcome: "unused" };
    return { outcome: "failed", cause: "reverted", code: "failedOnChain", by: { txHash: reverted.transactionHash, blockNumber: reverted.blockNumber } };
  }

  let spender;
  try {
    spender = await chain.spender(terms.token, terms.from, terms.nonce);
  } catch (error) {
    return why("the authorization is used, and the token's logs cannot be read", error);
  }
  if (!spender) {
    return { outcome: "undecided", reason: "the authorization is used, and no log of it was found (the token state index cannot say, and it is older than LOG_LOOKBACK_BLOCKS)" };
  }
  const by = { txHash: spender.txHash, blockNumber: spender.blockNumber };
  if (spender.how === "canceled") return { outcome: "failed", cause: "canceled", code: "alreadyUsed", by };
  let receipt = receipts.find((r) => r.transactionHash.toLowerCase() === spender.txHash.toLowerCase());
  if (!receipt) {
    try {
      receipt = await chain.receipt(spender.txHash);
    } catch (error) {
      return why(`the authorization was used by ${spender.txHash}, whose receipt cannot be read`, error);
    }
  }
  if (!receipt) return { outcome: "undecided", reason: `the authorization was used by ${spender.txHash}, whose receipt is not available` };
  const spend = spendOf(receipt, terms);
  if (spend.kind === "paid") return paid(chain, receipt, terms, options);
  if (spend.kind === "otherTransfer") return { outcome: "failed", cause: "spentElsewhere", code: "alreadyUsed", by };
  if (spend.kind === "canceled") return { outcome: "failed", cause: "canceled", code: "alreadyUsed", by };
  return { outcome: "undecided", reason: `the token's log names ${spender.txHash}, whose receipt holds no use of the authorization (a reorganisation?)` };
}

async function paid(chain: DecisionChain, receipt: TransactionReceipt, terms: PaymentTerms, options: DecideOptions): Promise<PaymentDecision> {
  const spend = spendOf(receipt, terms);
  if (spend.kind !== "paid") throw new Error("paid() called on a receipt that does not pay");
  let blockTimestamp: bigint;
  if (options.knownBlock?.number === receipt.blockNumber) blockTimestamp = options.knownBlock.timestamp;
  else {
    try {
      blockTimestamp = await chain.blockTime(receipt.blockNumber);
    } catch (error) {
      return why(`${receipt.transactionHash} paid, and its block's time cannot be read`, error);
    }
  }
  return {
    outcome: "paid",
    transfer: { txHash: receipt.transactionHash, from: spend.from, to: spend.to, value: spend.value, blockNumber: receipt.blockNumber, blockTimestamp },
  };
}

/** The terms of a payer's authorization of the token `token`. */
export function termsOfAuthorization(token: Address, authorization: Pick<PayerPayload["authorization"], "from" | "to" | "value" | "nonce">): PaymentTerms {
  return { token, from: authorization.from, nonce: authorization.nonce, payTo: authorization.to, value: BigInt(authorization.value) };
}

/** The terms of the payment a ledger row settles. */
export function termsOf(record: SettlementRecord): PaymentTerms {
  return { token: record.key.token, from: record.key.authorizer, nonce: record.key.nonce, payTo: record.payee, value: record.value };
}

/**
 * The revert penalty a failed payment earns its payer: until `seconds` past the deciding block's time
 * (chain time); undefined when penalties are off.
 */
export function penaltyOf(record: SettlementRecord, failed: Extract<PaymentDecision, { outcome: "failed" }>, blockTime: bigint, seconds: number): Penalty | undefined {
  if (seconds <= 0) return undefined;
  return { chainId: record.key.chainId, token: record.key.token, ...penaltySubject(record.key.authorizer), until: blockTime + BigInt(seconds), txHash: failed.by.txHash };
}

/**
 * The paying transfer a settled row records. A row becomes settled only from a `paid` decision, whose
 * transfer is the row's payee and value exactly (what {@link spendOf} matched), with its hash and block.
 */
export function paidTransferOf(record: SettlementRecord): PaidTransfer {
  if (record.status !== "settled" || !record.txHash || record.blockNumber === undefined || record.blockTimestamp === undefined) {
    throw new Error(`settlement ${record.id} is not settled`);
  }
  return { txHash: record.txHash, from: record.key.authorizer, to: record.payee, value: record.value, blockNumber: record.blockNumber, blockTimestamp: record.blockTimestamp };
}
