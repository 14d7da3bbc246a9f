import { expect } from "chai";
import { HTTPFacilitatorClient } from "@x402/core/server";
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createV2PaymentPayload } from "../../src/buyer/index.js";
import { localAccount } from "../../src/harness/accounts.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { chainTime, TX_HASH } from "../helpers/chain.js";
import { PRICE, STACK_OPTIONS, startTestStack } from "../helpers/seller.js";
import { expectPaidOnChain, partyBalances } from "./helpers.js";
import { rejection } from "../helpers/reject.js";

/** A client answer without the keys the client sets to undefined, for exact comparisons. */
const plain = (value: unknown) => JSON.parse(JSON.stringify(value)) as Record<string, unknown>;

describe("@x402/core's HTTPFacilitatorClient against this facilitator: the payment, every refusal with @x402/evm's code, and settle replay", function () {
  let stack: LocalStack;
  let client: HTTPFacilitatorClient;
  let requirements: PaymentRequirements;
  let buyer: { address: `0x${string}`; privateKey: Hex };

  before(async () => {
    stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"] });
    client = new HTTPFacilitatorClient({ url: `${stack.facilitatorUrl}/v2/x402` });
    const info = stack.networks["cronos-testnet"]!;
    buyer = info.buyers[0]!;
    requirements = {
      scheme: "exact",
      network: "eip155:338",
      asset: info.token,
      amount: PRICE.toString(),
      payTo: stack.seller,
      maxTimeoutSeconds: 300,
      extra: { name: info.domain.name, version: info.domain.version },
    };
  });
  after(async () => {
    await stack?.stop();
  });

  /** A payment signed by @x402/evm's own client scheme, as @x402/fetch would send it. */
  async function x402Payment(privateKey: Hex = buyer.privateKey, accepted: PaymentRequirements = requirements): Promise<PaymentPayload> {
    const partial = await new ExactEvmScheme(privateKeyToAccount(privateKey)).createPaymentPayload(2, accepted);
    return { x402Version: 2, resource: { url: "http://seller.test/weather" }, accepted, payload: partial.payload };
  }

  /** A payment whose authorization the test controls (the kit buyer's v2 signer). */
  async function customPayment(options: Omit<Parameters<typeof createV2PaymentPayload>[0], "requirements" | "signer"> & { signer?: Hex } = {}) {
    const { signer, ...rest } = options;
    return (await createV2PaymentPayload({ signer: privateKeyToAccount(signer ?? buyer.privateKey), requirements, ...rest })) as unknown as PaymentPayload;
  }

  it("reads supported: both dialects' kinds, the payment-identifier extension, the relayer as the eip155 signer", async () => {
    expect(plain(await client.getSupported())).to.deep.equal({
      kinds: [
        { x402Version: 1, scheme: "exact", network: "cronos-testnet" },
        { x402Version: 2, scheme: "exact", network: "eip155:338" },
      ],
      extensions: ["bazaar", "payment-identifier"],
      signers: { "eip155:*": [stack.relayer] },
    });
  });

  it("verifies and settles a payment from @x402/evm's client, then refuses its replay on verify and settle", async () => {
    const payment = await x402Payment();
    const before = await partyBalances(stack, "cronos-testnet", buyer.address);
    expect(plain(await client.verify(payment, requirements))).to.deep.equal({ isValid: true, payer: buyer.address });
    const settled = plain(await client.settle(payment, requirements));
    expect(settled.transaction).to.match(TX_HASH);
    expect(settled).to.deep.equal({ success: true, payer: buyer.address, transaction: settled.transaction, network: "eip155:338" });
    await expectPaidOnChain(stack, "cronos-testnet", String(settled.transaction), { buyer: buyer.address, price: PRICE, before });
    const afterPayment = await partyBalances(stack, "cronos-testnet", buyer.address);

    expect(plain(await client.verify(payment, requirements))).to.deep.equal({
      isValid: false,
      invalidReason: "invalid_exact_evm_nonce_already_used",
      invalidMessage: "Authorization already used",
      payer: buyer.address,
    });
    expect(plain(await client.settle(payment, requirements))).to.deep.equal({
      success: false,
      errorReason: "invalid_exact_evm_nonce_already_used",
      errorMessage: "Authorization already used",
      payer: buyer.address,
      transaction: settled.transaction,
      network: "eip155:338",
    });
    expect(await partyBalances(stack, "cronos-testnet", buyer.address)).to.deep.equal(afterPayment);
  });

  const OTHER = "0x5FbDB2315678afecb367f032d93F642f64180aa3" as const;
  const refusals: Array<{
    name: string;
    code: string;
    message: string;
    /** settle's text where it has its own word. */
    settleMessage?: string;
    payment: () => Promise<PaymentPayload>;
    requirements?: () => PaymentRequirements;
  }> = [
    {
      name: "a wrong amount",
      code: "invalid_exact_evm_payload_authorization_value_mismatch",
      message: `Invalid amount: ${PRICE}`,
      payment: () => x402Payment(),
      requirements: () => ({ ...requirements, amount: (PRICE * 2n).toString() }),
    },
    {
      name: "a wrong recipient",
      code: "invalid_exact_evm_recipient_mismatch",
      message: "Recipient does not match payTo address",
      payment: () => x402Payment(),
      requirements: () => ({ ...requirements, payTo: localAccount(7).address }),
    },
    {
      name: "a wrong asset",
      code: "invalid_exact_evm_eip3009_not_supported",
      message: `Unsupported asset: ${OTHER}`,
      payment: () => x402Payment(),
      requirements: () => ({ ...requirements, asset: OTHER }),
    },
    {
      name: "a wrong network",
      code: "invalid_exact_evm_network_mismatch",
      message: "Unsupported network: eip155:1",
      payment: () => x402Payment(),
      requirements: () => ({ ...requirements, network: "eip155:1" }),
    },
    {
      name: "an expired authorization",
      code: "invalid_exact_evm_payload_authorization_valid_before",
      message: "Authorization expired",
      payment: async () => customPayment({ validBefore: (await chainTime(stack.networks["cronos-testnet"]!.rpcUrl)) + 3n }),
    },
    {
      name: "an authorization not yet valid",
      code: "invalid_exact_evm_payload_authorization_valid_after",
      message: "Authorization not yet valid",
      payment: async () => customPayment({ validAfter: (await chainTime(stack.networks["cronos-testnet"]!.rpcUrl)) + 3600n }),
    },
    {
      name: "a bad signature (signed over another chain)",
      code: "invalid_exact_evm_signature",
      message: "Invalid EIP-3009 signature",
      settleMessage: "Invalid signature",
      payment: () => customPayment({ chainId: 1 }),
    },
    {
      name: "a payer without the balance",
      code: "invalid_exact_evm_insufficient_balance",
      message: "ERC20: transfer amount exceeds balance",
      payment: () => x402Payment(generatePrivateKey()),
    },
  ];

  for (const refusal of refusals) {
    it(`refuses ${refusal.name} with ${refusal.code}, on verify and on settle, and moves nothing`, async () => {
      const payment = await refusal.payment();
      const payer = (payment.payload as { authorization: { from: string } }).authorization.from;
      const terms = refusal.requirements?.() ?? requirements;
      const before = await partyBalances(stack, "cronos-testnet", payer as `0x${string}`);
      expect(plain(await client.verify(payment, terms))).to.deep.equal({ isValid: false, invalidReason: refusal.code, invalidMessage: refusal.message, payer });
      expect(plain(await client.settle(payment, terms))).to.deep.equal({
        success: false,
        errorReason: refusal.code,
        errorMessage: refusal.settleMessage ?? refusal.message,
        payer,
        transaction: "",
        network: terms.network,
      });
      expect(await partyBalances(stack, "cronos-testnet", payer as `0x${string}`)).to.deep.equal(before);
    });
  }

  it("refuses a used nonce with invalid_exact_evm_nonce_already_used, whoever settled it", async () => {
    const nonce = `0x${"42".repeat(32)}` as Hex;
    const first = await customPayment({ nonce });
    expect(plain(await client.settle(first, requirements)).success).to.equal(true);
    // Another authorization (another amount) under the same nonce.
    const again = await createV2PaymentPayload({
      signer: privateKeyToAccount(buyer.privateKey),
      requirements: { ...requirements, amount: "1" },
      nonce,
    });
    const answer = plain(await client.verify(again as unknown as PaymentPayload, { ...requirements, amount: "1" }));
    expect(answer).to.deep.equal({
      isValid: false,
      invalidReason: "invalid_exact_evm_nonce_already_used",
      invalidMessage: "Authorization already used",
      payer: buyer.address,
    });
  });

  it("gets 400 invalid_request as a VerifyError naming the problem for a body mixing the dialects", async () => {
    const payment = await x402Payment();
    const caught = await rejection(client.verify(payment, { ...requirements, network: "cronos-testnet" } as unknown as PaymentRequirements), Error);
    expect(caught).to.include({
      name: "VerifyError",
      statusCode: 400,
      invalidReason: "invalid_request",
      message:
        "invalid_request: Invalid request: paymentRequirements.network cronos-testnet is a Cronos-dialect network name (x402Version 1): x402Version 2 names it eip155:338",
    });
  });
});
