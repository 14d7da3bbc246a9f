import { encodeFunctionData, parseSignature, type Address, type Hex } from "viem";
import { tokenAbi } from "../chain/token-abi.js";
import { RelaySendError } from "../chain/relayer.js";
import { isRevert } from "../chain/state.js";
import { revertReason, settleErrorOfRevert } from "../chain/revert.js";
import { SettleError, SettleEvent, X402_VERSION } from "../protocol/reasons.js";
import type { FacilitatorRequest, SettleResponse } from "../protocol/schemas.js";
import { FacilitatorFault, type FacilitatorContext, type NetworkRuntime } from "./runtime.js";
import { verifyPayment, answerNetwork, type RefusedPayment, type VerifiedPayment } from "./verify.js";

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

function failed(network: string, error: string, txHash?: Hex): SettleResponse {
  return {
    x402Version: X402_VERSION,
    event: SettleEvent.failed,
    network,
    timestamp: new Date().toISOString(),
    error,
    ...(txHash ? { txHash } : {}),
  };
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
 * sends it from a relayer key, and waits for the receipt. Protocol outcomes are returned as the
 * settle answer; a fault before anything was sent throws {@link FacilitatorFault} (503).
 */
export async function settlePayment(request: FacilitatorRequest, context: FacilitatorContext): Promise<SettleResponse> {
  const network = answerNetwork(request);
  const outcome = await verifyPayment(request, context, { freshHead: true });
  if (!outcome.isValid) {
    let txHash: Hex | undefined;
    if (outcome.code === "used" && outcome.runtime && outcome.payload) {
      txHash = await findAuthorizationTransaction(outcome.runtime, outcome.payload.authorization.from, outcome.payload.authorization.nonce, context);
    }
    return failed(network, settleTextOf(outcome), txHash);
  }

  const { runtime } = outcome;
  const { from, nonce } = outcome.payload.authorization;
  const key = `${runtime.config.chainId}:${runtime.config.token}:${from}:${nonce}`.toLowerCase();
  const holdMs = context.settleTimeoutMs + 60_000;
  if (!(await context.inFlight.acquire(key, holdMs))) return failed(network, SettleError.alreadyUsed);
  try {
    return await send(outcome, network, context);
  } finally {
    await context.inFlight.release(key);
  }
}

async function send(payment: VerifiedPayment, network: string, context: FacilitatorContext): Promise<SettleResponse> {
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
      return failed(network, settleErrorOfRevert(revertReason(error)));
    }
    throw new FacilitatorFault(`cannot simulate settlement on ${config.network}`, 503, { cause: error });
  }

  let hash: Hex;
  try {
    ({ hash } = await relayer.send({ to: config.token, data, gas: (gas * 13n) / 10n }, relayerAddress));
  } catch (error) {
    if (error instanceof RelaySendError && error.maybeSent) {
      context.logger.error({ network: config.network, txHash: error.hash, err: String(error.cause) }, "settle send failed midway");
      return failed(network, SettleError.failedOnChain, error.hash);
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
    return failed(network, SettleError.failedOnChain, hash);
  }
  context.observe?.confirmationWait(config.network, (performance.now() - sentAt) / 1000);
  if (receipt.status !== "success") return failed(network, SettleError.failedOnChain, hash);

  runtime.state.markUsed(authorization.from, authorization.nonce);
  let timestamp: string;
  try {
    const block = await client.getBlock({ blockNumber: receipt.blockNumber });
    timestamp = new Date(Number(block.timestamp) * 1000).toISOString();
  } catch {
    timestamp = new Date().toISOString();
  }
  return {
    x402Version: X402_VERSION,
    event: SettleEvent.settled,
    txHash: hash,
    from: authorization.from,
    to: authorization.to,
    value: payment.value.toString(),
    blockNumber: Number(receipt.blockNumber),
    network,
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
