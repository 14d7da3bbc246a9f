import { formatUnits, type Address } from "viem";
import { randomNonce } from "../../buyer/sign.js";
import { VerifyReason } from "../../protocol/reasons.js";
import { REFUSAL_CASES } from "../cases.js";
import { requirementsFor, signFor } from "../case-payment.js";
import { fail, skip, type Check, type CheckContext } from "../check.js";
import type { CasePayment, Codec } from "../codec.js";
import { signersOf } from "../dialects/x402v2.js";
import { expectEqual } from "../expect.js";
import { describeAnswer } from "../http.js";
import { expectSettlementOnChain } from "../settlement.js";
import { SMALLEST_AMOUNT, type Target } from "../target.js";
import { caseContextOf, paidKey, usedNonceKey, type Paid } from "./context.js";
import { SUPPORTED_KEY } from "./service.js";
import { boundTo, refusalCases, refusalCheck } from "./refusals.js";

const ALREADY_USED = { key: "alreadyUsed", text: VerifyReason.alreadyUsed } as const;

/** A fresh authorization of the smallest amount from the buyer to payTo. */
async function smallestPayment(context: CheckContext, target: Target): Promise<CasePayment & { nonce: Paid["nonce"] }> {
  const caseContext = await caseContextOf(context, target);
  const paymentRequirements = requirementsFor({ network: target.network, payTo: target.payTo, asset: target.token, amount: SMALLEST_AMOUNT });
  const nonce = randomNonce();
  const paymentHeader = await signFor({ ...caseContext, requirements: paymentRequirements }, { nonce });
  return { paymentHeader, paymentRequirements, nonce };
}

/** The relayers the facilitator names in its supported answer (x402 v2's `signers`), if any. */
function relayersOf(context: CheckContext, target: Target): readonly Address[] | undefined {
  if (target.relayers) return target.relayers;
  const listed = signersOf(context.shared.get(SUPPORTED_KEY));
  return listed.length > 0 ? listed : undefined;
}

function paidOf(context: CheckContext, codec: Codec, target: Target): Paid {
  const paid = context.shared.get(paidKey(codec, target)) as Paid | undefined;
  if (!paid) skip("settle.pays did not settle a payment to build on");
  return paid;
}

const PAYMENT_SPEC = "spec 1 (seller flow: verify, then settle), 2.5, 4.4, 6 payment.settled; wire format › settle";

