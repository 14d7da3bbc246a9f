import { TransactionReceiptNotFoundError } from "viem";
import { knowsTransaction } from "../receipt.js";
import { broadcast, type Broadcast } from "./broadcast.js";
import type { InFlight, RelayerKey } from "./key.js";
import type { RelayerContext } from "./types.js";

/**
 * What broadcasting a transaction of the key again, as it was signed, came to:
 * - `accepted`: the node took it anew (it had lost it: dropped from its pool, a restart, a backend that never got it);
 * - `known`: the node holds it already (Cronos: `tx already in mempool`) — nothing was lost;
 * - `unknown`: no answer (a transport fault): looked at again next round;
 * - `mined`: its nonce is mined by one of its versions (the next round forgets it);
 * - `taken`: its nonce is mined by a transaction this relayer did not send there (none of its versions can be mined now);
 * - `pending`: the node's next nonce is past it, but nothing is mined there yet: a pool holds the slot (ours, most
 *   likely, where the node shows no more than its first transactions by hash): the transaction is kept;
 * - `waits`: refused for now (the node lacks a lower nonce of the key, its pool is full, …);
 * - `underpriced`: refused for its fee: a re-priced version may be taken.
 */
export type Resent = "accepted" | "known" | "unknown" | "mined" | "taken" | "pending" | "waits" | "underpriced";

/**
 * Broadcasts `tx`'s latest version again as it was signed, and says what came of it ({@link Resent}). The
 * events say what happened, not what was feared: `dropped` and `rebroadcast` only when the node took it anew.
 */
export async function resend(ctx: RelayerContext, key: RelayerKey, tx: InFlight): Promise<Resent> {
  if (!key.maySend()) return "waits";
  const again: Broadcast = await broadcast(ctx.client, tx.latest.raw);
  switch (again.outcome) {
    case "accepted":
      ctx.onEvent({ kind: "dropped", from: key.address, nonce: tx.nonce, hash: tx.latest.hash });
      ctx.onEvent({ kind: "rebroadcast", from: key.address, nonce: tx.nonce, hash: tx.latest.hash });
      return "accepted";
    case "known":
      return "known";
    case "unknown":
      return "unknown";
    case "refused":
      ctx.onEvent({ kind: "refused", from: key.address, nonce: tx.nonce, hash: tx.latest.hash, refusal: again.refusal.kind });
      if (again.refusal.kind === "nonceBehind") return whoHolds(ctx, key, tx);
      if (again.refusal.kind === "feeTooLow") return "underpriced";
      return "waits";
  }
}

/**
 * The node's next nonce is past `tx`'s: its slot is used. By whom decides what follows. Nothing mined there
 * yet: a pool holds it, ours most likely (`pending`, kept). Mined by one of its versions: `mined`. Mined by
 * another transaction (the key used elsewhere): `taken`, and the key no longer follows it (its settle is
 * decided from the chain).
 */
export async function whoHolds(ctx: RelayerContext, key: RelayerKey, tx: InFlight): Promise<"mined" | "taken" | "pending"> {
  // Asked together: the transport sends them in one batch, so one backend of a load-balanced RPC answers all.
  const [mined, ...receipts] = await Promise.all([
    ctx.client.getTransactionCount({ address: key.address, blockTag: "latest" }),
    ...tx.hashes().map((hash) =>
      ctx.client.getTransactionReceipt({ hash }).then(
        () => true,
        (error: unknown) => {
          if (error instanceof TransactionReceiptNotFoundError) return false;
          throw error;
        },
      ),
    ),
  ]);
  if (mined <= tx.nonce) return "pending";
  if (receipts.some((found) => found)) return "mined";
  tx.superseded = true;
  if (key.inFlight.get(tx.nonce) === tx) key.inFlight.delete(tx.nonce);
  ctx.onEvent({ kind: "nonceTaken", from: key.address, nonce: tx.nonce, hash: tx.latest.hash });
  return "taken";
}

/**
 * The key's transactions below `nonce` that the node does not know go out again, lowest nonce first (a node
 * that lost its pool, or a backend that never got them: a Cronos node admits no nonce above a missing one).
 * Stops at the first the node will not take now (`blocked`). `resent` when the node took one anew, `there`
 * when it had them all.
 */
export async function resendBelow(ctx: RelayerContext, key: RelayerKey, nonce: number): Promise<"resent" | "there" | "blocked"> {
  const lower = [...key.inFlight.values()].filter((tx) => tx.nonce < nonce).sort((a, b) => a.nonce - b.nonce);
  let resent = false;
  for (const tx of lower) {
    if (await knowsTransaction(ctx.client, tx.latest.hash)) continue;
    const again = await resend(ctx, key, tx);
    if (again === "accepted") resent = true;
    else if (again !== "known" && again !== "mined") return "blocked";
  }
  return resent ? "resent" : "there";
}
