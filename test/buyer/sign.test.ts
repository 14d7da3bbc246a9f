import { expect } from "chai";
import { createWalletClient, custom, recoverTypedDataAddress, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader, decodePaymentResponse, PaymentError } from "../../src/buyer/index.js";
import { decodePaymentHeader } from "../../src/protocol/header.js";
import { transferAuthorizationTypedData } from "../../src/protocol/eip3009.js";
import { NETWORKS } from "../../src/protocol/networks.js";
import type { PaymentPayload } from "../../src/protocol/schemas.js";
import { SETTLED, settleFailed } from "../helpers/stand-in-facilitator.js";
import { VECTORS, VECTOR_A_HEADER, VECTOR_MESSAGE, VECTOR_PAYEE, VECTOR_SIGNER } from "../helpers/vectors.js";
import { rejection } from "../helpers/payment-error.js";

const account = privateKeyToAccount(VECTOR_SIGNER.privateKey);
const VECTOR_A_REQUIREMENTS = {
  scheme: "exact",
  network: "cronos-testnet",
  payTo: VECTOR_PAYEE,
  asset: VECTORS.A.verifyingContract,
  maxAmountRequired: "1000000",
  maxTimeoutSeconds: 300,
};
const VECTOR_TIMES = { validAfter: 0, validBefore: 1_893_456_000, nonce: VECTOR_MESSAGE.nonce };

function decode(header: string): PaymentPayload {
  const decoded = decodePaymentHeader(header);
  if (!decoded.ok) throw new Error(`undecodable header: ${decoded.kind}`);
  return decoded.payload;
}


