import type { Hex, PublicClient } from "viem";
import { FeeCapError, feeCap, feesAtLeast, initialFees, neededFee, replacementFees, type FeeQuote, type Fees } from "../fees.js";
import { leastFeePerGas } from "../node-errors.js";
import { knowsTransaction } from "../receipt.js";
import { isRevert } from "../revert.js";
import { broadcast, sign } from "./broadcast.js";
import { InFlight, type RelayerKey } from "./key.js";
import { resend, resendBelow, whoHolds } from "./resend.js";
import type { RelayerContext, RelayRequest } from "./types.js";

const SELF_TRANSFER_GAS = 21_000n;

/**
 * One lifecycle round of a key with transactions in flight, at chain time `now`: forgets what is mined,
 * then (under the key's lock) fills the gaps below its stale transactions and unsticks each of them.
 */
export async function tendKey(ctx: RelayerContext, key: RelayerKey, now: bigint): Promise<void> {
  key.minedBelow(await ctx.client.getTransactionCount({ address: key.address, blockTag: "latest" }));
  // Not this instance's to send from now (its lease lapsing or gone): nothing is re-broadcast, replaced or filled.
  if (key.inFlight.size === 0 || !key.maySend()) return;
  for (const tx of key.inFlight.values()) tx.sentAt ??= now;
  const stale = () => [...key.inFlight.values()].filter((tx) => now - tx.sentAt! >= ctx.replaceAfter).sort((a, b) => a.nonce - b.nonce);
  if (stale().length === 0) return;
  await key.exclusive(async () => {
    if (!key.maySend()) return;
    // Read again under the key's lock: a send may have gone out meanwhile.
    const mined = await ctx.client.getTransactionCount({ address: key.address, blockTag: "latest" });
    key.minedBelow(mined);
    const waiting = stale();
    const lowest = Math.min(...key.inFlight.keys());
    // Nonces nobody here holds, below a transaction that waits on them.
    if (waiting[0]?.nonce === lowest) for (let nonce = mined; nonce < lowest; nonce++) await fill(ctx, key, nonce, undefined, now, true);
    for (const tx of waiting) if (key.inFlight.get(tx.nonce) === tx) await unstick(ctx, key, tx, now);
  });
}

/**
 * A transaction not mined in time: re-broadcast it (the node does not show it), re-price it (stuck), or fill
 * its nonce (no longer valid). A node that does not show it may have lost its pool: the key's lower
 * transactions it does not know go out again first, in nonce order.
 */
async function unstick(ctx: RelayerContext, key: RelayerKey, tx: InFlight, now: bigint): Promise<void> {
  const blocking = [...key.inFlight.keys()].some((nonce) => nonce > tx.nonce);
  const known = await knowsTransaction(ctx.client, tx.latest.hash);
  if (!known && (await resendBelow(ctx, key, tx.nonce)) === "blocked") return;
  if (!tx.filler && !(await stillSucceeds(ctx.client, key, tx.request))) {
    await fill(ctx, key, tx.nonce, known ? tx : undefined, now, blocking);
    return;
  }
  const quote = await ctx.quote();
  // Still in the pool at a price the network takes, behind a lower nonce not yet mined: it waits on that
  // one, not on its price. A replacement would only raise what it pays.
  const behind = [...key.inFlight.keys()].some((nonce) => nonce < tx.nonce);
  if (known && behind && feeCap(tx.fees) >= neededFee(quote)) return;
  if (!known && feeCap(tx.fees) >= neededFee(quote)) {
    // Not shown by the node: lost, or only out of sight (a Cronos node shows the first 30 of its pool by hash).
    const again = await resend(ctx, key, tx);
    if (again !== "underpriced") {
      tx.sentAt = now;
      if (again === "accepted" && blocking) ctx.onEvent({ kind: "gapFilled", from: key.address, nonce: tx.nonce, hash: tx.latest.hash, by: "resend" });
      return;
    }
  }
  await replace(ctx, key, tx, quote, now, blocking && !known);
}

/**
 * Re-signs `tx` at its nonce with raised fees, recording the new version first (its hooks). Refused, the
 * transaction keeps its last version, and that one is broadcast again (`tx already in mempool` on a node
 * that holds it): never given up while it may be mined. Refused for its fee, it is re-priced once more to
 * what the node named, within the cap.
 */
