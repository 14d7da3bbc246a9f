import { expect } from "chai";
import { Facilitator, CronosNetwork } from "@crypto.com/facilitator-client";
import request from "supertest";
import type { TypedDataDomain, TypedDataParameter } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { VECTOR_A_HEADER, VECTOR_SIGNER, VECTOR_PAYEE } from "../helpers/vectors.js";
import { HARDHAT_KEYS, openFacilitator } from "../helpers/facilitator.js";
import { listen } from "../helpers/http.js";

type Opened = Awaited<ReturnType<typeof openFacilitator>>;

/** The official client with its fixed base URL pointed at our facilitator (the field is private, not protected at run time). */
function officialClient(url: string): Facilitator {
  const client = new Facilitator({ network: CronosNetwork.CronosTestnet });
  (client as unknown as { baseUrl: string }).baseUrl = url;
  return client;
}

/**
 * What the client uses of an ethers `Signer` (its address, its provider's chain id, `signTypedData`
 * with ethers' argument order), made of a viem account and the local chain: no ethers needed here.
 */
function ethersStyleSigner(key: `0x${string}`, opened: Opened) {
  const account = privateKeyToAccount(key);
  return {
    provider: { getNetwork: async () => ({ chainId: BigInt(await opened.chain.publicClient.getChainId()) }) },
    getAddress: async () => account.address,
    signTypedData: (domain: TypedDataDomain, types: Record<string, readonly TypedDataParameter[]>, message: Record<string, unknown>) =>
      account.signTypedData({ domain, types, primaryType: Object.keys(types)[0]!, message }),
  };
}

describe("the official Cronos client (@crypto.com/facilitator-client 1.0.4) against this facilitator", () => {
  let opened: Opened;
  let url: string;
  before(async () => {
    opened = await openFacilitator();
    url = (await listen(opened.app)).url;
  });

  it("accepts supported, and a header it generated verifies and settles with every field typed as it insists", async () => {
    const client = officialClient(url);
    const supported = await client.getSupported();
    // It reads the Cronos kinds and lets the x402 v2 kinds and fields beside them pass.
    expect(supported.kinds).to.deep.include({ x402Version: 1, scheme: "exact", network: "cronos-testnet" });
    expect(supported.kinds).to.have.length(2);

    // The client signs over its provider's chain id: the local chain reports 338.
    const header = await client.generatePaymentHeader({ to: opened.seller.address, value: "1000000", signer: ethersStyleSigner(HARDHAT_KEYS.buyer, opened) as never });
    const requirements = client.generatePaymentRequirements({
      payTo: opened.seller.address,
      description: "Premium API access",
      maxAmountRequired: "1000000",
    });
    const body = client.buildVerifyRequest(header, requirements);

    const verify = await client.verifyPayment(body);
    expect(verify).to.deep.equal({ isValid: true, invalidReason: null });
    const settle = await client.settlePayment(body);
    expect(settle.event).to.equal("payment.settled");
    expect(settle.txHash).to.match(/^0x[0-9a-f]{64}$/);
    expect(settle.from).to.equal(opened.buyer.address);
    expect(settle.to).to.equal(opened.seller.address);
    expect(settle.value).to.equal("1000000");
    expect(settle.blockNumber).to.be.a("number");
    expect(settle.network).to.equal("cronos-testnet");
    expect(new Date(settle.timestamp).toISOString()).to.equal(settle.timestamp);
    expect(await opened.chain.contract.read.balanceOf([opened.seller.address])).to.equal(1_000_000n);

    // A refusal passes its guards too: isValid false with a string reason; settle failed with an error.
    const again = await client.verifyPayment(body);
    expect(again).to.deep.equal({ isValid: false, invalidReason: "Authorization already used" });
    const failed = await client.settlePayment(body);
    expect(failed.event).to.equal("payment.failed");
    expect(failed.error).to.equal("Authorization already used");
  });

  it("verifies and settles vector A's header, exactly as the official client emits it, on the local 338 chain", async () => {
    // Vector A is signed by Hardhat account #0, the token's owner here: fund it.
    await opened.chain.contract.write.configureMinter([VECTOR_SIGNER.address, 10n ** 12n]);
    await opened.chain.contract.write.mint([VECTOR_SIGNER.address, 1_000_000n]);
    const body = {
      x402Version: 1,
      paymentHeader: VECTOR_A_HEADER,
      paymentRequirements: {
        scheme: "exact",
        network: "cronos-testnet",
        payTo: VECTOR_PAYEE,
        asset: "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0",
        maxAmountRequired: "1000000",
        maxTimeoutSeconds: 300,
      },
    };
    const verify = await request(opened.app).post("/v2/x402/verify").set("X402-Version", "1").send(body);
    expect(verify.body).to.deep.equal({ isValid: true, invalidReason: null });
    const before = await opened.chain.contract.read.balanceOf([VECTOR_PAYEE]);
    const settle = await officialClient(url).settlePayment(body as never);
    expect(settle.event).to.equal("payment.settled");
    expect(await opened.chain.contract.read.balanceOf([VECTOR_PAYEE])).to.equal(before + 1_000_000n);
  });
});
