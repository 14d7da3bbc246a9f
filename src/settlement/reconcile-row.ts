// What now for one unfinished row, from the chain: the reconciler's check of a row, and a settle's when its transaction's nonce went elsewhere.
import type { Address } from "viem";
import type { BroadcastRecord, SettlementRecord } from "../ledger/types.js";
import { KitErrorOf } from "../protocol/errors.js";
import { decideRow, type Applied, type DecisionDeps } from "./apply-decision.js";
import type { PaymentReads } from "./payment-reads.js";
import type { SettlementDeps } from "./deps.js";

/**
 * What the reconciler did to a row. `settled`/`reverted`/`failed`: it moved the row to its outcome;
 * `rebroadcast`: the node had forgotten the transaction and got the stored one again; `requeued`: its
 * owner did not send in time and the row went back to the key holders; `abandoned`: nothing was sent
 * before the deadline.
 */
export type ReconcilerAction = "settled" | "reverted" | "failed" | "rebroadcast" | "requeued" | "abandoned";

/** A row left for a later round because the chain cannot tell yet whether its payment was made. */
export class UndecidedPaymentError extends KitErrorOf("UndecidedPaymentError", "payment_undecided") {}

/** What checking a row takes: the decision's writes, the key leases (a row of another's key is left to its holder) and the clock. */
export type RowCheckDeps = DecisionDeps & Pick<SettlementDeps, "keys" | "now">;

/** Sends again, through this instance's relayer, a transaction it follows: sent, not needed, or undefined when it follows none there (the reconciler's option `resendFollowed`). */
export type ResendFollowed = (chainId: number, tx: { relayer: Address; relayerNonce: number }) => Promise<boolean | undefined>;

const LIVE: ReadonlySet<BroadcastRecord["state"]> = new Set(["signed", "accepted", "mined", "reverted"]);

/**
 * Decides one unfinished row from the chain; undefined when it is still pending and nothing had to be done.
 * A claim whose owner did not send goes back to the queue, or is given up at its deadline. A sent row gets
 * the payment decision with its transactions ({@link decideRow}); unused, it fails once the authorization
 * expired, waits while the node still holds ours, is broadcast again from its stored raw form when the node
 * forgot it, and fails once no transaction of ours can be mined. Rejects with {@link UndecidedPaymentError}
 * when the chain cannot tell yet: the row stays as it is.
 */
export async function reconcileRow(deps: RowCheckDeps, chain: PaymentReads, row: SettlementRecord, resendFollowed?: ResendFollowed): Promise<ReconcilerAction | undefined> {
  const { ledger } = deps;
  const live = row.transactions.filter((tx) => LIVE.has(tx.state));
  if (row.status === "claimed" && live.length === 0) {
    const now = deps.now();
    // Requeued only with its call: an owner that died before simulating leaves nothing to send.
    if (row.owner !== undefined && row.call && (row.ownerExpiresAt ?? 0) <= now && (row.deadlineAt ?? 0) > now) {
      return (await ledger.requeue(row.id, row.owner)) ? "requeued" : undefined;
    }
    if ((row.deadlineAt ?? 0) <= now) {
      // Write-ahead: no recorded transaction means nothing was broadcast; a late owner's record is now refused.
      return (await ledger.withdraw(row.id, { code: "notSent", owner: row.owner ?? null })) ? "abandoned" : undefined;
    }
    return undefined;
  }
  if (row.status !== "sent" && row.status !== "claimed") return undefined;

  const decided = actionOf(row, await decideLive(deps, chain, row, live));
  if (decided) return decided;
  // Unused: ours is not mined (or a receipt read missed it: the next round sees it).
  const head = await chain.head();
  if (head.timestamp >= row.validBefore) {
    // No later block can use it (the token requires block.timestamp < validBefore), and nothing did.
    await ledger.markFailed(row.id, { code: "expired" });
    return "failed";
  }
  for (const tx of live) if (await chain.knows(tx.hash)) return undefined; // still in the node's pool
  const latest = live.at(-1);
  // Followed by this instance's relayer: sent again by it, in the key's nonce order (its lifecycle goes by chain
  // time, which stands still on a chain that mines only on demand).
  if (latest && resendFollowed) {
    const again = await resendFollowed(row.key.chainId, latest);
    if (again !== undefined) return again ? "rebroadcast" : undefined;
  }
  // A forgotten transaction is broadcast again only by its key's lease holder.
  if (latest && !deps.keys.holds(latest.relayer)) return undefined;
  if (latest) {
    const again = await chain.rebroadcast(latest);
    if (again === "accepted") return "rebroadcast";
    // The node holds it, or the slot is not mined yet (a pool may hold it): never failed while it may be mined.
    if (again !== "spent") return undefined;
  }
  // Its nonce is mined (or none of ours is live). Unless by ours (or the authorization was spent meanwhile), none of ours can be mined now.
  const late = actionOf(row, await decideLive(deps, chain, row, live));
  if (late) return late;
  for (const tx of live) await ledger.markTransaction(tx.hash, "dropped");
  await ledger.markFailed(row.id, { code: "failedOnChain" });
  return "failed";
}

/** The payment decision over the row's live transactions, applied: their receipts read (a read that fails rejects). */
async function decideLive(deps: DecisionDeps, chain: PaymentReads, row: SettlementRecord, live: BroadcastRecord[]): Promise<Applied> {
  const receipts = await Promise.all(live.map((tx) => chain.receipt(tx.hash)));
  const reverted = live.find((_, i) => receipts[i]?.status === "reverted");
  const versions = reverted ? live.filter((tx) => tx.relayerNonce === reverted.relayerNonce && tx.relayer === reverted.relayer).map((tx) => tx.hash) : [];
  return decideRow(deps, chain, row, { ours: receipts.filter((r) => r !== undefined).reverse() }, reverted ? { mined: reverted.hash, reverted: { hash: reverted.hash, versions } } : {});
}

/** The reconciler's action for what a decision made of a row; undefined while the authorization is unused. */
function actionOf(row: SettlementRecord, applied: Applied): ReconcilerAction | undefined {
  switch (applied.outcome) {
    case "undecided":
      throw new UndecidedPaymentError(`settlement ${row.id} left undecided: ${applied.reason}`);
    case "unused":
      return undefined;
    case "settled":
      return "settled";
    case "failed":
      // Ours mined and reverted (the failure names it), or spent by something else while ours was not mined.
      return applied.txHash ? "reverted" : "failed";
  }
}
