import { expect } from "chai";
import { parseGwei, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader, getPaymentResponse, wrapFetchWithPayment } from "../../src/buyer/index.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { NETWORKS, type NetworkName } from "../../src/protocol/networks.js";
import type { PaymentRequirements } from "../../src/protocol/schemas.js";
import { expectSettlementOnChain, rpcClient, tokenBalances, TX_HASH } from "../helpers/chain.js";
import { type FacilitatorProxy } from "../helpers/facilitator-proxy.js";
import { decodeBase64Json, expectAnswer, recordingFetch } from "../helpers/http.js";
import { content, paymentRequiredBody, PRICE, type TestSeller, useSellerEnvironment } from "../helpers/seller.js";
import { ISO_TIME } from "../helpers/time.js";

describe("e2e: paying a seller over real HTTP (buyer SDK → seller SDK → facilitator → local chains)", function () {
  let stack: LocalStack;
  let proxy: FacilitatorProxy;
  let seller: TestSeller;

  const env = useSellerEnvironment();
  before(() => ({ stack, proxy, seller } = env));

  it("runs on the local chains as the harness starts them by default: each a Cronos node (a nonce gap refused with its text)", async () => {
    for (const network of ["cronos-testnet", "cronos-mainnet"] as const) {
      const chain = stack.chains[network]!;
      expect([chain.node, chain.cronosNode !== undefined], network).to.deep.equal(["cronos", true]);
      // A key of nobody's, its nonce 5 first: refused (never queued), nothing changes.
      const stranger = privateKeyToAccount(generatePrivateKey());
      const { chainId } = stack.networks[network]!;
      const gap = await stranger.signTransaction({ chainId, type: "eip1559", to: stranger.address, gas: 21_000n, nonce: 5, maxFeePerGas: parseGwei("100000"), maxPriorityFeePerGas: 0n });
      const answer = await fetch(stack.networks[network]!.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [gap] }) });
      expect(await answer.json(), network).to.deep.equal({ jsonrpc: "2.0", id: 1, error: { code: -32000, message: "invalid nonce; got 5, expected 0: invalid sequence: invalid sequence" } });
    }
  });

  const cases: Array<{ route: "testnet" | "mainnet" | "cronos"; network: NetworkName; wire: string; chainId: number; version: string }> = [
    { route: "testnet", network: "cronos-testnet", wire: "cronos-testnet", chainId: 338, version: "1" },
    { route: "mainnet", network: "cronos-mainnet", wire: "cronos-mainnet", chainId: 25, version: "2" },
    { route: "cronos", network: "cronos-mainnet", wire: "cronos", chainId: 25, version: "2" },
  ];

  for (const { route, network, wire, chainId, version } of cases) {
    it(`pays a ${wire} route: 402, signed retry, verify, settle, 200 with content + payment + X-PAYMENT-RESPONSE, and USDC.e moves on chain ${chainId}`, async () => {
      const info = stack.networks[network]!;
      expect({ chainId: info.chainId, token: info.token, domain: info.domain }).to.deep.equal({
        chainId,
        token: NETWORKS[network].token,
        domain: { name: "Bridged USDC (Stargate)", version },
      });
      const url = `${seller.url}${seller.routes[route]}`;
      const requirements = seller.requirements[route];

      // Unpaid: the seller's 402 with its requirements.
      await expectAnswer(await fetch(url), 402, paymentRequiredBody(requirements, "Payment Required"));
      expect(requirements).to.deep.equal({
        scheme: "exact",
        network: wire,
        payTo: stack.seller,
        asset: NETWORKS[network].token,
        maxAmountRequired: "10000",
        description: "X402 payment request",
        mimeType: "application/json",
        maxTimeoutSeconds: 300,
        resource: seller.routes[route],
      });
      expect(proxy.paths()).to.deep.equal([]);

      const buyer = privateKeyToAccount(info.buyers[0]!.privateKey);
      const client = rpcClient(info.rpcUrl);
      const before = await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller]);
      const buyerGasBefore = await client.getBalance({ address: buyer.address });

      const recorder = recordingFetch();
      const paidFetch = wrapFetchWithPayment(recorder.fetch, { signer: buyer, maxAmount: PRICE });
      const response = await paidFetch(url);
      const text = await response.text();
      expect(response.status, text).to.equal(200);
      const body = JSON.parse(text) as { payment: { txHash: Hex; blockNumber: number } };

      // The header the buyer sent, and what the seller passed to the facilitator.
      expect(recorder.paymentHeaders).to.have.length(1);
      const header = recorder.paymentHeaders[0]!;
      const sent = decodeBase64Json(header);
      expect(sent).to.deep.include({ x402Version: 1, scheme: "exact", network: wire });
      expect(sent.payload).to.deep.include({ from: buyer.address, to: stack.seller, value: "10000", validAfter: 0, asset: NETWORKS[network].token });
      const nonce = sent.payload.nonce as Hex;
      expect(proxy.paths()).to.deep.equal(["/v2/x402/verify", "/v2/x402/settle"]);
      const facilitatorRequest = { x402Version: 1, paymentHeader: header, paymentRequirements: requirements };
      expect(proxy.calls.map((call) => call.body)).to.deep.equal([facilitatorRequest, facilitatorRequest]);
      expect(proxy.calls[0]!.answer).to.deep.equal({ isValid: true, invalidReason: null });

      // The chain: one transaction by the relayer with AuthorizationUsed then Transfer.
      expect(body.payment.txHash).to.match(TX_HASH);
      const onChain = await expectSettlementOnChain(stack, network, body.payment.txHash, {
        from: buyer.address,
        to: stack.seller,
        value: PRICE,
        nonce,
      });
      expect(onChain.timestamp).to.match(ISO_TIME);
      const payment = {
        txHash: body.payment.txHash,
        from: buyer.address,
        to: stack.seller,
        value: "10000",
        blockNumber: Number(onChain.receipt.blockNumber),
        timestamp: onChain.timestamp,
      };
      expect(body).to.deep.equal({ ...content(seller.routes[route]), payment });

      // X-PAYMENT-RESPONSE: the facilitator's settle answer, base64 JSON, network as the seller wrote it.
      const settlement = { x402Version: 1, event: "payment.settled", network: wire, ...payment };
      expect(getPaymentResponse(response)).to.deep.equal(settlement);
      expect(decodeBase64Json(response.headers.get("X-PAYMENT-RESPONSE")!)).to.deep.equal(settlement);
      expect(proxy.calls[1]!.answer).to.deep.equal(settlement);

      // Balances: the buyer paid the price and no gas; the seller got the price.
      const after = await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller]);
      expect(after).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
      expect(await client.getBalance({ address: buyer.address })).to.equal(buyerGasBefore);
    });
  }

  it("serves a replay of a paid header within the retry window from the facilitator's record: the same answer and transaction, no more USDC.e", async () => {
    const info = stack.networks["cronos-testnet"]!;
    const url = `${seller.url}${seller.routes.testnet}`;
    const buyer = privateKeyToAccount(info.buyers[1]!.privateKey);
    const recorder = recordingFetch();
    const before = await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller]);

    const paid = await wrapFetchWithPayment(recorder.fetch, { signer: buyer, maxAmount: PRICE })(url);
    expect(paid.status).to.equal(200);
    const first = (await paid.json()) as { payment: { txHash: Hex } };
    const { payment } = first;
    const afterPayment = await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller]);
    expect(afterPayment).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);

    // The facilitator calls the header used; the seller finds it settled for this route (within its
    // maxTimeoutSeconds, docs: "one payment, one answer") and answers as it did.
    proxy.reset();
    const replay = await fetch(url, { headers: { "X-PAYMENT": recorder.paymentHeaders[0]! } });
    await expectAnswer(replay, 200, first);
    expect(getPaymentResponse(replay)).to.deep.equal(getPaymentResponse(paid));
    expect(proxy.paths().map((path) => path.split("?")[0])).to.deep.equal(["/v2/x402/verify", "/v2/x402/settlements"]);
    expect(proxy.calls[0]!.answer).to.deep.equal({ isValid: false, invalidReason: "Authorization already used" });
    expect(await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller])).to.deep.equal(afterPayment);

    // The facilitator's own answers are unchanged: its settle calls the header used and names the transaction.
    const settle = await fetch(`${stack.facilitatorUrl}/v2/x402/settle`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ x402Version: 1, paymentHeader: recorder.paymentHeaders[0], paymentRequirements: seller.requirements.testnet }),
    });
    expect(settle.status).to.equal(200);
    const answer = (await settle.json()) as Record<string, unknown>;
    expect(answer.timestamp).to.match(ISO_TIME);
    expect({ ...answer, timestamp: "…" }).to.deep.equal({
      x402Version: 1,
      event: "payment.failed",
      network: "cronos-testnet",
      timestamp: "…",
      error: "Authorization already used",
      txHash: payment.txHash,
    });
    expect(await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller])).to.deep.equal(afterPayment);
  });

  it("takes the payment header from a JSON body field paymentHeader instead of X-PAYMENT and answers 200", async () => {
    const info = stack.networks["cronos-testnet"]!;
    const url = `${seller.url}${seller.routes.testnetPost}`;
    const buyer = privateKeyToAccount(info.buyers[2]!.privateKey);
    const post = (body: unknown) => fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

    const unpaid = await post({ question: "weather?" });
    const required = (await unpaid.clone().json()) as { paymentRequirements: PaymentRequirements };
    await expectAnswer(unpaid, 402, paymentRequiredBody(seller.requirements.testnet, "Payment Required"));

    const before = await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller]);
    const paymentHeader = await createPaymentHeader({ signer: buyer, requirements: required.paymentRequirements });
    const response = await post({ question: "weather?", paymentHeader });
    const text = await response.text();
    expect(response.status, text).to.equal(200);
    const body = JSON.parse(text) as { payment: { txHash: Hex } };
    const onChain = await expectSettlementOnChain(stack, "cronos-testnet", body.payment.txHash, {
      from: buyer.address,
      to: stack.seller,
      value: PRICE,
      nonce: decodeBase64Json(paymentHeader).payload.nonce as Hex,
    });
    const payment = {
      txHash: body.payment.txHash,
      from: buyer.address,
      to: stack.seller,
      value: "10000",
      blockNumber: Number(onChain.receipt.blockNumber),
      timestamp: onChain.timestamp,
    };
    expect(body).to.deep.equal({ ...content(`POST ${seller.routes.testnetPost}`), payment });
    expect(getPaymentResponse(response)).to.deep.equal({ x402Version: 1, event: "payment.settled", network: "cronos-testnet", ...payment });
    expect(proxy.paths()).to.deep.equal(["/v2/x402/verify", "/v2/x402/settle"]);
    expect(await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller])).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
  });
});
