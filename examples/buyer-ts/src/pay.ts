import { createPublicClient, http, parseEventLogs, type Address, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { tokenAbi } from "cronos-x402-facilitator-kit";
import { getPaymentResponse, wrapFetchWithPayment } from "cronos-x402-facilitator-kit/buyer";

/** What a paid request came to: the seller's answer and, read from the chain, the transfer that paid it. */
export interface PaidAnswer {
  status: number;
  body: unknown;
  /** The settlement transaction the seller reported (X-PAYMENT-RESPONSE), when it was paid. */
  transaction?: Hex;
  /** The token's `Transfer` from the buyer in that transaction's receipt: what was really paid. */
  transfer?: { from: Address; to: Address; value: bigint; blockNumber: bigint };
}

/** Who pays, how much at most, and where to read receipts. */
export interface PayOptions {
  /** The buyer's key (on the local chains: a funded Hardhat PUBLIC test key, LOCAL-ONLY). */
  privateKey: Hex;
  /** The most this buyer pays for one request, in USDC.e base units (6 decimals). */
  maxAmount: bigint;
  /** JSON-RPC of the chain the seller is paid on: the receipt proves the payment. */
  rpcUrl: string;
}

/**
 * GETs `url`, paying its 402 with an EIP-3009 authorization (the kit's paying fetch), and proves the
 * payment from the chain: a paid answer is trusted only with the receipt's `Transfer` from the buyer.
 */
export async function payFor(url: string, options: PayOptions): Promise<PaidAnswer> {
  const buyer = privateKeyToAccount(options.privateKey);
  const pay = wrapFetchWithPayment(fetch, { signer: buyer, maxAmount: options.maxAmount });
  const response = await pay(url);
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: kept as text
  }
  const settlement = getPaymentResponse(response);
  if (!settlement?.txHash) return { status: response.status, body };
  const transaction = settlement.txHash as Hex;
  const chain = createPublicClient({ transport: http(options.rpcUrl) });
  const receipt = await chain.getTransactionReceipt({ hash: transaction });
  const transfer = parseEventLogs({ abi: tokenAbi, eventName: "Transfer", logs: receipt.logs }).find((log) => log.args.from === buyer.address);
  return {
    status: response.status,
    body,
    transaction,
    ...(transfer ? { transfer: { from: transfer.args.from, to: transfer.args.to, value: transfer.args.value, blockNumber: receipt.blockNumber } } : {}),
  };
}
