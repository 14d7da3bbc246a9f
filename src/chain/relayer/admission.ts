import { feesAtLeast, initialFees, quoteForCap, type Fees } from "../fees.js";
import { leastFeePerGas, type SendRefusal } from "../node-errors.js";
import { knowsTransaction } from "../receipt.js";
import { broadcast, sign } from "./broadcast.js";
import { feeFields, InFlight, type RelayerKey } from "./key.js";
import { resendBelow } from "./resend.js";
import { KeyNotLeasedError, RelaySendError, type RelayerContext, type RelayHooks, type RelayRequest, type SignedRelay } from "./types.js";

/** Waits between tries of a send the node refused for now: doubling from the first to the last. */
const BACKOFF_MS = { first: 100, last: 2_000 } as const;
/** Tries of one send at most, whatever its deadline (each refusal moves it on: a nonce adopted, a fee raised, a wait). */
const MAX_TRIES = 40;

/** What to do after a refusal: broadcast again now, after a wait, or give up. */
type Next = "now" | "later" | "stop";

/**
 * Signs and broadcasts a new transaction of `key` (under its lock), and keeps it in flight once the node
 * took it (or may have: no answer). A refused send never takes a nonce: the key's next nonce moves only
 * when a transaction is out there. By what the node said ({@link SendRefusal}):
 * - the nonce is used (`nonceBehind`, or another transaction holds it in the pool): the node's `expected`
 *   is adopted and the request signed there;
 * - the node lacks the key's earlier transactions (`nonceAhead`): when it does not know them and they are not
 *   mined (a node that lost its pool, or never got them), they go out again in nonce order and this one after
 *   them; when they are out there (a backend of a load-balanced RPC that lags), the same transaction is
 *   broadcast again after a wait, while `deadline` allows; when the key follows none there, its next nonce is
 *   the node's;
 * - under-priced (`feeTooLow`): re-signed at what the node named (and ≥ 12.5 % more), up to the fee cap;
 *   above it, {@link FeeCapError}: nothing was sent;
 * - a full pool: again after a wait, while `deadline` allows;
 * - the sender's funds, or a transaction never admissible: {@link RelaySendError}, nothing sent.
 * Each version is shown to `hooks` before its broadcast; a version given up is reported `refused` then.
 */
export async function sendNew(ctx: RelayerContext, key: RelayerKey, request: RelayRequest, hooks: RelayHooks, deadline: number): Promise<InFlight> {
  if (!key.maySend()) throw new KeyNotLeasedError(key.address);
  const quote = await quoteForCap(ctx.quote, ctx.cap);
  let fees: Fees = initialFees(quote, ctx.cap);
  let version: SignedRelay | undefined;
  let backoff: number = BACKOFF_MS.first;
  for (let tries = 1; ; tries++) {
    const nonce = await key.nonce(ctx.client);
    if (!version || version.nonce !== nonce || !signedWith(version, fees)) {
      if (version) hooks.afterBroadcast?.(version, "refused");
      version = await sign(key, ctx.chainId, request, nonce, fees);
      try {
        await hooks.beforeBroadcast?.(version);
      } catch (error) {
        throw new RelaySendError(version.hash, false, { cause: error });
      }
    }
    if (!key.mayBroadcast(version)) {
      // Recorded, but the lease went meanwhile (before its first broadcast, or while a refusal was waited out):
      // the record stands, and the key's holder sends it (this instance once its lease is renewed, or the next
      // holder, who adopts it from the ledger).
      const recorded = new InFlight(nonce, request, version, fees, hooks);
      if (key.stillLeased(version)) {
        key.inFlight.set(nonce, recorded);
        key.advance();
        recorded.sentAt = quote.at;
      }
      throw new RelaySendError(version.hash, true, { cause: new KeyNotLeasedError(key.address), transaction: recorded });
    }
    const sent = await broadcast(ctx.client, version.raw, version.hash);
    if (sent.outcome !== "refused") {
      // Taken, or no answer (the node may hold it): followed like any other; a lifecycle round re-broadcasts it if not.
      const tx = new InFlight(nonce, request, version, fees, hooks);
      // Its wait is counted from the chain's clock when it was priced.
      tx.sentAt = quote.at;
      key.inFlight.set(nonce, tx);
      key.advance();
      if (sent.outcome === "unknown") {
        hooks.afterBroadcast?.(version, "unknown");
        throw new RelaySendError(version.hash, true, { cause: sent.error, transaction: tx });
      }
      hooks.afterBroadcast?.(version, "accepted");
      if ("early" in sent && sent.early) tx.early = sent.early;
      return tx;
    }
    ctx.onEvent({ kind: "refused", from: key.address, nonce, hash: version.hash, refusal: sent.refusal.kind });
    let next: Next;
    try {
      next = await afterRefusal(ctx, key, version, sent.refusal);
      if (next === "now" && sent.refusal.kind === "feeTooLow") fees = feesAtLeast(fees, await ctx.quote(true), leastFeePerGas(sent.refusal.atLeast, request.gas), ctx.cap);
    } catch (error) {
      // The fee cap stopped it, or the chain could not be read: the version was never out there.
      hooks.afterBroadcast?.(version, "refused");
      throw error;
    }
    if (next === "stop" || tries >= MAX_TRIES || (next === "later" && performance.now() + backoff > deadline)) {
      hooks.afterBroadcast?.(version, "refused");
      throw new RelaySendError(version.hash, false, { cause: sent.error });
    }
    if (next === "later") {
      await new Promise((resolve) => setTimeout(resolve, backoff));
      backoff = Math.min(backoff * 2, BACKOFF_MS.last);
    }
  }
}

