// The buyer's end-to-end test on the kit's harness: a local chain with USDC.e at its real address, funded
// buyers, a facilitator, and a seller made with the kit's seller SDK, started once for this file.
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import express from "express";
import { createPublicClient, erc20Abi, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { PaymentError } from "cronos-x402-facilitator-kit/buyer";
import { startLocalStack, type LocalStack } from "cronos-x402-facilitator-kit/harness";
import { paymentRequirements, requirePayment } from "cronos-x402-facilitator-kit/seller";
import { payFor } from "../src/pay.ts";

const PRICE = 25_000n; // 0.025 USDC.e
let stack: LocalStack;
let sellerUrl: string;
let close: () => void;

before(async () => {
  stack = await startLocalStack({ networks: ["cronos-testnet"], port: 0, rpcPorts: { "cronos-testnet": 0 }, buyers: 2 });
  const app = express();
  const requirements = paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: PRICE, description: "A quote" });
  app.get("/quote", requirePayment(requirements, { facilitatorUrl: stack.facilitatorUrl }), (_req, res) => void res.json({ quote: "Pay per request." }));
  const server = app.listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  sellerUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => server.close();
});

after(async () => {
  close?.();
  await stack?.stop();
});

test("pays the route: the answer, and the receipt's Transfer of the price from the buyer to the seller", async () => {
  const testnet = stack.networks["cronos-testnet"]!;
  const buyer = testnet.buyers[0]!;
  const chain = createPublicClient({ transport: http(testnet.rpcUrl) });
  const balance = () => chain.readContract({ address: testnet.token, abi: erc20Abi, functionName: "balanceOf", args: [stack.seller] });
  const before = await balance();
  const answer = await payFor(`${sellerUrl}/quote`, { privateKey: buyer.privateKey, maxAmount: 100_000n, rpcUrl: testnet.rpcUrl });
  assert.equal(answer.status, 200);
  assert.equal((answer.body as { quote: string }).quote, "Pay per request.");
  assert.deepEqual({ from: answer.transfer?.from, to: answer.transfer?.to, value: answer.transfer?.value }, { from: privateKeyToAccount(buyer.privateKey).address, to: stack.seller, value: PRICE });
  assert.equal((await balance()) - before, PRICE);
});

test("refuses to pay more than its maximum: nothing is signed, nothing moves", async () => {
  const testnet = stack.networks["cronos-testnet"]!;
  const chain = createPublicClient({ transport: http(testnet.rpcUrl) });
  const balance = () => chain.readContract({ address: testnet.token, abi: erc20Abi, functionName: "balanceOf", args: [stack.seller] });
  const before = await balance();
  await assert.rejects(payFor(`${sellerUrl}/quote`, { privateKey: testnet.buyers[1]!.privateKey, maxAmount: PRICE - 1n, rpcUrl: testnet.rpcUrl }), (error: unknown) => error instanceof PaymentError && error.code === "no_acceptable_requirements");
  assert.equal(await balance(), before);
});