/** The checks that settle real payments of 1 unit (with --settle), and those that build on them. */
export function paymentChecks(codec: Codec, target: Target): Check[] {
  const needs = ["buyer", "settle"] as const;
  const nonceUsed = refusalCases(REFUSAL_CASES, codec, target, true);
  const paid = (context: CheckContext) => paidOf(context, codec, target);
  return [
    {
      id: "settle.pays",
      title: "verify, then settle 1 unit (0.000001 USDC.e): settled, with every field typed as the dialect's clients insist",
      ...boundTo(codec, target, PAYMENT_SPEC),
      needs,
      async run(context) {
        const buyer = target.buyer!;
        const { nonce, ...payment } = await smallestPayment(context, target);
        codec.expectValid(await codec.send(context.http, "verify", payment), buyer.address);
        const fromBlock = target.chain ? await target.chain.client.getBlockNumber({ cacheTime: 0 }) : undefined;
        const settled = codec.expectSettled(await codec.send(context.http, "settle", payment), { payer: buyer.address, payTo: target.payTo, value: SMALLEST_AMOUNT, target });
        context.shared.set(paidKey(codec, target), { payment, ...settled, nonce, ...(fromBlock === undefined ? {} : { fromBlock }) } satisfies Paid);
        context.shared.set(usedNonceKey(target), nonce);
        context.note(`${codec.networkName(target)}: paid ${formatUnits(SMALLEST_AMOUNT, 6)} USDC.e from ${buyer.address} to ${target.payTo} in ${settled.txHash}`);
        return settled.blockNumber === undefined ? settled.txHash : `${settled.txHash} in block ${settled.blockNumber}`;
      },
    },
    {
      id: "settle.on-chain",
      title: "the settlement is on chain: AuthorizationUsed then Transfer of 1 unit, in the block and at the time settle said, balances moved",
      ...boundTo(codec, target, "spec 4.4 (transferWithAuthorization, confirmed before the answer), 2.5 blockNumber/timestamp; decisions › Settle"),
      needs: [...needs, "rpc"],
      async run(context) {
        const { txHash, nonce, blockNumber, timestamp } = paid(context);
        const relayers = relayersOf(context, target);
        await expectSettlementOnChain(target.chain!, {
          token: target.token,
          txHash,
          from: target.buyer!.address,
          to: target.payTo,
          value: SMALLEST_AMOUNT,
          nonce,
          ...(relayers ? { relayers } : {}),
          ...(blockNumber !== undefined && timestamp !== undefined ? { answer: { blockNumber, timestamp } } : {}),
        });
      },
    },
    {
      id: "settle.replay",
      title: "settle of the same authorization again is refused as already used (its transaction, if named, the first's); nothing moves twice",
      ...boundTo(codec, target, "spec 3, 4.4 (unique nonces prevent duplicates), 7.2 Authorization already used; decisions › Settle: settled twice → one transfer"),
      needs,
      async run(context) {
        const first = paid(context);
        const { txHash } = codec.expectRefused("settle", await codec.send(context.http, "settle", first.payment), ALREADY_USED, first.payment);
        if (txHash !== undefined) expectEqual(txHash.toLowerCase(), first.txHash.toLowerCase(), "the replay's transaction to be the payment's");
        if (target.chain) {
          const uses = await target.chain.authorizationUses(target.token, target.buyer!.address, first.nonce, first.fromBlock ?? BigInt(first.blockNumber ?? 0));
          expectEqual(uses, 1, "AuthorizationUsed events for the nonce on chain");
        }
      },
    },
    {
      id: "verify.replay",
      title: "verify of a settled authorization answers Authorization already used",
      ...boundTo(codec, target, "spec 7.2 Authorization already used; decisions › Verify 8 (authorizationState)"),
      needs,
      async run(context) {
        const { payment } = paid(context);
        codec.expectRefused("verify", await codec.send(context.http, "verify", payment), ALREADY_USED, payment);
      },
    },
    ...nonceUsed.map((refusal) => refusalCheck(codec, "verify", refusal, target)),
    ...nonceUsed.map((refusal) => refusalCheck(codec, "settle", refusal, target)),
    {
      id: "settle.concurrent-once",
      title: "three settles of one authorization at once: exactly one settles, two are refused as already used; one transfer on chain",
      ...boundTo(codec, target, "decisions › Settle: the same authorization settled concurrently → exactly one transfer"),
      needs,
      async run(context) {
        const { nonce, ...payment } = await smallestPayment(context, target);
        const fromBlock = target.chain ? await target.chain.client.getBlockNumber({ cacheTime: 0 }) : undefined;
        const answers = await Promise.all([0, 1, 2].map(() => codec.send(context.http, "settle", payment)));
        const settled = answers.filter((answer) => codec.isSettled(answer));
        if (settled.length !== 1) fail("exactly one settlement of three", `${settled.length}: ${answers.map(describeAnswer).join(" | ")}`);
        const winner = codec.expectSettled(settled[0]!, { payer: target.buyer!.address, payTo: target.payTo, value: SMALLEST_AMOUNT, target });
        for (const answer of answers.filter((a) => a !== settled[0])) {
          const { txHash } = codec.expectRefused("settle", answer, ALREADY_USED, payment);
          if (txHash !== undefined) expectEqual(txHash.toLowerCase(), winner.txHash.toLowerCase(), "a loser's transaction to be the winner's");
        }
        context.note(`${codec.networkName(target)}: paid ${formatUnits(SMALLEST_AMOUNT, 6)} USDC.e from ${target.buyer!.address} to ${target.payTo} in ${winner.txHash}`);
        if (target.chain) {
          const uses = await target.chain.authorizationUses(target.token, target.buyer!.address, nonce, fromBlock!);
          expectEqual(uses, 1, "AuthorizationUsed events for the nonce on chain");
        }
      },
    },
  ];
}

/** settle's refusals of the cases settle is checked with (none of them needs a payment of this run). */
export function settleRefusalChecks(codec: Codec, target: Target): Check[] {
  return refusalCases(REFUSAL_CASES, codec, target, false)
    .filter((refusal) => refusal.settle)
    .map((refusal) => refusalCheck(codec, "settle", refusal, target));
}
