import { encodeFunctionData, parseSignature, type Address, type Hex, type TransactionReceipt } from "viem";
import { tokenAbi } from "../chain/token-abi.js";
import { estimateGasWithin } from "../chain/estimate.js";
import { waitForReceipt } from "../chain/receipt.js";
import { RelaySendError } from "../chain/relayer.js";
import { settleErrorOfRevert } from "../chain/revert.js";
import type { Payment } from "../protocol/payment.js";
import { SettleError } from "../protocol/reasons.js";
import { FacilitatorFault, type FacilitatorContext, type NetworkRuntime } from "./runtime.js";
import { penaltySubjects, type PayerAccount } from "./settle-guards.js";
import { verifyPayment, type RefusedPayment, type VerifiedPayment, type VerifyFailureCode } from "./verify.js";

/** Why a settlement failed: a verify refusal, or a transaction that failed (or may have) on chain. */
export type SettleFailureCode = VerifyFailureCode | "failedOnChain";

/** What settle did, whichever dialect asked: each dialect's codec turns it into its own answer. */
export type SettleOutcome = SettledPayment | FailedSettlement;

/** The authorization was transferred on chain. */
export interface SettledPayment {
  settled: true;
  txHash: Hex;
  from: Address;
  to: Address;
  value: bigint;
  blockNumber: bigint;
  /** The block's time, ISO-8601. */
  timestamp: string;
}

/** Nothing was transferred; `error` is the settle text (`SettleError`, or verify's reason where settle has no word). */
export interface FailedSettlement {
  settled: false;
  code: SettleFailureCode;
  error: string;
  /** The transaction that was sent (or that already used the authorization), when known. */
  txHash?: Hex;
}

type SettleErrorText = (typeof SettleError)[keyof typeof SettleError];

const SETTLE_ERROR_CODES: Record<SettleErrorText, SettleFailureCode> = {
  [SettleError.alreadyUsed]: "used",
  [SettleError.expired]: "expired",
  [SettleError.notYetValid]: "notYetValid",
  [SettleError.insufficientBalance]: "balance",
  [SettleError.invalidSignature]: "signature",
  [SettleError.failedOnChain]: "failedOnChain",
};

/** Settle's text for a verify refusal: the settle vocabulary where it has a word, else verify's reason. */
function settleTextOf(refused: RefusedPayment): string {
  switch (refused.code) {
    case "signature":
      return SettleError.invalidSignature;
    case "notYetValid":
      return SettleError.notYetValid;
    case "expired":
      return SettleError.expired;
    case "used":
      return SettleError.alreadyUsed;
    case "balance":
      return SettleError.insufficientBalance;
    default:
      return refused.reason;
  }
}

function failed(error: SettleErrorText, txHash?: Hex): FailedSettlement {
  return { settled: false, code: SETTLE_ERROR_CODES[error], error, ...(txHash ? { txHash } : {}) };
}

/** The token call that settles `payment`: `(v, r, s)` for an EOA signature, `bytes` for an ERC-1271 wallet. */
export function settlementCalldata(payment: VerifiedPayment): Hex {
  const a = payment.payload.authorization;
  const common = [a.from, a.to, payment.value, a.validAfter, a.validBefore, a.nonce] as const;
  if (!payment.contractWallet) {
    const { r, s, v } = parseSignature(a.signature);
    return encodeFunctionData({ abi: tokenAbi, functionName: "transferWithAuthorization", args: [...common, Number(v), r, s] });
  }
  return encodeFunctionData({ abi: tokenAbi, functionName: "transferWithAuthorization", args: [...common, a.signature] });
}

/**
 * Settles a payment: re-verifies it, checks the relayer-safety guards (revert penalty, balance
 * reserved by the payer's other settles in flight), simulates the token call within `maxSettleGas`,
 * sends it from a relayer key, and waits for the receipt. Protocol outcomes are returned as a
 * {@link SettleOutcome}; a fault before anything was sent throws {@link FacilitatorFault} (503).
 */
