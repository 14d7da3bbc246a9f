import type { Hex, LocalAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { requirementsFor, type CaseContext } from "../case-payment.js";
import type { CaseNeed } from "../cases.js";
import { NEED_REASON, skip, type CheckContext } from "../check.js";
import type { CasePayment, Codec } from "../codec.js";
import type { Target } from "../target.js";

/** The price of the payments the checks only need refused: 0.01 USDC.e (nothing is ever paid at it). */
export const REFUSAL_PRICE = 10_000n;

/** How far back a buyer's used nonces are looked for in the chain's logs. */
export const USED_NONCE_LOOKBACK_BLOCKS = 10_000n;

/** A settlement this run made, for the checks that build on it (on chain, replay). */
export interface Paid {
  payment: CasePayment;
  txHash: Hex;
  blockNumber?: number;
  timestamp?: string;
  nonce: Hex;
  /** The latest block before the settle was sent, when an RPC is known. */
  fromBlock?: bigint;
}

/** Where {@link Paid} is kept in the run's shared map, per dialect and network. */
export function paidKey(codec: Codec, target: Target): string {
  return `paid:${codec.dialect}:${target.network}`;
}

/** Where a nonce the buyer used in this run is kept, per network (whichever dialect paid). */
export function usedNonceKey(target: Target): string {
  return `used-nonce:${target.network}`;
}

/** One key per run that holds nothing: what it signs can never be paid. */
export function freshSignerOf(context: CheckContext): LocalAccount {
  let fresh = context.shared.get("fresh-signer") as LocalAccount | undefined;
  if (!fresh) {
    fresh = privateKeyToAccount(generatePrivateKey());
    context.shared.set("fresh-signer", fresh);
  }
  return fresh;
}

/** A signer for payments whose outcome does not depend on funds: the buyer when given, else the run's fresh key. */
export function signerOf(context: CheckContext, target: Target): LocalAccount {
  return target.buyer ?? freshSignerOf(context);
}

/** The clock verify judges by: the chain's latest block when an RPC is known, else this machine's. */
export async function clockOf(target: Target): Promise<bigint> {
  return target.chain ? target.chain.now() : BigInt(Math.floor(Date.now() / 1000));
}

/** A nonce the buyer has used: this run's payment, else the chain's logs; skips the check when there is none. */
async function usedNonceOf(context: CheckContext, target: Target): Promise<Hex> {
  const used = context.shared.get(usedNonceKey(target)) as Hex | undefined;
  if (used) return used;
  if (!target.buyer) skip(NEED_REASON.buyer);
  if (!target.chain) skip(`needs a nonce the buyer has used: --settle (this run's payment), or --rpc to find one in the chain's logs`);
  const nonces = await target.chain.usedNonces(target.token, target.buyer.address, USED_NONCE_LOOKBACK_BLOCKS);
  if (nonces.length === 0) {
    skip(`the buyer used no nonce in the last ${USED_NONCE_LOOKBACK_BLOCKS} blocks; run once with --settle`);
  }
  return nonces[0]!;
}

/** The context a refusal case builds its payment from, for `target`. */
export async function caseContextOf(context: CheckContext, target: Target, needs: readonly CaseNeed[] = []): Promise<CaseContext> {
  if (needs.includes("chainClock") && !target.chain) skip(NEED_REASON.rpc);
  const usedNonce = needs.includes("usedNonce") ? await usedNonceOf(context, target) : undefined;
  return {
    requirements: requirementsFor({ network: target.network, payTo: target.payTo, asset: target.token, amount: REFUSAL_PRICE }),
    signer: signerOf(context, target),
    chainId: target.chainId,
    domain: target.domain,
    now: await clockOf(target),
    ...(usedNonce === undefined ? {} : { usedNonce }),
  };
}
