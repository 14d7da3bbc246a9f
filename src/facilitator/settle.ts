import { encodeFunctionData, parseSignature, type Address, type Hex } from "viem";
import { tokenAbi } from "../chain/token-abi.js";
import { RelaySendError } from "../chain/relayer.js";
import { isRevert } from "../chain/state.js";
import { revertReason, settleErrorOfRevert } from "../chain/revert.js";
import type { Payment } from "../protocol/payment.js";
import { SettleError } from "../protocol/reasons.js";
import { FacilitatorFault, type FacilitatorContext, type NetworkRuntime } from "./runtime.js";
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
 * Settles a payment: re-verifies it, simulates the token call (a doomed settle costs no gas),
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
    return await send(outcome, context);
  } finally {
    await context.inFlight.release(key);
  }
}

async function send(payment: VerifiedPayment, context: FacilitatorContext): Promise<SettleOutcome> {
  const { runtime } = payment;
  const { client, relayer, config } = runtime;
  const authorization = payment.payload.authorization;
  const data = settlementCalldata(payment);
  const relayerAddress = relayer.pick();

  let gas: bigint;
  try {
    gas = await client.estimateGas({ account: relayerAddress, to: config.token, data });
  } catch (error) {
    if (isRevert(error) || revertReason(error) !== undefined) {
      return failed(settleErrorOfRevert(revertReason(error)));
    }
    throw new FacilitatorFault(`cannot simulate settlement on ${config.network}`, 503, { cause: error });
  }

  let hash: Hex;
  try {
    ({ hash } = await relayer.send({ to: config.token, data, gas: (gas * 13n) / 10n }, relayerAddress));
  } catch (error) {
    if (error instanceof RelaySendError && error.maybeSent) {
      context.logger.error({ network: config.network, txHash: error.hash, err: String(error.cause) }, "settle send failed midway");
      return failed(SettleError.failedOnChain, error.hash);
    }
    throw new FacilitatorFault(`relayer could not send on ${config.network}`, 503, { cause: error });
  }

  let receipt;
  const sentAt = performance.now();
  try {
    receipt = await client.waitForTransactionReceipt({
      hash,
      confirmations: context.confirmations,
      timeout: context.settleTimeoutMs,
      pollingInterval: context.pollingIntervalMs,
    });
  } catch (error) {
    // Sent but not confirmed in time (or the node stopped answering): report the hash so it can be traced.
    context.logger.warn({ network: config.network, txHash: hash, err: String(error) }, "settle receipt not confirmed");
    return failed(SettleError.failedOnChain, hash);
  }
  context.observe?.confirmationWait(config.network, (performance.now() - sentAt) / 1000);
  if (receipt.status !== "success") return failed(SettleError.failedOnChain, hash);

  runtime.state.markUsed(authorization.from, authorization.nonce);
  let timestamp: string;
  try {
    const block = await client.getBlock({ blockNumber: receipt.blockNumber });
    timestamp = new Date(Number(block.timestamp) * 1000).toISOString();
  } catch {
    timestamp = new Date().toISOString();
  }
  return {
    settled: true,
    txHash: hash,
    from: authorization.from,
    to: authorization.to,
    value: payment.value,
    blockNumber: receipt.blockNumber,
    timestamp,
  };
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