export async function settlePayment(payment: Payment, context: FacilitatorContext): Promise<SettleOutcome> {
  const outcome = await verifyPayment(payment, context, { freshHead: true });
  if (!outcome.isValid) {
    let txHash: Hex | undefined;
    if (outcome.code === "used" && outcome.runtime && outcome.payload) {
      txHash = await findAuthorizationTransaction(outcome.runtime, outcome.payload.authorization.from, outcome.payload.authorization.nonce, context);
    }
    return { settled: false, code: outcome.code, error: settleTextOf(outcome), ...(txHash ? { txHash } : {}) };
  }

  const { runtime } = outcome;
  const { from, nonce } = outcome.payload.authorization;
  const key = `${runtime.config.chainId}:${runtime.config.token}:${from}:${nonce}`.toLowerCase();
  const holdMs = context.settleTimeoutMs + 60_000;
  if (!(await context.inFlight.acquire(key, holdMs))) return failed(SettleError.alreadyUsed);
  try {
    return await guarded(outcome, context, holdMs);
  } finally {
    await context.inFlight.release(key);
  }
}

/** What became of a settle's transaction, for its balance reservation. */
type Sent = { answer: SettleOutcome; spent: "no" | "unknown" | bigint };

/** Refuses a payer under a revert penalty or without unreserved balance; else sends, holding the reservation meanwhile. */
async function guarded(payment: VerifiedPayment, context: FacilitatorContext, holdMs: number): Promise<SettleOutcome> {
  const { guards } = context.relayerSafety;
  const { config } = payment.runtime;
  const account: PayerAccount = { chainId: config.chainId, token: config.token, payer: payment.payload.authorization.from };
  const subjects = penaltySubjects(account.payer, payment.codeHash);
  let reserved: boolean;
  try {
    if (await guards.penalized(account, subjects, payment.head.timestamp)) {
      context.logger.warn({ network: config.network, payer: account.payer, codeHash: payment.codeHash }, "settle refused: revert penalty");
      return failed(SettleError.failedOnChain);
    }
    const reservation = { id: payment.payload.authorization.nonce, amount: payment.value, balance: payment.balance, block: payment.head.number, ttlMs: holdMs };
    reserved = await guards.reserve(account, reservation);
  } catch (error) {
    throw new FacilitatorFault("settle guards unavailable", { cause: error });
  }
  // The payer's settles in flight already promise its balance: this one would revert at the relayer's expense.
  if (!reserved) return failed(SettleError.insufficientBalance);
  // `send` throws only before anything was sent.
  let spent: Sent["spent"] = "no";
  try {
    const sent = await send(payment, context);
    spent = sent.spent;
    return sent.answer;
  } finally {
    // An unknown outcome keeps its reservation until it lapses: the transaction may still land.
    if (spent !== "unknown") {
      await guards
        .release(account, payment.payload.authorization.nonce, spent === "no" ? undefined : spent)
        .catch((error: unknown) => context.logger.error({ network: config.network, err: String(error) }, "settle guards: release failed"));
    }
  }
}

