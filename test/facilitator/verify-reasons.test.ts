import { expect } from "chai";
import request from "supertest";
import { concat, toHex, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { transferAuthorizationTypedData } from "../../src/protocol/eip3009.js";
import { encodePaymentHeader } from "../../src/protocol/header.js";
import { cancelAuthorization, HARDHAT_KEYS, makePayment, openFacilitator } from "../helpers/facilitator.js";
import { decodeBase64Json, encodeBase64Json } from "../helpers/http.js";
import { toHighS } from "../helpers/sign.js";
import { SPEC_VERIFY } from "../helpers/spec-texts.js";

type Opened = Awaited<ReturnType<typeof openFacilitator>>;

async function verify(opened: Opened, body: object) {
  const response = await request(opened.app).post("/v2/x402/verify").set("X402-Version", "1").send(body);
  expect(response.status, JSON.stringify(response.body)).to.equal(200);
  return response.body as { isValid: boolean; invalidReason: string | null };
}

describe("facilitator verify: every reason, in the spec's order", () => {
  let opened: Opened;
  before(async () => {
    opened = await openFacilitator();
  });

  it("answers Invalid Base64 paymentHeader for text that is not base64", async () => {
    const { body } = await makePayment(opened.chain);
    expect(await verify(opened, { ...body, paymentHeader: "%%%not base64%%%" })).to.deep.equal({
      isValid: false,
      invalidReason: SPEC_VERIFY.invalidBase64,
    });
  });

  it("answers Invalid Base64 paymentHeader for base64 that is not JSON", async () => {
    const { body } = await makePayment(opened.chain);
    expect(await verify(opened, { ...body, paymentHeader: Buffer.from("hello").toString("base64") })).to.deep.equal({
      isValid: false,
      invalidReason: "Invalid Base64 paymentHeader",
    });
  });

  it("answers Invalid paymentHeader naming the field for JSON of the wrong shape", async () => {
    const { body } = await makePayment(opened.chain);
    const header = decodeBase64Json(body.paymentHeader);
    header.payload.from = "0x1234";
    expect(await verify(opened, { ...body, paymentHeader: encodeBase64Json(header) })).to.deep.equal({
      isValid: false,
      invalidReason: "Invalid paymentHeader: payload.from must be a 0x-prefixed 20-byte address",
    });
    expect(await verify(opened, { ...body, paymentHeader: encodeBase64Json({ x402Version: 1, scheme: "exact", network: "cronos-testnet" }) })).to.deep.equal({
      isValid: false,
      invalidReason: "Invalid paymentHeader: payload is required",
    });
  });

  it("answers Unsupported scheme for requirements or a header that are not exact", async () => {
    const { body } = await makePayment(opened.chain);
    expect(await verify(opened, { ...body, paymentRequirements: { ...body.paymentRequirements, scheme: "upto" } })).to.deep.equal({
      isValid: false,
      invalidReason: "Unsupported scheme: upto",
    });
    const header = decodeBase64Json(body.paymentHeader);
    header.scheme = "streaming";
    expect(await verify(opened, { ...body, paymentHeader: encodeBase64Json(header) })).to.deep.equal({
      isValid: false,
      invalidReason: "Unsupported scheme: streaming",
    });
  });

  it("answers Unsupported network for an unknown or unconfigured network, or a header on another network", async () => {
    const { body } = await makePayment(opened.chain);
    for (const network of ["base-sepolia", "cronos-mainnet", "cronos"]) {
      expect(await verify(opened, { ...body, paymentRequirements: { ...body.paymentRequirements, network } })).to.deep.equal({
        isValid: false,
        invalidReason: `Unsupported network: ${network}`,
      });
    }
    const header = decodeBase64Json(body.paymentHeader);
    header.network = "cronos-mainnet";
    expect(await verify(opened, { ...body, paymentHeader: encodeBase64Json(header) })).to.deep.equal({
      isValid: false,
      invalidReason: "Unsupported network: cronos-mainnet",
    });
  });

  it("answers Unsupported asset when the requirements or the header name another token", async () => {
    const { body } = await makePayment(opened.chain);
    const other = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
    expect(await verify(opened, { ...body, paymentRequirements: { ...body.paymentRequirements, asset: other } })).to.deep.equal({
      isValid: false,
      invalidReason: `Unsupported asset: ${other}`,
    });
    const header = decodeBase64Json(body.paymentHeader);
    header.payload.asset = other;
    expect(await verify(opened, { ...body, paymentHeader: encodeBase64Json(header) })).to.deep.equal({
      isValid: false,
      invalidReason: `Unsupported asset: ${other}`,
    });
  });

  it("accepts the token address in any letter case", async () => {
    const { body } = await makePayment(opened.chain);
    const lower = { ...body.paymentRequirements, asset: opened.chain.token.toLowerCase(), payTo: body.paymentRequirements.payTo.toLowerCase() };
    expect(await verify(opened, { ...body, paymentRequirements: lower })).to.deep.equal({ isValid: true, invalidReason: null });
  });

  it("answers Invalid amount for a value that is zero, not an integer, too large, or not the required amount", async () => {
    const { body } = await makePayment(opened.chain);
    for (const value of ["0", "-5", "1.5", "abc", (1n << 256n).toString()]) {
      const header = decodeBase64Json(body.paymentHeader);
      header.payload.value = value;
      expect(await verify(opened, { ...body, paymentHeader: encodeBase64Json(header) })).to.deep.equal({
        isValid: false,
        invalidReason: `Invalid amount: ${value}`,
      });
    }
    expect(
      await verify(opened, { ...body, paymentRequirements: { ...body.paymentRequirements, maxAmountRequired: "2000000" } }),
    ).to.deep.equal({ isValid: false, invalidReason: "Invalid amount: 1000000" });
  });

  it("answers Recipient does not match payTo address when the authorization pays someone else", async () => {
    const { body } = await makePayment(opened.chain);
    const payTo = privateKeyToAccount(HARDHAT_KEYS.buyer2).address;
    expect(await verify(opened, { ...body, paymentRequirements: { ...body.paymentRequirements, payTo } })).to.deep.equal({
      isValid: false,
      invalidReason: SPEC_VERIFY.recipientMismatch,
    });
  });

  describe("Invalid EIP-3009 signature", () => {
    const invalid = { isValid: false, invalidReason: "Invalid EIP-3009 signature" };

    it("for a signature by another key (over the very message the header carries)", async () => {
      const { body, message } = await makePayment(opened.chain, { signer: privateKeyToAccount(HARDHAT_KEYS.buyer2) });
      expect(decodeBase64Json(body.paymentHeader).payload.from).to.equal(message.from);
      expect(await verify(opened, body)).to.deep.equal(invalid);
    });

    it("for a signature over another value", async () => {
      const { body } = await makePayment(opened.chain, { signedValue: 2_000_000n });
      expect(await verify(opened, body)).to.deep.equal(invalid);
    });

    it("for a signature over another chain id (vector C's mistake)", async () => {
      const { body } = await makePayment(opened.chain, { chainId: 31337 });
      expect(await verify(opened, body)).to.deep.equal(invalid);
    });

    it("for a signature over another domain version", async () => {
      const { body } = await makePayment(opened.chain, { domainVersion: "2" });
      expect(await verify(opened, body)).to.deep.equal(invalid);
    });

    it("for a high-s twin of a valid signature, which the token refuses", async () => {
      const { body, signature } = await makePayment(opened.chain);
      const header = decodeBase64Json(body.paymentHeader);
      header.payload.signature = toHighS(signature).signature;
      expect(await verify(opened, { ...body, paymentHeader: encodeBase64Json(header) })).to.deep.equal(invalid);
    });

    it("for v outside 27/28 and for a signature of the wrong length", async () => {
      const { body, signature } = await makePayment(opened.chain);
      for (const bad of [(signature.slice(0, -2) + "01") as Hex, signature.slice(0, -2) as Hex, concat([signature, "0x00"])]) {
        const header = decodeBase64Json(body.paymentHeader);
        header.payload.signature = bad;
        expect(await verify(opened, { ...body, paymentHeader: encodeBase64Json(header) })).to.deep.equal(invalid);
      }
    });
  });

  describe("the validity window, by the chain's clock", () => {
    it("answers Authorization not yet valid until the chain passes validAfter", async () => {
      const latest = await opened.chain.publicClient.getBlock();
      const validAfter = latest.timestamp + 100n;
      const { body } = await makePayment(opened.chain, { validAfter, validBefore: validAfter + 3600n });
      expect(await verify(opened, body)).to.deep.equal({ isValid: false, invalidReason: "Authorization not yet valid" });
      await opened.chain.networkHelpers.time.increaseTo(validAfter);
      // validAfter == the chain's time: FiatToken requires block.timestamp > validAfter.
      expect(await verify(opened, body)).to.deep.equal({ isValid: false, invalidReason: "Authorization not yet valid" });
      await opened.chain.networkHelpers.mine();
      expect(await verify(opened, body)).to.deep.equal({ isValid: true, invalidReason: null });
    });

    it("answers Authorization expired once validBefore is within the settle margin (6 s)", async () => {
      const latest = await opened.chain.publicClient.getBlock();
      const { body } = await makePayment(opened.chain, { validBefore: latest.timestamp + 100n });
      expect(await verify(opened, body)).to.deep.equal({ isValid: true, invalidReason: null });
      await opened.chain.networkHelpers.time.increaseTo(latest.timestamp + 100n - 7n);
      expect(await verify(opened, body)).to.deep.equal({ isValid: true, invalidReason: null });
      await opened.chain.networkHelpers.mine();
      expect(await verify(opened, body)).to.deep.equal({ isValid: false, invalidReason: "Authorization expired" });
    });

    it("puts no upper bound on validBefore (beyond 2^53 it travels as a numeric string)", async () => {
      const { body } = await makePayment(opened.chain, { validBefore: 1n << 255n });
      const header = decodeBase64Json(body.paymentHeader);
      header.payload.validBefore = (1n << 255n).toString();
      expect(await verify(opened, { ...body, paymentHeader: encodeBase64Json(header) })).to.deep.equal({ isValid: true, invalidReason: null });
    });
  });

  it("answers Authorization already used for a settled nonce and for a cancelled one", async () => {
    const settled = await makePayment(opened.chain);
    const answer = await request(opened.app).post("/v2/x402/settle").send(settled.body);
    expect(answer.body.event).to.equal("payment.settled");
    expect(await verify(opened, settled.body)).to.deep.equal({ isValid: false, invalidReason: "Authorization already used" });

    const cancelled = await makePayment(opened.chain);
    await cancelAuthorization(opened, cancelled.message.nonce);
    expect(await verify(opened, cancelled.body)).to.deep.equal({ isValid: false, invalidReason: "Authorization already used" });
  });

  it("answers ERC20: transfer amount exceeds balance when the payer cannot pay", async () => {
    const balance = await opened.chain.contract.read.balanceOf([opened.buyer.address]);
    const { body } = await makePayment(opened.chain, { amount: balance + 1n });
    expect(await verify(opened, body)).to.deep.equal({ isValid: false, invalidReason: "ERC20: transfer amount exceeds balance" });
  });

  it("checks in the spec's order: the first failing check is the answer", async () => {
    // Wrong scheme, wrong network and a bad signature at once: scheme comes first.
    const { body } = await makePayment(opened.chain, { signedValue: 5n });
    const requirements = { ...body.paymentRequirements, scheme: "upto", network: "nowhere" };
    expect(await verify(opened, { ...body, paymentRequirements: requirements })).to.deep.equal({
      isValid: false,
      invalidReason: "Unsupported scheme: upto",
    });
    // Bad signature and expired: the signature comes first.
    const expired = await makePayment(opened.chain, { signedValue: 5n, validBefore: 1n });
    expect(await verify(opened, expired.body)).to.deep.equal({ isValid: false, invalidReason: "Invalid EIP-3009 signature" });
  });

  it("accepts Coinbase's nested header layout with string numbers", async () => {
    const { body, message, signature } = await makePayment(opened.chain);
    const nested = {
      x402Version: 1,
      scheme: "exact",
      network: "cronos-testnet",
      payload: {
        signature,
        authorization: {
          from: message.from,
          to: message.to,
          value: message.value.toString(),
          validAfter: message.validAfter.toString(),
          validBefore: message.validBefore.toString(),
          nonce: message.nonce,
        },
      },
    };
    expect(await verify(opened, { ...body, paymentHeader: encodeBase64Json(nested) })).to.deep.equal({ isValid: true, invalidReason: null });
  });

  it("verifies an ERC-1271 contract wallet's signature through the wallet, and refuses another key's", async () => {
    const owner = privateKeyToAccount(HARDHAT_KEYS.buyer2);
    const wallet = await opened.chain.viem.deployContract("ERC1271Wallet", [owner.address]);
    await opened.chain.contract.write.mint([wallet.address, 5_000_000n]);
    const latest = await opened.chain.publicClient.getBlock();
    const message = {
      from: wallet.address,
      to: opened.seller.address,
      value: 1_000_000n,
      validAfter: 0n,
      validBefore: latest.timestamp + 3600n,
      nonce: toHex(crypto.getRandomValues(new Uint8Array(32))),
    };
    const domain = { name: opened.chain.info.domain.name, version: "1", chainId: 338, verifyingContract: opened.chain.token };
    const header = (signature: Hex) =>
      encodePaymentHeader({ network: "cronos-testnet", ...message, value: "1000000", signature, asset: opened.chain.token });
    const requirements = {
      scheme: "exact", network: "cronos-testnet", payTo: opened.seller.address, asset: opened.chain.token,
      maxAmountRequired: "1000000", maxTimeoutSeconds: 300,
    };
    const good = await owner.signTypedData(transferAuthorizationTypedData(domain, message));
    expect(await verify(opened, { x402Version: 1, paymentHeader: header(good), paymentRequirements: requirements })).to.deep.equal({
      isValid: true,
      invalidReason: null,
    });
    const bad = await opened.buyer.signTypedData(transferAuthorizationTypedData(domain, message));
    expect(await verify(opened, { x402Version: 1, paymentHeader: header(bad), paymentRequirements: requirements })).to.deep.equal({
      isValid: false,
      invalidReason: "Invalid EIP-3009 signature",
    });
    // And it settles through the `bytes` overload.
    const settle = await request(opened.app).post("/v2/x402/settle").send({ x402Version: 1, paymentHeader: header(good), paymentRequirements: requirements });
    expect(settle.body.event).to.equal("payment.settled");
    expect(await opened.chain.contract.read.balanceOf([wallet.address])).to.equal(4_000_000n);
  });
});

describe("facilitator verify: the chain head cache (HEAD_CACHE_MS)", () => {
  it("lets verify reuse a recent head read from the chain (no state index), while settle always reads a fresh one", async () => {
    // The state index follows new blocks as they come (test/state): this is the head cache of verify's own reads.
    const opened = await openFacilitator("cronos-testnet", { HEAD_CACHE_MS: "60000", STATE_INDEX: "false" });
    const latest = await opened.chain.publicClient.getBlock();
    const { body } = await makePayment(opened.chain, { validBefore: latest.timestamp + 100n });
    expect(await verify(opened, body)).to.deep.equal({ isValid: true, invalidReason: null });
    await opened.chain.networkHelpers.time.increase(200);
    // Within the cache window verify still judges by the head it read; settle does not.
    expect(await verify(opened, body)).to.deep.equal({ isValid: true, invalidReason: null });
    const settle = await request(opened.app).post("/v2/x402/settle").send(body);
    expect(settle.body.event).to.equal("payment.failed");
    expect(settle.body.error).to.equal("Authorization expired");
    expect(await verify(opened, body)).to.deep.equal({ isValid: false, invalidReason: "Authorization expired" });
  });
});
