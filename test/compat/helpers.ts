import { expect } from "chai";
import type { Address, Hex } from "viem";
import type { LocalStack } from "../../src/harness/stack.js";
import type { NetworkName } from "../../src/protocol/networks.js";
import { rpcClient, tokenBalances, tokenEvents } from "../e2e/helpers.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).

/** The CAIP-2 id of each local chain, written out (the x402 v2 packages name networks so). */
export const CAIP2: Record<NetworkName, "eip155:338" | "eip155:25"> = { "cronos-testnet": "eip155:338", "cronos-mainnet": "eip155:25" };

/** A `fetch` that records the payment header of each request it sends, in either dialect. */
export function recordingFetch(): { fetch: typeof fetch; sent: Array<{ name: "X-PAYMENT" | "PAYMENT-SIGNATURE"; value: string }> } {
  const sent: Array<{ name: "X-PAYMENT" | "PAYMENT-SIGNATURE"; value: string }> = [];
  const recording: typeof fetch = async (input, init) => {
    const request = new Request(input, init);
    for (const name of ["X-PAYMENT", "PAYMENT-SIGNATURE"] as const) {
      const value = request.headers.get(name);
      if (value !== null) sent.push({ name, value });
    }
    return fetch(request);
  };
  return { fetch: recording, sent };
}

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

/** The JSON object inside a base64 header value. */
export function decodeHeader(value: string | null | undefined): Record<string, unknown> {
  expect(value, "header present").to.be.a("string");
  return JSON.parse(Buffer.from(value!, "base64").toString("utf8")) as Record<string, unknown>;
}