async function send(payment: VerifiedPayment, context: FacilitatorContext): Promise<Sent> {
  const { runtime } = payment;
  const { client, relayer, config } = runtime;
  const { maxSettleGas } = context.relayerSafety;
  const authorization = payment.payload.authorization;
  const data = settlementCalldata(payment);
  const relayerAddress = relayer.pick();
  const notSent = (error: SettleErrorText): Sent => ({ answer: failed(error), spent: "no" });

  let estimate;
  try {
    estimate = await estimateGasWithin(client, { from: relayerAddress, to: config.token, data, cap: maxSettleGas });
  } catch (error) {
    throw new FacilitatorFault(`cannot simulate settlement on ${config.network}`, { cause: error });
  }
  if (estimate.outcome === "reverts") return notSent(settleErrorOfRevert(estimate.reason));
  if (estimate.outcome === "overCap") {
    context.logger.warn({ network: config.network, payer: authorization.from, maxSettleGas: String(maxSettleGas) }, "settle refused: gas estimate over MAX_SETTLE_GAS");
    return notSent(SettleError.failedOnChain);
  }
  // Headroom for state that moves before the block, never past the cap.
  const gasLimit = bigMin((estimate.gas * 13n) / 10n, maxSettleGas);

  let hash: Hex;
  try {
    ({ hash } = await relayer.send({ to: config.token, data, gas: gasLimit }, relayerAddress));
  } catch (error) {
    if (error instanceof RelaySendError && error.maybeSent) {
      context.logger.error({ network: config.network, txHash: error.hash, err: String(error.cause) }, "settle send failed midway");
      return { answer: failed(SettleError.failedOnChain, error.hash), spent: "unknown" };
    }
    throw new FacilitatorFault(`relayer could not send on ${config.network}`, { cause: error });
  }

  const sentAt = performance.now();
  const receipt = await waitForReceipt(client, {
    hash,
    confirmations: context.confirmations,
    timeoutMs: context.settleTimeoutMs,
    pollingIntervalMs: context.pollingIntervalMs,
    onRpcError: () => context.observe?.rpcError(config.network),
  });
  if (!receipt) {
    // Sent but not confirmed by the deadline: report the hash so it can be traced.
    context.logger.warn({ network: config.network, txHash: hash }, "settle receipt not confirmed");
    return { answer: failed(SettleError.failedOnChain, hash), spent: "unknown" };
  }
  context.observe?.confirmationWait(config.network, (performance.now() - sentAt) / 1000);
  const blockTime = await blockTimestamp(runtime, receipt, payment);
  if (receipt.status !== "success") {
    await penalize(payment, receipt, blockTime, context);
    return { answer: failed(SettleError.failedOnChain, hash), spent: "no" };
  }

  runtime.state.markUsed(authorization.from, authorization.nonce);
  return {
    answer: {
      settled: true,
      txHash: hash,
      from: authorization.from,
      to: authorization.to,
      value: payment.value,
      blockNumber: receipt.blockNumber,
      timestamp: new Date(Number(blockTime) * 1000).toISOString(),
    },
    spent: receipt.blockNumber,
  };
}

/** A settlement reverted on chain at the relayer's expense: count the gas, and refuse its payer (and wallet code) for a while. */
async function penalize(payment: VerifiedPayment, receipt: TransactionReceipt, blockTime: bigint, context: FacilitatorContext): Promise<void> {
  const { config } = payment.runtime;
  const { guards, revertPenaltySeconds } = context.relayerSafety;
  const payer = payment.payload.authorization.from;
  context.observe?.revertedGas(config.network, receipt.gasUsed);
  context.logger.warn(
    { network: config.network, txHash: receipt.transactionHash, payer, codeHash: payment.codeHash, gasUsed: String(receipt.gasUsed), penaltySeconds: revertPenaltySeconds },
    "settlement reverted on chain",
  );
  if (revertPenaltySeconds <= 0) return;
  try {
    await guards.penalize({ chainId: config.chainId, token: config.token }, penaltySubjects(payer, payment.codeHash), blockTime + BigInt(revertPenaltySeconds));
  } catch (error) {
    context.logger.error({ network: config.network, err: String(error) }, "settle guards: penalty not recorded");
  }
}

/** The time of the block that mined `receipt` (the chain's clock); the verify head's time if the block cannot be read. */
async function blockTimestamp(runtime: NetworkRuntime, receipt: TransactionReceipt, payment: VerifiedPayment): Promise<bigint> {
  try {
    return (await runtime.client.getBlock({ blockNumber: receipt.blockNumber })).timestamp;
  } catch {
    return payment.head.timestamp;
  }
}

function bigMin(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}

/**
 * The transaction that used an authorization, from the token's `AuthorizationUsed` logs within
 * the look-back window; best effort (an RPC that refuses the range yields undefined).
 */
export async function findAuthorizationTransaction(
  runtime: NetworkRuntime,
  authorizer: Address,
  nonce: Hex,
  context: Pick<FacilitatorContext, "logLookbackBlocks">,
): Promise<Hex | undefined> {
  try {
    const head = await runtime.state.head();
    const fromBlock = head.number > BigInt(context.logLookbackBlocks) ? head.number - BigInt(context.logLookbackBlocks) : 0n;
    const logs = await runtime.client.getContractEvents({
      address: runtime.config.token,
      abi: tokenAbi,
      eventName: "AuthorizationUsed",
      args: { authorizer, nonce },
      fromBlock,
      toBlock: head.number,
    });
    return logs.at(-1)?.transactionHash ?? undefined;
  } catch {
    return undefined;
  }
}
