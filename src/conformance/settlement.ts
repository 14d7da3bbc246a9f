import { parseEventLogs, type Address, type Hex, type TransactionReceipt } from "viem";
import { tokenAbi } from "../chain/token-abi.js";
import { fail } from "./check.js";
import { tokenEvents, type ChainReader } from "./chain.js";
import { brief } from "./brief.js";

/** What a settlement must have done on chain. */
export interface ExpectedSettlement {
  token: Address;
  txHash: Hex;
  from: Address;
  to: Address;
  value: bigint;
  nonce: Hex;
  /** The facilitator's relayers, when known: the transaction must come from one of them. */
  relayers?: readonly Address[];
  /** What the settle answer said, when checked against the chain. */
  answer?: { blockNumber: number; timestamp: string };
}

/** What {@link expectSettlementOnChain} found. */
export interface SettlementOnChain {
  receipt: TransactionReceipt;
  /** The block's time as ISO-8601: what settle's `timestamp` must say. */
  timestamp: string;
}

const same = (a: string | null | undefined, b: string) => typeof a === "string" && a.toLowerCase() === b.toLowerCase();

/**
 * Checks a settlement on chain (spec 4.4, 2.5): the receipt succeeded, was sent to the token (by a relayer
 * when they are known), emitted exactly AuthorizationUsed(from, nonce) then Transfer(from, to, value), and
 * the answer's block number and timestamp are the block's; across that block each party's balance moved
 * by exactly what the token's Transfer events in it say. Fails with what was expected and what was found.
 */
export async function expectSettlementOnChain(chain: ChainReader, expected: ExpectedSettlement): Promise<SettlementOnChain> {
  const { client } = chain;
  const receipt = await client.getTransactionReceipt({ hash: expected.txHash }).catch((error: unknown) => {
    fail(`a receipt for ${expected.txHash} on ${chain.label}`, error instanceof Error ? error.message.split("\n")[0]! : String(error));
  });
  if (receipt.status !== "success") fail(`transaction ${expected.txHash} to succeed`, `status ${receipt.status}`);
  if (!same(receipt.to, expected.token)) fail(`transaction ${expected.txHash} sent to the token ${expected.token}`, `sent to ${receipt.to}`);
  if (expected.relayers && expected.relayers.length > 0 && !expected.relayers.some((relayer) => same(receipt.from, relayer))) {
    fail(`transaction ${expected.txHash} sent by a relayer the facilitator names (${expected.relayers.join(", ")})`, `sent by ${receipt.from}`);
  }
  const events = tokenEvents(receipt, expected.token).map(({ eventName, args }) => ({ eventName, args: lowered(args) }));
  const wanted = [
    { eventName: "AuthorizationUsed", args: lowered({ authorizer: expected.from, nonce: expected.nonce }) },
    { eventName: "Transfer", args: lowered({ from: expected.from, to: expected.to, value: expected.value }) },
  ];
  if (brief(events, 2000) !== brief(wanted, 2000)) fail(`the token's events ${brief(wanted, 600)}`, brief(events, 600));

  const block = await client.getBlock({ blockNumber: receipt.blockNumber });
  const timestamp = new Date(Number(block.timestamp) * 1000).toISOString();
  if (expected.answer) {
    if (expected.answer.blockNumber !== Number(receipt.blockNumber)) {
      fail(`settle's blockNumber to be the receipt's ${receipt.blockNumber}`, String(expected.answer.blockNumber));
    }
    if (expected.answer.timestamp !== timestamp) fail(`settle's timestamp to be the block's time ${timestamp}`, expected.answer.timestamp);
  }

  // Balances across the block, with any other transfer of the token in the same block accounted for.
  const transfers = parseEventLogs({
    abi: tokenAbi,
    eventName: "Transfer",
    logs: await client.getLogs({ address: expected.token, fromBlock: receipt.blockNumber, toBlock: receipt.blockNumber }),
  });
  for (const account of new Set([expected.from.toLowerCase(), expected.to.toLowerCase()])) {
    const address = account as Address;
    let net = 0n;
    for (const { args } of transfers) {
      if (same(args.to, address)) net += args.value;
      if (same(args.from, address)) net -= args.value;
    }
    const [before, after] = await Promise.all([
      chain.balanceOf(expected.token, address, receipt.blockNumber - 1n),
      chain.balanceOf(expected.token, address, receipt.blockNumber),
    ]);
    if (after - before !== net) fail(`${address}'s USDC.e balance to move by ${net} across block ${receipt.blockNumber}`, `${before} → ${after}`);
  }
  return { receipt, timestamp };
}

function lowered(args: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(args).map(([key, value]) => [key, typeof value === "string" ? value.toLowerCase() : typeof value === "bigint" ? value.toString() : value]));
}
