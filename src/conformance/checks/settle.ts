import { formatUnits, type Address, type Hex } from "viem";
import { randomNonce } from "../../buyer/sign.js";
import { SettleError, SettleEvent, VerifyReason, X402_VERSION } from "../../protocol/reasons.js";
import { REFUSAL_CASES, requirementsFor, signFor } from "../cases.js";
import { fail, skip, type Check, type CheckContext } from "../check.js";
import { expectEqual, expectSettled, expectSettleFailure, expectVerifyRefusal, expectVerifyValid } from "../expect.js";
import { describeAnswer } from "../http.js";
import { expectSettlementOnChain } from "../settlement.js";
import { SMALLEST_AMOUNT, type Target } from "../target.js";
import { caseContextOf, paidKey, PATHS, type Paid } from "./context.js";
import { SUPPORTED_KEY } from "./service.js";
import { appliesTo, refusalCheck } from "./refusals.js";

const ALREADY_USED = { key: "alreadyUsed", text: SettleError.alreadyUsed } as const;

/** A fresh authorization of the smallest amount from the buyer to payTo, as a verify/settle body. */
async function smallestPayment(context: CheckContext, target: Target) {
  const caseContext = await caseContextOf(context, target);
  const requirements = requirementsFor({ network: target.network, payTo: target.payTo, asset: target.token, amount: SMALLEST_AMOUNT });
  const nonce = randomNonce();
  const paymentHeader = await signFor({ ...caseContext, requirements }, { nonce });
  return { body: { x402Version: X402_VERSION as 1, paymentHeader, paymentRequirements: requirements }, nonce };
}

/** The relayers the facilitator names in its supported answer (x402 v2's `signers`), if any. */
function relayersOf(context: CheckContext, target: Target): readonly Address[] | undefined {
  if (target.relayers) return target.relayers;
  const signers = (context.shared.get(SUPPORTED_KEY) as { signers?: Record<string, unknown> } | undefined)?.signers;
  const listed = signers ? Object.values(signers).flat().filter((value): value is Address => typeof value === "string") : [];
  return listed.length > 0 ? listed : undefined;
}

function paidOf(context: CheckContext, target: Target): Paid {
  const paid = context.shared.get(paidKey(target)) as Paid | undefined;
  if (!paid) skip("settle.pays did not settle a payment to build on");
  return paid;
}

const PAYMENT_SPEC = "spec 1 (seller flow: verify, then settle), 2.5, 4.4, 6 payment.settled; wire format › settle";