describe("buyer: createPaymentHeader", () => {
  it("is byte-identical to the official client's header for vector A (LocalAccount)", async () => {
    const header = await createPaymentHeader({ signer: account, requirements: VECTOR_A_REQUIREMENTS, ...VECTOR_TIMES });
    expect(header).to.equal(VECTOR_A_HEADER);
  });

  it("is byte-identical for vector A with a WalletClient that has an account", async () => {
    const wallet = createWalletClient({
      account,
      transport: custom({
        request: async () => {
          throw new Error("a local account signs without RPC");
        },
      }),
    });
    const header = await createPaymentHeader({ signer: wallet, requirements: VECTOR_A_REQUIREMENTS, ...VECTOR_TIMES });
    expect(header).to.equal(VECTOR_A_HEADER);
  });

  it("signs with mainnet's domain (version 2, chain 25), also for the cronos alias", async () => {
    for (const network of ["cronos-mainnet", "cronos"]) {
      const header = await createPaymentHeader({
        signer: account,
        requirements: { ...VECTOR_A_REQUIREMENTS, network, asset: VECTORS.M.verifyingContract },
        ...VECTOR_TIMES,
      });
      const payload = decode(header);
      expect(payload.network).to.equal(network);
      expect(payload.authorization.signature).to.equal(VECTORS.M.signature);
    }
  });

  it("takes chainId and domain overrides (vector C: chain 31337, a local token)", async () => {
    const header = await createPaymentHeader({
      signer: account,
      requirements: { ...VECTOR_A_REQUIREMENTS, asset: VECTORS.C.verifyingContract },
      chainId: VECTORS.C.chainId,
      domain: { name: "Bridged USDC (Stargate)", version: VECTORS.C.version },
      ...VECTOR_TIMES,
    });
    expect(decode(header).authorization.signature).to.equal(VECTORS.C.signature);
  });

  it("draws a fresh random 32-byte nonce for every header", async () => {
    const nonces = new Set<Hex>();
    for (let i = 0; i < 5; i += 1) {
      const payload = decode(await createPaymentHeader({ signer: account, requirements: VECTOR_A_REQUIREMENTS }));
      expect(payload.authorization.nonce).to.match(/^0x[0-9a-f]{64}$/);
      nonces.add(payload.authorization.nonce);
    }
    expect(nonces.size).to.equal(5);
  });

  it("defaults validAfter to 0 and validBefore to now + 3600", async () => {
    const now = 1_800_000_000;
    const payload = decode(await createPaymentHeader({ signer: account, requirements: VECTOR_A_REQUIREMENTS, now }));
    expect(payload.authorization.validAfter).to.equal(0n);
    expect(payload.authorization.validBefore).to.equal(BigInt(now + 3600));

    const before = Math.floor(Date.now() / 1000);
    const live = decode(await createPaymentHeader({ signer: account, requirements: VECTOR_A_REQUIREMENTS }));
    const after = Math.floor(Date.now() / 1000);
    expect(Number(live.authorization.validBefore)).to.be.within(before + 3600, after + 3600);
  });

  it("does not cap validBefore at maxTimeoutSeconds, but stretches it to a longer one", async () => {
    const now = 1_800_000_000;
    const short = decode(
      await createPaymentHeader({ signer: account, requirements: { ...VECTOR_A_REQUIREMENTS, maxTimeoutSeconds: 60 }, now }),
    );
    expect(short.authorization.validBefore).to.equal(BigInt(now + 3600));
    const long = decode(
      await createPaymentHeader({ signer: account, requirements: { ...VECTOR_A_REQUIREMENTS, maxTimeoutSeconds: 7200 }, now }),
    );
    expect(long.authorization.validBefore).to.equal(BigInt(now + 7200));
  });

  it("writes the Cronos layout, and the signature recovers to the signer", async () => {
    const header = await createPaymentHeader({ signer: account, requirements: VECTOR_A_REQUIREMENTS, validAfter: 5, now: 1_800_000_000 });
    const raw: unknown = JSON.parse(Buffer.from(header, "base64").toString("utf8"));
    expect(raw).to.have.all.keys("x402Version", "scheme", "network", "payload");
    expect(raw).to.have.property("payload").that.has.all.keys(
      "from", "to", "value", "validAfter", "validBefore", "nonce", "signature", "asset",
    );
    const { authorization } = decode(header);
    expect(authorization).to.include({ from: account.address, to: VECTOR_PAYEE, value: "1000000", validAfter: 5n });
    const info = NETWORKS["cronos-testnet"];
    const recovered = await recoverTypedDataAddress({
      ...transferAuthorizationTypedData(
        { ...info.domain, chainId: info.chainId, verifyingContract: info.token },
        { ...authorization, value: BigInt(authorization.value) },
      ),
      signature: authorization.signature,
    });
    expect(recovered).to.equal(account.address);
  });

  it("refuses an unknown network without chainId/domain, a wallet without account and bad inputs", async () => {
    await rejection(
      createPaymentHeader({ signer: account, requirements: { ...VECTOR_A_REQUIREMENTS, network: "base-sepolia" } }),
      "unknown_network",
    );
    const wallet = createWalletClient({ transport: custom({ request: async () => null }) });
    await rejection(createPaymentHeader({ signer: wallet, requirements: VECTOR_A_REQUIREMENTS }), "no_account");
    await rejection(
      createPaymentHeader({ signer: account, requirements: { ...VECTOR_A_REQUIREMENTS, asset: "USDC" } }),
      "invalid_parameters",
    );
    await rejection(
      createPaymentHeader({ signer: account, requirements: { ...VECTOR_A_REQUIREMENTS, maxAmountRequired: "1.5" } }),
      "invalid_parameters",
    );
    await rejection(createPaymentHeader({ signer: account, requirements: VECTOR_A_REQUIREMENTS, nonce: "0x1234" }), "invalid_parameters");
  });
});

describe("buyer: decodePaymentResponse", () => {
  it("decodes settled and failed answers", () => {
    const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64");
    expect(decodePaymentResponse(encode(SETTLED))).to.deep.equal(SETTLED);
    expect(decodePaymentResponse(encode(settleFailed("Authorization expired")))).to.deep.equal(settleFailed("Authorization expired"));
  });

  it("throws malformed_payment_response on garbage", () => {
    for (const value of ["", "%%%", Buffer.from("not json").toString("base64"), Buffer.from('{"event":"x"}').toString("base64")]) {
      expect(() => decodePaymentResponse(value), value).to.throw(PaymentError).with.property("code", "malformed_payment_response");
    }
  });
});
