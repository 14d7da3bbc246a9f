import { expect } from "chai";
import type { Address, Hex } from "viem";
import type { LocalStack } from "../../src/harness/stack.js";
import type { NetworkName } from "../../src/protocol/networks.js";
import { rpcClient, tokenBalances, tokenEvents } from "../helpers/chain.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).

/** The balances of a payment's two parties, to compare before and after. */
export function partyBalances(stack: LocalStack, network: NetworkName, buyer: Address): Promise<bigint[]> {
  const info = stack.networks[network]!;
  return tokenBalances(info.rpcUrl, info.token, [buyer, stack.seller]);
}

/**
 * Checks one settlement on chain: a successful transaction from the relayer to the token whose events are
 * AuthorizationUsed(buyer, …) then Transfer(buyer → seller, price), and the two balances moved by the price.
 */
export async function expectPaidOnChain(
  stack: LocalStack,
  network: NetworkName,
  txHash: string,
  payment: { buyer: Address; price: bigint; before: bigint[] },
): Promise<void> {
  const info = stack.networks[network]!;
  const receipt = await rpcClient(info.rpcUrl).getTransactionReceipt({ hash: txHash as Hex });
  expect(receipt.status).to.equal("success");
  expect(receipt.from.toLowerCase()).to.equal(stack.relayer.toLowerCase());
  const events = tokenEvents(receipt, info.token);
  expect(events.map((event) => event.eventName)).to.deep.equal(["AuthorizationUsed", "Transfer"]);
  expect(events[0]!.args.authorizer).to.equal(payment.buyer);
  expect(events[1]!.args).to.deep.equal({ from: payment.buyer, to: stack.seller, value: payment.price });
  expect(await partyBalances(stack, network, payment.buyer)).to.deep.equal([payment.before[0]! - payment.price, payment.before[1]! + payment.price]);
}
