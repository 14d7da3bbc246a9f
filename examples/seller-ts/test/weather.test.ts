// The seller's end-to-end test on the kit's harness: local chains with USDC.e at its real address, funded
// buyers and a facilitator, started once for this file.
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { createPublicClient, custom, erc20Abi } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { wrapFetchWithPayment } from "cronos-x402-facilitator-kit/buyer";
import { startLocalStack, type LocalStack } from "cronos-x402-facilitator-kit/harness";
import { createSeller } from "../src/app.ts";

let stack: LocalStack;
let sellerUrl: string;
let close: () => void;

before(async () => {
  stack = await startLocalStack({ networks: ["cronos-testnet"], port: 0, rpcPorts: { "cronos-testnet": 0 }, buyers: 2 });
  const server = createSeller({ facilitatorUrl: stack.facilitatorUrl, payTo: stack.seller, price: 10_000n }).listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  sellerUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => server.close();
});

after(async () => {
  close?.();
  await stack?.stop();
});

test("an unpaid request is answered 402 with the payment requirements", async () => {
  const response = await fetch(`${sellerUrl}/weather`);
  assert.equal(response.status, 402);
  const body = (await response.json()) as { x402Version: number; paymentRequirements: { network: string; maxAmountRequired: string; payTo: string } };
  assert.equal(body.x402Version, 1);
  assert.equal(body.paymentRequirements.network, "cronos-testnet");
  assert.equal(body.paymentRequirements.maxAmountRequired, "10000");
  assert.equal(body.paymentRequirements.payTo, stack.seller);
});

test("a paying buyer gets the weather, and the seller is paid 0.01 USDC.e on chain", async () => {
  const testnet = stack.networks["cronos-testnet"]!;
  const chain = createPublicClient({ transport: custom(stack.chains["cronos-testnet"]!.provider) });
  const balance = () => chain.readContract({ address: testnet.token, abi: erc20Abi, functionName: "balanceOf", args: [stack.seller] });
  const before = await balance();
  const pay = wrapFetchWithPayment(fetch, { signer: privateKeyToAccount(testnet.buyers[0]!.privateKey), maxAmount: 50_000n });
  const response = await pay(`${sellerUrl}/weather`);
  assert.equal(response.status, 200);
  assert.deepEqual(((await response.json()) as { forecast: string }).forecast, "thunderstorms");
  assert.equal((await balance()) - before, 10_000n);
});

test("a buyer that will not pay that much is refused before signing", async () => {
  const testnet = stack.networks["cronos-testnet"]!;
  const pay = wrapFetchWithPayment(fetch, { signer: privateKeyToAccount(testnet.buyers[1]!.privateKey), maxAmount: 9_999n });
  await assert.rejects(pay(`${sellerUrl}/weather`));
});