/** The checks that settle real payments of 1 unit (with --settle), and those that build on them. */
export function paymentChecks(target: Target): Check[] {
  const settleNeeds = ["buyer", "settle"] as const;
  const nonceUsed = REFUSAL_CASES.filter((refusal) => refusal.needs?.includes("usedNonce") && appliesTo(refusal, target));
  return [
    {
      id: "settle.pays",
      title: "verify, then settle 1 unit (0.000001 USDC.e): payment.settled with every field typed as the official client insists",
      spec: PAYMENT_SPEC,
      dialect: "cronos",
      target,
      needs: settleNeeds,
      async run(context) {
        const buyer = target.buyer!;
        const { body, nonce } = await smallestPayment(context, target);
        expectVerifyValid(await context.http.post(PATHS.verify, body));
        const fromBlock = target.chain ? await target.chain.client.getBlockNumber({ cacheTime: 0 }) : undefined;
        const answer = await context.http.post(PATHS.settle, body);
        const settled = expectSettled(answer);
        const problems: string[] = [];
        if (settled.x402Version !== X402_VERSION) problems.push(`x402Version ${settled.x402Version} (expected 1)`);
        if (settled.network !== target.network) problems.push(`network ${settled.network} (expected ${target.network}, as sent)`);
        if (settled.from.toLowerCase() !== buyer.address.toLowerCase()) problems.push(`from ${settled.from} (expected the payer ${buyer.address})`);
        if (settled.to.toLowerCase() !== target.payTo.toLowerCase()) problems.push(`to ${settled.to} (expected payTo ${target.payTo})`);
        if (settled.value !== SMALLEST_AMOUNT.toString()) problems.push(`value ${settled.value} (expected "1")`);
        if (problems.length > 0) fail("payment.settled for this payment", `${problems.join("; ")} in ${describeAnswer(answer)}`);
        const paid: Paid = { body, txHash: settled.txHash as Hex, blockNumber: settled.blockNumber, timestamp: settled.timestamp, nonce, ...(fromBlock === undefined ? {} : { fromBlock }) };
        context.shared.set(paidKey(target), paid);
        context.note(`${target.network}: paid ${formatUnits(SMALLEST_AMOUNT, 6)} USDC.e from ${buyer.address} to ${target.payTo} in ${settled.txHash}`);
        return `${settled.txHash} in block ${settled.blockNumber}`;
      },
    },
    {
      id: "settle.on-chain",
      title: "the settlement is on chain: AuthorizationUsed then Transfer of 1 unit, in the block and at the time settle said, balances moved",
      spec: "spec 4.4 (transferWithAuthorization, confirmed before the answer), 2.5 blockNumber/timestamp; decisions › Settle",
      dialect: "cronos",
      target,
      needs: [...settleNeeds, "rpc"],
      async run(context) {
        const paid = paidOf(context, target);
        const relayers = relayersOf(context, target);
        await expectSettlementOnChain(target.chain!, {
          token: target.token,
          txHash: paid.txHash,
          from: target.buyer!.address,
          to: target.payTo,
          value: SMALLEST_AMOUNT,
          nonce: paid.nonce,
          ...(relayers ? { relayers } : {}),
          answer: paid,
        });
      },
    },
    {
      id: "settle.replay",
      title: "settle of the same authorization again answers payment.failed Authorization already used (and its txHash, if any, is the first's); nothing moves twice",
      spec: "spec 3, 4.4 (unique nonces prevent duplicates), 7.2 Authorization already used; decisions › Settle: settled twice → one transfer",
      dialect: "cronos",
      target,
      needs: settleNeeds,
      async run(context) {
        const paid = paidOf(context, target);
        const failure = expectSettleFailure(await context.http.post(PATHS.settle, paid.body), ALREADY_USED, target.network);
        if (failure.txHash !== undefined) expectEqual(failure.txHash.toLowerCase(), paid.txHash.toLowerCase(), "the replay's txHash to be the payment's");
        if (target.chain) {
          const uses = await target.chain.authorizationUses(target.token, target.buyer!.address, paid.nonce, paid.fromBlock ?? BigInt(paid.blockNumber));
          expectEqual(uses, 1, "AuthorizationUsed events for the nonce on chain");
        }
      },
    },
    {
      id: "verify.replay",
      title: "verify of a settled authorization answers Authorization already used",
      spec: "spec 7.2 Authorization already used; decisions › Verify 8 (authorizationState)",
      dialect: "cronos",
      target,
      needs: settleNeeds,
      async run(context) {
        const paid = paidOf(context, target);
        expectVerifyRefusal(await context.http.post(PATHS.verify, paid.body), { key: "alreadyUsed", text: VerifyReason.alreadyUsed });
      },
    },
    ...nonceUsed.map((refusal) => refusalCheck("verify", refusal, target)),
    ...nonceUsed.map((refusal) => refusalCheck("settle", refusal, target)),
    {
      id: "settle.concurrent-once",
      title: "three settles of one authorization at once: exactly one payment.settled, two Authorization already used; one transfer on chain",
      spec: "decisions › Settle: the same authorization settled concurrently → exactly one transfer",
      dialect: "cronos",
      target,
      needs: settleNeeds,
      async run(context) {
        const { body, nonce } = await smallestPayment(context, target);
        const fromBlock = target.chain ? await target.chain.client.getBlockNumber({ cacheTime: 0 }) : undefined;
        const answers = await Promise.all([0, 1, 2].map(() => context.http.post(PATHS.settle, body)));
        const settled = answers.filter((answer) => (answer.json as { event?: unknown } | undefined)?.event === SettleEvent.settled);
        if (settled.length !== 1) fail("exactly one payment.settled of three", `${settled.length}: ${answers.map(describeAnswer).join(" | ")}`);
        const winner = expectSettled(settled[0]!);
        for (const answer of answers.filter((a) => a !== settled[0])) {
          const failure = expectSettleFailure(answer, ALREADY_USED, target.network);
          if (failure.txHash !== undefined) expectEqual(failure.txHash.toLowerCase(), winner.txHash.toLowerCase(), "a loser's txHash to be the winner's");
        }
        context.note(`${target.network}: paid ${formatUnits(SMALLEST_AMOUNT, 6)} USDC.e from ${target.buyer!.address} to ${target.payTo} in ${winner.txHash}`);
        if (target.chain) {
          const uses = await target.chain.authorizationUses(target.token, target.buyer!.address, nonce, fromBlock!);
          expectEqual(uses, 1, "AuthorizationUsed events for the nonce on chain");
        }
      },
    },
  ];
}

/** settle's refusals of the cases settle is checked with (none of them needs a payment of this run). */
export function settleRefusalChecks(target: Target): Check[] {
  return REFUSAL_CASES.filter((refusal) => refusal.settle && appliesTo(refusal, target) && !refusal.needs?.includes("usedNonce")).map((refusal) =>
    refusalCheck("settle", refusal, target),
  );
}
