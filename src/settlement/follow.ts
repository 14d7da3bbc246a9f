import { waitForReceipt } from "../chain/receipt.js";
import type { SentTransaction } from "../chain/relayer/index.js";
import type { SettlementRecord } from "../ledger/types.js";
import { decideRow, type Applied } from "./apply-decision.js";
import { reconcileRow } from "./reconcile-row.js";
import type { SettlementDeps } from "./deps.js";
import { answerOfRow, decidedAnswer, type SettlementResult } from "./result.js";
import type { NetworkRuntime } from "./runtime.js";
import { paymentAttributes, step } from "../telemetry/spans.js";

/**
 * Waits until `deadline` for the receipt of the transaction, whichever of its versions is mined (the
 * relayer replaces it when stuck), and answers what the payment decision makes of it. Not mined by the
 * deadline, the decision is asked with every version; when the relayer gave the nonce to a gap filler
 * (the call no longer succeeds), the row is checked at once as the reconciler would.
 */
export async function followTransaction(deps: SettlementDeps, record: SettlementRecord, network: NetworkRuntime, sent: Pick<SentTransaction, "hashes" | "superseded" | "early">, deadline: number): Promise<SettlementResult> {
  const sentAt = performance.now();
  // The latest block seen with the receipt reads: usually the mining block, whose time the answer carries.
  let latestBlock: { number: bigint; timestamp: bigint } | undefined;
  // Asked with the send: a chain that mined it at once has answered already.
  const early = deps.settings.confirmations <= 1 ? await sent.early : undefined;
  if (early?.latest) latestBlock = early.latest;
  const receipt = early?.receipt ?? await step("x402 wait", {}, async (span) => {
    const mined = await waitForReceipt(network.client, {
      hash: () => sent.hashes(),
      confirmations: deps.settings.confirmations,
      timeoutMs: Math.max(0, deadline - performance.now()),
      pollingIntervalMs: deps.settings.pollingIntervalMs,
      onRpcError: () => deps.observer.rpcError(network.config.network),
      abandon: () => sent.superseded,
      onLatestBlock: (block) => (latestBlock = block),
    });
    span?.setAttributes(paymentAttributes({ txHash: mined?.transactionHash }));
    return mined;
  });
  if (!receipt) return atDeadline(deps, record, network, sent);
  const hash = receipt.transactionHash;
  deps.observer.confirmationWait(network.config.network, (performance.now() - sentAt) / 1000);
  // Reverted: the other versions share its nonce, so none of them can be mined now.
  const reverted = receipt.status === "reverted" ? { hash, versions: sent.hashes() } : undefined;
  if (reverted) deps.observer.revertedGas(network.config.network, receipt.gasUsed);
  const applied = await decideRow(deps, network.paymentReads, record, { ours: [receipt], ...(latestBlock ? { knownBlock: latestBlock } : {}) }, { mined: hash, ...(reverted ? { reverted } : {}) });
  return answerOf(deps, record, applied, hash);
}

/**
 * Not mined by the deadline (or its nonce went to a gap filler): the decision over every version of ours
 * (a cancel or a substitute may have spent the authorization meanwhile). Paid, failed or undecided, that is
 * the answer; still unused, the row stays sent for the reconciler and the answer says so
 * ({@link answerOfRow}: `pending`).
 */
async function atDeadline(deps: SettlementDeps, record: SettlementRecord, network: NetworkRuntime, sent: Pick<SentTransaction, "hashes" | "superseded">): Promise<SettlementResult> {
  const { ledger, logger } = deps;
  const latest = sent.hashes().at(-1);
  if (sent.superseded) {
    logger.warn({ id: record.id, txHash: latest }, "settle transaction's nonce went to a gap filler; deciding the row now");
    await reconcileRow(deps, network.paymentReads, (await ledger.getById(record.id)) ?? record).catch((error: unknown) => logger.warn({ id: record.id, err: String(error) }, "reconciler: row left for the next round"));
  } else {
    const applied = await decideRow(deps, network.paymentReads, record, { ours: sent.hashes() });
    if (applied.outcome !== "unused") return answerOf(deps, record, applied);
    logger.warn({ id: record.id, txHash: latest }, "settle receipt not confirmed by the deadline; the reconciler follows it");
  }
  await ledger.deferCheck(record.id, 0).catch(() => undefined);
  // With the ledger unreachable, what this instance knows: the transaction it sent, not yet mined.
  const known = (await ledger.getById(record.id).catch(() => undefined)) ?? { ...record, status: "sent" as const, ...(latest ? { txHash: latest } : {}) };
  return known.status === "settled" || known.status === "failed" ? answerOfRow(deps, network, known) : { kind: "pending", ...(known.txHash ? { txHash: known.txHash } : {}) };
}

/**
 * A settle's answer from what the decision made of the row it followed: settled, failed, or, when the
 * chain cannot tell (or our mined transaction did not use the authorization), undecided (503) with the row
 * left sent for the reconciler, so that a retry of this settle gets its outcome.
 */
async function answerOf(deps: SettlementDeps, record: SettlementRecord, applied: Applied, ours?: SettlementRecord["txHash"]): Promise<SettlementResult> {
  if (applied.outcome === "settled" || applied.outcome === "failed") return decidedAnswer(applied);
  // Failing it (and penalising its payer) would be a guess: the copy of a pending transaction is common enough.
  const reason = applied.outcome === "undecided" ? applied.reason : "the transaction succeeded without using the authorization";
  deps.logger.warn({ id: record.id, txHash: ours, payer: record.key.authorizer, reason }, "settle outcome not known yet: answered 503, left to the reconciler");
  await deps.ledger.deferCheck(record.id, 0).catch(() => undefined);
  return { kind: "undecided", reason, ...(ours ? { txHash: ours } : {}) };
}
