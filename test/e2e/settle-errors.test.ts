import { expect } from "chai";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader, wrapFetchWithPayment } from "../../src/buyer/index.js";
import { localAccount } from "../../src/harness/accounts.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { chainTime, expectSettlementOnChain, increaseTime, ownerKey, rpcClient, tokenBalance, tokenBalances, writeToken } from "../helpers/chain.js";
import { type FacilitatorProxy } from "../helpers/facilitator-proxy.js";
import { decodeBase64Json, expectAnswer, recordingFetch } from "../helpers/http.js";
import { content, paymentRequiredBody, PRICE, type TestSeller, useSellerEnvironment } from "../helpers/seller.js";
import { withoutTimestamp } from "../helpers/time.js";

const SETTLEMENT_FAILED = "Payment settlement failed";

describe("e2e: settle errors after a passing verify, through a real seller (402 with the settle error)", function () {
  let stack: LocalStack;
  /** Between the seller and the facilitator: sees the calls, and can act on the chain between verify and settle. */
  let proxy: FacilitatorProxy;
  let seller: TestSeller;

  const testnet = () => stack.networks["cronos-testnet"]!;
  const url = () => `${seller.url}${seller.routes.testnet}`;
  const send = (header: string) => fetch(url(), { headers: { "X-PAYMENT": header } });

  const env = useSellerEnvironment();
  before(() => ({ stack, proxy, seller } = env));

  /** Asserts the seller's 402, that verify passed and settle failed with `error` (and `txHash` when given). */
  async function expectSettleFailed(response: Response, error: string, txHash?: Hex) {
    await expectAnswer(response, 402, paymentRequiredBody(seller.requirements.testnet, SETTLEMENT_FAILED, error));
    expect(response.headers.get("X-PAYMENT-RESPONSE")).to.equal(null);
    expect(proxy.paths()).to.deep.equal(["/v2/x402/verify", "/v2/x402/settle"]);
    // Every settle outcome is a 200 (decisions.md), a refusal too.
    expect(proxy.calls.map((call) => call.status)).to.deep.equal([200, 200]);
    expect(proxy.calls[0]!.answer).to.deep.equal({ isValid: true, invalidReason: null });
    expect(withoutTimestamp(proxy.calls[1]!.answer)).to.deep.equal({
      x402Version: 1,
      event: "payment.failed",
      network: "cronos-testnet",
      error,
      ...(txHash ? { txHash } : {}),
    });
  }

  it("answers Transaction failed on-chain when the token is paused (verify does not read pause), spends no gas, and the same header pays once unpaused", async () => {
    const info = testnet();
    const buyer = privateKeyToAccount(info.buyers[0]!.privateKey);
    const header = await createPaymentHeader({ signer: buyer, requirements: seller.requirements.testnet });
    const parties = [buyer.address, stack.seller];
    const before = await tokenBalances(info.rpcUrl, info.token, parties);
    const relayerNonce = await rpcClient(info.rpcUrl).getTransactionCount({ address: stack.relayer });

    await writeToken("cronos-testnet", info.rpcUrl, info.token, ownerKey(), "pause");
    try {
      await expectSettleFailed(await send(header), "Transaction failed on-chain");
      expect(await tokenBalances(info.rpcUrl, info.token, parties)).to.deep.equal(before);
      // Caught by the simulation: nothing was sent.
      expect(await rpcClient(info.rpcUrl).getTransactionCount({ address: stack.relayer })).to.equal(relayerNonce);
    } finally {
      await writeToken("cronos-testnet", info.rpcUrl, info.token, ownerKey(), "unpause");
    }

    proxy.reset();
    const paid = await send(header);
    expect(paid.status, await paid.clone().text()).to.equal(200);
    expect(await tokenBalances(info.rpcUrl, info.token, parties)).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
  });

  it("answers Transaction failed on-chain when the payer is blacklisted, moves nothing and spends no gas", async () => {
    const info = testnet();
    const buyer = privateKeyToAccount(info.buyers[0]!.privateKey);
    const before = await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller]);
    await writeToken("cronos-testnet", info.rpcUrl, info.token, ownerKey(), "blacklist", [buyer.address]);
    try {
      const relayerNonce = await rpcClient(info.rpcUrl).getTransactionCount({ address: stack.relayer, blockTag: "pending" });
      const response = await wrapFetchWithPayment(fetch, { signer: buyer, maxAmount: PRICE })(url());
      await expectSettleFailed(response, "Transaction failed on-chain");
      // Caught by the simulation: the relayer sent nothing.
      expect(await rpcClient(info.rpcUrl).getTransactionCount({ address: stack.relayer, blockTag: "pending" })).to.equal(relayerNonce);
    } finally {
      await writeToken("cronos-testnet", info.rpcUrl, info.token, ownerKey(), "unBlacklist", [buyer.address]);
    }
    expect(await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller])).to.deep.equal(before);
  });

  it("answers Authorization expired when the chain's clock passes validBefore between verify and settle", async () => {
    const info = testnet();
    const buyer = privateKeyToAccount(info.buyers[0]!.privateKey);
    const now = await chainTime(info.rpcUrl);
    const header = await createPaymentHeader({ signer: buyer, requirements: seller.requirements.testnet, validBefore: now + 60n });
    const before = await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller]);
    proxy.beforeSettle = () => increaseTime(info.rpcUrl, 120);

    await expectSettleFailed(await send(header), "Authorization expired");
    expect(await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller])).to.deep.equal(before);
  });

  it("serves the buyer whose header another holder settles between verify and settle (replay race): settle says Authorization already used naming that transaction, and the seller's lookup finds it paid this route; USDC.e moves once", async () => {
    const info = testnet();
    const buyer = privateKeyToAccount(info.buyers[1]!.privateKey);
    const recorder = recordingFetch();
    const before = await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller]);
    let raced: { event: string; txHash: Hex; blockNumber: number; timestamp: string } | undefined;
    proxy.beforeSettle = async (body) => {
      // Someone holding the same header settles it first, straight at the facilitator.
      const response = await fetch(`${stack.facilitatorUrl}/v2/x402/settle`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      raced = (await response.json()) as typeof raced;
    };

    const response = await wrapFetchWithPayment(recorder.fetch, { signer: buyer, maxAmount: PRICE })(url());
    expect(raced?.event).to.equal("payment.settled");
    const payment = { txHash: raced!.txHash, from: buyer.address, to: stack.seller, value: PRICE.toString(), blockNumber: raced!.blockNumber, timestamp: raced!.timestamp };
    await expectAnswer(response, 200, { ...content(seller.routes.testnet), payment });
    expect(proxy.paths().map((path) => path.split("?")[0])).to.deep.equal(["/v2/x402/verify", "/v2/x402/settle", "/v2/x402/settlements"]);
    expect(withoutTimestamp(proxy.calls[1]!.answer)).to.deep.equal({
      x402Version: 1,
      event: "payment.failed",
      network: "cronos-testnet",
      error: "Authorization already used",
      txHash: raced!.txHash,
    });
    await expectSettlementOnChain(stack, "cronos-testnet", raced!.txHash, {
      from: buyer.address,
      to: stack.seller,
      value: PRICE,
      nonce: decodeBase64Json(recorder.paymentHeaders[0]!).payload.nonce as Hex,
    });
    expect(await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller])).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
  });

  it("answers three concurrent requests with the same header with the one transaction (one settles it, the others are its retries); USDC.e moves once", async () => {
    const info = testnet();
    const buyer = privateKeyToAccount(info.buyers[1]!.privateKey);
    const header = await createPaymentHeader({ signer: buyer, requirements: seller.requirements.testnet });
    const before = await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller]);

    const responses = await Promise.all([send(header), send(header), send(header)]);
    const bodies = await Promise.all(responses.map(async (response) => [response.status, await response.json()] as const));
    const [first] = bodies;
    expect(first![0]).to.equal(200);
    expect((first![1] as { payment: { txHash: string } }).payment.txHash).to.match(/^0x[0-9a-f]{64}$/);
    expect(bodies).to.deep.equal([first, first, first]);
    expect(await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller])).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
  });

  it("answers ERC20: transfer amount exceeds balance when the buyer moves its USDC.e away between verify and settle", async () => {
    const info = testnet();
    const key = info.buyers[2]!.privateKey;
    const buyer = privateKeyToAccount(key);
    const elsewhere = localAccount(5).address;
    const held = await tokenBalance(info.rpcUrl, info.token, buyer.address);
    const sellerBefore = await tokenBalance(info.rpcUrl, info.token, stack.seller);
    proxy.beforeSettle = async () => {
      await writeToken("cronos-testnet", info.rpcUrl, info.token, key, "transfer", [elsewhere, held]);
    };
    try {
      const response = await wrapFetchWithPayment(fetch, { signer: buyer, maxAmount: PRICE })(url());
      await expectSettleFailed(response, "ERC20: transfer amount exceeds balance");
      expect(await tokenBalance(info.rpcUrl, info.token, stack.seller)).to.equal(sellerBefore);
    } finally {
      await writeToken("cronos-testnet", info.rpcUrl, info.token, localAccount(5).privateKey, "transfer", [buyer.address, held]);
    }
  });

  it("answers the two settle errors a passing verify rules out on /v2/x402/settle directly: Authorization not yet valid and Invalid signature", async () => {
    // The chain's clock only moves forward and an EOA signature does not change, so after verify said
    // yes these two cannot happen; settle still answers them for a request that was never verified.
    const info = testnet();
    const buyer = privateKeyToAccount(info.buyers[0]!.privateKey);
    const now = await chainTime(info.rpcUrl);
    const settle = async (paymentHeader: string) => {
      const response = await fetch(`${stack.facilitatorUrl}/v2/x402/settle`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ x402Version: 1, paymentHeader, paymentRequirements: seller.requirements.testnet }),
      });
      expect(response.status).to.equal(200);
      return withoutTimestamp(await response.json());
    };
    const early = await createPaymentHeader({ signer: buyer, requirements: seller.requirements.testnet, validAfter: now + 600n, validBefore: now + 3600n });
    expect(await settle(early)).to.deep.equal({ x402Version: 1, event: "payment.failed", network: "cronos-testnet", error: "Authorization not yet valid" });
    const wrongChain = await createPaymentHeader({ signer: buyer, requirements: seller.requirements.testnet, chainId: 25 });
    expect(await settle(wrongChain)).to.deep.equal({ x402Version: 1, event: "payment.failed", network: "cronos-testnet", error: "Invalid signature" });
  });
});
