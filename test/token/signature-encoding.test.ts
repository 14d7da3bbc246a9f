import { expect } from "chai";
import { decodeAbiParameters, encodeAbiParameters, getAddress, parseAbiParameters, type Hex } from "viem";
import { expectRevert } from "../helpers/revert.js";
import {
  SECP256K1_HALF_N,
  SECP256K1_N,
  authorizationDigest,
  joinSignature,
  splitSignature,
  toHighS,
  withV,
  type SplitSignature,
} from "../helpers/sign.js";
import { OVERLOADS, useTokenChain } from "./fixture.js";

// FiatToken's ECRecover library (EOA signers) and what it leaves to ERC-1271 wallets.

const ECRECOVER_PRECOMPILE = "0x0000000000000000000000000000000000000001";

describe("BridgedUSDC signature encoding", () => {
  const c = useTokenChain();

  /** What the EVM's ecrecover precompile returns for a digest and v, r, s (it accepts high s). */
  async function precompileRecover(digest: Hex, signature: SplitSignature): Promise<string> {
    const { data } = await c.publicClient.call({
      to: ECRECOVER_PRECOMPILE,
      data: encodeAbiParameters(parseAbiParameters("bytes32, uint256, bytes32, bytes32"), [
        digest,
        BigInt(signature.v),
        signature.r,
        signature.s,
      ]),
    });
    if (!data || data === "0x") return "none";
    return getAddress(decodeAbiParameters(parseAbiParameters("address"), data)[0]);
  }

  for (const overload of OVERLOADS) {
    describe(`EOA payer, ${overload} interface`, () => {
      const signed = async () => {
        const m = await c.message();
        return { m, signature: await c.payerOf("EOA").sign(m) };
      };

      it("accepts the low-s signature viem produces (s <= n/2, v 27 or 28)", async () => {
        const { m, signature } = await signed();
        expect(BigInt(signature.s) <= SECP256K1_HALF_N).to.equal(true);
        expect([27, 28]).to.include(signature.v);
        c.expectAuthorizationUsedAndTransfer(await c.receipt(await c.transferWithAuthorization(overload, m, signature)), m);
      });

      it("refuses the high-s twin of a valid signature (s' = n - s, v flipped) with ECRecover: invalid signature 's' value", async () => {
        const { m, signature } = await signed();
        const twin = toHighS(signature.signature);
        expect(BigInt(twin.s)).to.equal(SECP256K1_N - BigInt(signature.s));
        expect(twin.v).to.equal(signature.v === 27 ? 28 : 27);
        expect(BigInt(twin.s) > SECP256K1_HALF_N).to.equal(true);
        // The twin is a valid secp256k1 signature by the payer: only FiatToken's low-s rule refuses it.
        expect(await precompileRecover(authorizationDigest(c.domain, m), twin)).to.equal(getAddress(m.from));
        await expectRevert(c.transferWithAuthorization(overload, m, twin), "ECRecover: invalid signature 's' value");
        await c.expectUntouched(m);
      });

      for (const v of [26, 29, 255]) {
        it(`refuses v = ${v} with ECRecover: invalid signature 'v' value`, async () => {
          const { m, signature } = await signed();
          await expectRevert(c.transferWithAuthorization(overload, m, withV(signature.signature, v)), "ECRecover: invalid signature 'v' value");
          await c.expectUntouched(m);
        });
      }

      it("refuses v = 0/1 (yParity) even though it is the payer's signature, with ECRecover: invalid signature 'v' value", async () => {
        const { m, signature } = await signed();
        const yParity = withV(signature.signature, signature.v - 27);
        await expectRevert(c.transferWithAuthorization(overload, m, yParity), "ECRecover: invalid signature 'v' value");
        await c.expectUntouched(m);
      });

      it("refuses a signature that recovers no address (r = 0) with ECRecover: invalid signature", async () => {
        const { m, signature } = await signed();
        const zeroR = splitSignature(joinSignature({ ...signature, r: `0x${"00".repeat(32)}` }));
        await expectRevert(c.transferWithAuthorization(overload, m, zeroR), "ECRecover: invalid signature");
        await c.expectUntouched(m);
      });
    });
  }

  describe("EOA payer, bytes signature interface: length", () => {
    for (const [what, bytes] of [
      ["a 64-byte (EIP-2098 compact) signature", 64],
      ["a 66-byte signature", 66],
      ["an empty signature", 0],
    ] as const) {
      it(`refuses ${what} with ECRecover: invalid signature length`, async () => {
        const m = await c.message();
        const { signature } = await c.payerOf("EOA").sign(m);
        const body = signature.slice(2);
        const resized: Hex = `0x${bytes <= 65 ? body.slice(0, bytes * 2) : body + "00".repeat(bytes - 65)}`;
        await expectRevert(
          c.contract.write.transferWithAuthorization([m.from, m.to, m.value, m.validAfter, m.validBefore, m.nonce, resized], {
            account: c.relayer.account,
          }),
          "ECRecover: invalid signature length",
        );
        await c.expectUntouched(m);
      });
    }
  });

  describe("ERC-1271 wallet payer: the wallet, not ECRecover, judges the signature", () => {
    const walletSigned = async () => {
      const m = await c.message({ from: c.payerOf("ERC-1271 wallet").address });
      return { m, signature: await c.payerOf("ERC-1271 wallet").sign(m) };
    };

    it("refuses the high-s twin with FiatTokenV2: invalid signature (the wallet refuses it, ECRecover never runs)", async () => {
      const { m, signature } = await walletSigned();
      await expectRevert(c.transferWithAuthorization("bytes signature", m, toHighS(signature.signature)), "FiatTokenV2: invalid signature");
      await c.expectUntouched(m);
    });

    it("refuses v = 29 through the v, r, s interface with FiatTokenV2: invalid signature", async () => {
      const { m, signature } = await walletSigned();
      await expectRevert(c.transferWithAuthorization("v, r, s", m, withV(signature.signature, 29)), "FiatTokenV2: invalid signature");
      await c.expectUntouched(m);
    });

    it("refuses a 64-byte signature with FiatTokenV2: invalid signature", async () => {
      const { m, signature } = await walletSigned();
      const short: Hex = `0x${signature.signature.slice(2, 130)}`;
      await expectRevert(
        c.contract.write.transferWithAuthorization([m.from, m.to, m.value, m.validAfter, m.validBefore, m.nonce, short], {
          account: c.relayer.account,
        }),
        "FiatTokenV2: invalid signature",
      );
      await c.expectUntouched(m);
    });
  });
});