/** Whether `version` was signed with `fees`. */
function signedWith(version: SignedRelay, fees: Fees): boolean {
  const { feeCap, priorityFee } = feeFields(fees);
  return version.feeCap === feeCap && version.priorityFee === priorityFee;
}

/** What a refusal of `version` (a new transaction at its nonce) leads to; the key's next nonce moved when the slot is not ours to use. */
async function afterRefusal(ctx: RelayerContext, key: RelayerKey, version: SignedRelay, refusal: Exclude<SendRefusal, { kind: "known" }>): Promise<Next> {
  switch (refusal.kind) {
    case "nonceBehind":
    case "replacementRefused": {
      // The slot is used (mined, or held in the pool) by a transaction the key does not follow here: the key
      // follows every transaction it sent until mined, and a new send is signed past them all.
      const pending = await ctx.client.getTransactionCount({ address: key.address, blockTag: "pending" });
      const expected = Math.max(refusal.kind === "nonceBehind" ? (refusal.expected ?? 0) : 0, pending, version.nonce + 1);
      adopt(ctx, key, version.nonce, expected);
      return "now";
    }
    case "nonceAhead":
      return catchUp(ctx, key, version.nonce, refusal.expected);
    case "feeTooLow":
      return "now";
    case "poolFull":
      return "later";
    case "fundsLow":
    case "invalid":
      return "stop";
  }
}

function adopt(ctx: RelayerContext, key: RelayerKey, nonce: number, expected: number): void {
  key.moveTo(expected);
  ctx.onEvent({ kind: "nonceAdopted", from: key.address, nonce, expected: key.localNonce ?? expected });
}

/**
 * The node expects `expected`, below `nonce`: it lacks the key's transactions between them. Read together
 * (one batch: one backend of a load-balanced RPC), the key's mined nonce says whether that node lags behind
 * the chain; else the key's lowest transaction there says whether they are out there (a backend that has not
 * seen them yet: wait) or lost (they go out again, in nonce order). When the key follows none there, its
 * local nonce ran ahead of what any node took: the node's is adopted.
 */
async function catchUp(ctx: RelayerContext, key: RelayerKey, nonce: number, said: number | undefined): Promise<Next> {
  const mined = await ctx.client.getTransactionCount({ address: key.address, blockTag: "latest" });
  if (mined >= nonce) return "later";
  const expected = said ?? mined;
  const lowest = [...key.inFlight.keys()].filter((n) => n >= expected && n < nonce).sort((a, b) => a - b)[0];
  if (lowest !== expected) {
    if (expected < mined) return "later";
    adopt(ctx, key, nonce, expected);
    return "now";
  }
  if (await knowsTransaction(ctx.client, key.inFlight.get(lowest)!.latest.hash)) return "later";
  return (await resendBelow(ctx, key, nonce)) === "resent" ? "now" : "later";
}
