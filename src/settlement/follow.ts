import type { Hex } from "viem";
import { waitForReceipt } from "../chain/receipt.js";
import type { SentTransaction } from "../chain/relayer/index.js";
import { IllegalTransitionError, type SettlementRecord } from "../ledger/types.js";
import { decidePayment, penaltyOf, termsOf, type PaidTransfer, type PaymentDecision } from "./decision.js";
import { PaymentAttribute, paymentAttributes, step } from "../telemetry/spans.js";
import { resultOf, type SettlementNetwork, type SettlementResult, type SettlementSteps } from "./steps.js";

/**
 * Waits until `deadline` for the receipt of the transaction, whichever of its versions is mined
 * (the relayer replaces it when stuck), and records the outcome; a row still pending at the deadline
 * is left to the reconciler. When the relayer gave the nonce to a gap filler (the call no longer
 * succeeds), the row is decided at once.
 */
export async function followTransaction(steps: SettlementSteps, record: SettlementRecord, network: SettlementNetwork, sent: Pick<SentTransaction, "hashes" | "superseded" | "early">, deadline: number): Promise<SettlementResult> {
  const { ledger, logger } = steps;
  const sentAt = performance.now();
  // The latest block seen with the receipt reads: usually the mining block, whose time the answer carries.
  let latestBlock: { number: bigint; timestamp: bigint } | undefined;
  // Asked with the send: a chain that mined it at once has answered already.
  const early = steps.confirmations <= 1 ? await sent.early : undefined;
  if (early?.latest) latestBlock = early.latest;
  const receipt = early?.receipt ?? await step("x402 wait", {}, async (span) => {
    const mined = await waitForReceipt(network.client, {
      hash: () => sent.hashes(),
      confirmations: steps.confirmations,
      timeoutMs: Math.max(0, deadline - performance.now()),
      pollingIntervalMs: steps.pollingIntervalMs,
      onRpcError: () => steps.observe?.rpcError?.(network.name),
      abandon: () => sent.superseded,
      onLatestBlock: (block) => (latestBlock = block),
    });
    span?.setAttributes(paymentAttributes({ txHash: mined?.transactionHash }));
    return mined;
  });
  if (!receipt) {
    const latest = sent.hashes().at(-1);
    if (sent.superseded && steps.reconcile) {
      logger.warn({ id: record.id, txHash: latest }, "settle transaction's nonce went to a gap filler; deciding the row now");
      await steps.reconcile((await ledger.getById(record.id)) ?? record).catch((error: unknown) => logger.warn({ id: record.id, err: String(error) }, "reconciler: row left for the next round"));
    } else {
      // Not mined by the deadline: a cancel or a substitute may have spent the authorization meanwhile.
      const decision = await decided(() => decidePayment(network.chain, termsOf(record), { ours: sent.hashes() }));
      if (decision.outcome === "paid" || decision.outcome === "failed" || decision.outcome === "undecided") return recordDecision(steps, record, network, decision);
      logger.warn({ id: record.id, txHash: latest }, "settle receipt not confirmed by the deadline; the reconciler follows it");
    }
    await ledger.deferCheck(record.id, 0).catch(() => undefined);
    // With the ledger unreachable, what this instance knows: the transaction it sent, not yet mined.
    const known = (await ledger.getById(record.id).catch(() => undefined)) ?? { ...record, status: "sent" as const, ...(latest ? { txHash: latest } : {}) };
    return resultOf(known);
  }
  const hash = receipt.transactionHash;
  steps.observe?.confirmationWait?.(network.name, (performance.now() - sentAt) / 1000);
  if (receipt.status === "reverted") {
    // The other versions share its nonce: none of them can be mined now.
    for (const other of sent.hashes()) if (other !== hash) await ledger.markTransaction(other, "replaced").catch(() => undefined);
    await steps.outbox.writeOrKeep(`transaction ${hash} reverted`, () => ledger.markTransaction(hash, "reverted"));
    steps.observe?.revertedGas?.(network.name, receipt.gasUsed);
  }
  return recordDecision(steps, record, network, await decided(() => decidePayment(network.chain, termsOf(record), { ours: [receipt], ...(latestBlock ? { knownBlock: latestBlock } : {}) })), hash);
}

/** The payment decision, within a traced request a span naming its outcome. */
function decided(decide: () => Promise<PaymentDecision>): Promise<PaymentDecision> {
  return step("x402 decision", {}, async (span) => {
    const decision = await decide();
    span?.setAttribute(PaymentAttribute.outcome, decision.outcome);
    return decision;
  });
}

/**
 * Records what the payment decision said of a row this settle followed, and answers it: settled by the
 * paying transfer (ours, or a copy of ours mined first); failed, its payer penalised; undecided (503),
 * left to the reconciler. `ours`: our transaction that was mined, if any.
 */