async function replace(ctx: RelayerContext, key: RelayerKey, tx: InFlight, quote: FeeQuote, now: bigint, fillsGap: boolean, repriced?: Fees): Promise<void> {
  const fees = repriced ?? replacementFees(tx.fees, quote, ctx.cap);
  if (!fees) {
    // Keep its last price: nothing is sent above the cap. Looked at again after another period.
    tx.sentAt = now;
    ctx.onEvent({ kind: "capped", from: key.address, nonce: tx.nonce, hash: tx.latest.hash, capWei: ctx.cap, neededWei: neededFee(quote) });
    return;
  }
  const signed = await sign(key, ctx.chainId, tx.request, tx.nonce, fees, tx.latest.hash);
  try {
    await tx.hooks.beforeBroadcast?.(signed);
  } catch {
    // Its record refused the new version (the settlement is final, or the key is leased elsewhere now).
    key.inFlight.delete(tx.nonce);
    return;
  }
  // Recorded, but the lease lapsed meanwhile: whoever holds the key next sends it (from the record).
  if (!key.mayBroadcast(signed)) return;
  const sent = await broadcast(ctx.client, signed.raw);
  if (sent.outcome === "refused") {
    tx.hooks.afterBroadcast?.(signed, "refused");
    tx.sentAt = now;
    ctx.onEvent({ kind: "refused", from: key.address, nonce: tx.nonce, hash: signed.hash, refusal: sent.refusal.kind });
    if (sent.refusal.kind === "feeTooLow" && !repriced) {
      let more: Fees | undefined;
      try {
        more = feesAtLeast(fees, await ctx.quote(true), leastFeePerGas(sent.refusal.atLeast, tx.request.gas), ctx.cap);
      } catch (error) {
        if (!(error instanceof FeeCapError)) throw error;
        ctx.onEvent({ kind: "capped", from: key.address, nonce: tx.nonce, hash: tx.latest.hash, capWei: ctx.cap, neededWei: error.neededWei });
        return;
      }
      await replace(ctx, key, tx, quote, now, fillsGap, more);
      return;
    }
    // The slot is used: by this very transaction's last version (kept), by one of its versions mined, or by another.
    if (sent.refusal.kind === "nonceBehind" && (await whoHolds(ctx, key, tx)) !== "pending") return;
    if (sent.refusal.kind === "nonceBehind" || sent.refusal.kind === "replacementRefused") await resend(ctx, key, tx);
    return;
  }
  tx.versions.push(signed);
  tx.fees = fees;
  tx.sentAt = now;
  tx.hooks.afterBroadcast?.(signed, sent.outcome === "unknown" ? "unknown" : "accepted");
  ctx.onEvent({ kind: "replaced", from: key.address, nonce: tx.nonce, hash: signed.hash, replaces: signed.replaces!, feeCapWei: feeCap(fees) });
  if (fillsGap) ctx.onEvent({ kind: "gapFilled", from: key.address, nonce: tx.nonce, hash: signed.hash, by: "resend" });
}

/**
 * Takes `nonce` with a zero-value self-transfer: the transaction that had it can no longer succeed,
 * or nobody here holds it while later transactions wait. `replacing` is the version in the node's pool.
 */
async function fill(ctx: RelayerContext, key: RelayerKey, nonce: number, replacing: InFlight | undefined, now: bigint, fillsGap: boolean): Promise<void> {
  const quote = await ctx.quote();
  let fees: Fees | undefined;
  try {
    fees = replacing ? replacementFees(replacing.fees, quote, ctx.cap) : initialFees(quote, ctx.cap);
  } catch (error) {
    if (!(error instanceof FeeCapError)) throw error;
  }
  const previous = key.inFlight.get(nonce);
  if (!fees) {
    if (previous) previous.sentAt = now;
    ctx.onEvent({ kind: "capped", from: key.address, nonce, hash: previous?.latest.hash ?? "0x", capWei: ctx.cap, neededWei: neededFee(quote) });
    return;
  }
  const request = { to: key.address, data: "0x" as Hex, gas: SELF_TRANSFER_GAS, value: 0n };
  const signed = await sign(key, ctx.chainId, request, nonce, fees, replacing?.latest.hash);
  // Written ahead like any transaction of the key: refused, it is not sent (the key is leased elsewhere now).
  const hooks = key.lease?.fillers ?? {};
  try {
    await hooks.beforeBroadcast?.(signed);
  } catch {
    return;
  }
  if (!key.mayBroadcast(signed)) return;
  const sent = await broadcast(ctx.client, signed.raw);
  if (sent.outcome === "refused") {
    hooks.afterBroadcast?.(signed, "refused");
    ctx.onEvent({ kind: "refused", from: key.address, nonce, hash: signed.hash, refusal: sent.refusal.kind });
    return;
  }
  hooks.afterBroadcast?.(signed, sent.outcome === "unknown" ? "unknown" : "accepted");
  const filler = new InFlight(nonce, request, signed, fees, hooks, true);
  filler.sentAt = now;
  key.inFlight.set(nonce, filler);
  if (previous) previous.superseded = true;
  if (fillsGap || previous) ctx.onEvent({ kind: "gapFilled", from: key.address, nonce, hash: signed.hash, by: "selfTransfer" });
}

/** Whether the call would still succeed now; a transport fault counts as yes (never fill a nonce on doubt). */
async function stillSucceeds(client: PublicClient, key: RelayerKey, request: RelayRequest): Promise<boolean> {
  try {
    await client.call({ account: key.address, to: request.to, data: request.data, gas: request.gas });
    return true;
  } catch (error) {
    return !isRevert(error);
  }
}