export async function recordDecision(steps: SettlementSteps, record: SettlementRecord, network: SettlementNetwork, decision: PaymentDecision, ours?: Hex): Promise<SettlementResult> {
  const { ledger, logger } = steps;
  switch (decision.outcome) {
    case "paid":
      // Anyone can resend our transaction's input from the pending pool with a higher tip: the copy paid
      // the payee, ours reverted. The payment was made, and the payer did nothing wrong.
      if (ours && decision.transfer.txHash !== ours) {
        logger.warn({ id: record.id, txHash: ours, paidBy: decision.transfer.txHash, payer: record.key.authorizer }, "settle transaction reverted: another transaction used the authorization first; settled with its hash");
      }
      return recordSettled(steps, record, decision.transfer);
    case "unused":
    case "undecided": {
      // Failing it (and penalising its payer) would be a guess: the copy of a pending transaction is
      // common enough. The row stays sent; the reconciler decides it from the chain, and a retry of this
      // settle gets that outcome.
      const reason = decision.outcome === "undecided" ? decision.reason : "the transaction succeeded without using the authorization";
      logger.warn({ id: record.id, txHash: ours, payer: record.key.authorizer, reason }, "settle outcome not known yet: answered 503, left to the reconciler");
      await ledger.deferCheck(record.id, 0).catch(() => undefined);
      return { kind: "undecided", reason, ...(ours ? { txHash: ours } : {}) };
    }
    case "failed": {
      const mine = decision.cause === "reverted" ? decision.by.txHash : ours;
      const failure = { code: decision.code, ...(mine ? { txHash: mine } : {}) };
      await ledger.markFailed(record.id, failure).catch((error: unknown) => {
        steps.outbox.add(`settlement ${record.id} failed`, () => ledger.markFailed(record.id, failure));
        steps.onLedgerFault?.(error);
        logger.warn({ id: record.id, txHash: mine, err: String(error) }, "settlement failed while the ledger is unreachable: record kept in the outbox");
      });
      await penalize(steps, record, network, decision);
      // Spent by something else: no transaction is named (ours did not pay, and the other is not this payment).
      return { kind: "failed", code: decision.code, ...(decision.cause === "reverted" ? { txHash: decision.by.txHash } : {}) };
    }
  }
}

/**
 * Records the row settled by `outcome` and answers settled. Mined is mined: with the ledger unreachable
 * the answer is still `settled`, and the record waits in the outbox until the database is back.
 */
async function recordSettled(steps: SettlementSteps, record: SettlementRecord, transfer: PaidTransfer): Promise<SettlementResult> {
  const { ledger, logger } = steps;
  const outcome = { txHash: transfer.txHash, blockNumber: transfer.blockNumber, blockTimestamp: transfer.blockTimestamp };
  try {
    return { kind: "settled", record: await ledger.markSettled(record.id, outcome), transfer };
  } catch (error) {
    if (error instanceof IllegalTransitionError) throw error;
    steps.outbox.add(`settlement ${record.id} settled by ${outcome.txHash}`, () => ledger.markSettled(record.id, outcome));
    steps.onLedgerFault?.(error);
    logger.warn({ id: record.id, txHash: outcome.txHash, err: String(error) }, "settlement mined while the ledger is unreachable: answered settled, record kept in the outbox");
    return { kind: "settled", record: { ...record, status: "settled", ...outcome }, transfer };
  }
}

/** A payment failed by its payer's doing (a revert, a cancel, a substitute under its nonce): refuse the payer for a while. */
async function penalize(steps: SettlementSteps, record: SettlementRecord, network: SettlementNetwork, failed: Extract<PaymentDecision, { outcome: "failed" }>): Promise<void> {
  const { logger, revertPenaltySeconds, ledger } = steps;
  logger.warn({ id: record.id, txHash: failed.by.txHash, payer: record.key.authorizer, cause: failed.cause }, failed.cause === "reverted" ? "settlement reverted on chain" : "settlement failed: the authorization was spent by another transaction");
  if (revertPenaltySeconds <= 0) return;
  // The deciding block's time; the wall clock only when the chain cannot say (a penalty, not a payment).
  const blockTime = await network.chain.blockTime(failed.by.blockNumber).catch(() => BigInt(Math.floor(Date.now() / 1000)));
  const penalty = penaltyOf(record, failed, blockTime, revertPenaltySeconds);
  if (!penalty) return;
  try {
    await steps.outbox.writeOrKeep(`revert penalty of ${record.key.authorizer}`, () => ledger.penalize(penalty));
  } catch (error) {
    logger.error({ id: record.id, err: String(error) }, "ledger: revert penalty not recorded");
  }
}
