import { expect } from "chai";
import { getAddress, type Hash } from "viem";
import { expectRevert } from "../helpers/revert.js";
import { signTransferAuthorization, type AuthorizationMessage, type SplitSignature } from "../helpers/sign.js";
import { BUYER_FUNDS, OTHER_KEY, PAYER_MATRIX, describeMatrix, useTokenChain } from "./fixture.js";

// Mirrors Circle's stablecoin-evm test/v2/GasAbstraction/testReceiveWithAuthorization.ts.

describe("BridgedUSDC receiveWithAuthorization", () => {
  const c = useTokenChain();

  describeMatrix(c, PAYER_MATRIX, { role: "payer", primaryType: "ReceiveWithAuthorization" }, ({ kind, overload, payer, authorization, expectNothingHappened }) => {
    const submit = (m: AuthorizationMessage, signature: SplitSignature, from = c.payee): Promise<Hash> =>
      c.receiveWithAuthorization(overload, m, signature, from);

    it("executes a transfer when the payee submits a valid ReceiveWithAuthorization: balances, events, nonce used", async () => {
      const { m, signature } = await authorization();
      expect(await c.authorizationState(m.from, m.nonce)).to.equal(false);
      const receipt = await c.receipt(await submit(m, signature));
      expect(getAddress(receipt.from)).to.equal(getAddress(m.to));
      c.expectAuthorizationUsedAndTransfer(receipt, m);
      expect(await c.balanceOf(m.from)).to.equal(BUYER_FUNDS - 1_500_000n);
      expect(await c.balanceOf(m.to)).to.equal(1_500_000n);
      expect(await c.authorizationState(m.from, m.nonce)).to.equal(true);
    });

    it("refuses a call from a relayer (not the payee) with FiatTokenV2: caller must be the payee", async () => {
      const { m, signature } = await authorization();
      await expectRevert(submit(m, signature, c.relayer), "FiatTokenV2: caller must be the payee");
      await expectNothingHappened(m);
    });

    if (kind === "EOA") {
      it("refuses a call from the payer itself with FiatTokenV2: caller must be the payee", async () => {
        const { m, signature } = await authorization();
        await expectRevert(submit(m, signature, c.payer), "FiatTokenV2: caller must be the payee");
        await expectNothingHappened(m);
      });
    }

    it("refuses a TransferWithAuthorization signature with FiatTokenV2: invalid signature", async () => {
      const m = await c.message({ from: payer().address });
      await expectRevert(submit(m, await payer().sign(m, "TransferWithAuthorization")), "FiatTokenV2: invalid signature");
      await expectNothingHappened(m);
    });

    it("refuses a signature over another value with FiatTokenV2: invalid signature", async () => {
      const { m, signature } = await authorization();
      await expectRevert(submit({ ...m, value: m.value * 2n }, signature), "FiatTokenV2: invalid signature");
      await expectNothingHappened(m);
    });

    it("refuses a signature made with another key with FiatTokenV2: invalid signature", async () => {
      const m = await c.message({ from: payer().address });
      const signature = await signTransferAuthorization({
        account: OTHER_KEY,
        domain: c.domain,
        message: m,
        primaryType: "ReceiveWithAuthorization",
      });
      await expectRevert(submit(m, signature), "FiatTokenV2: invalid signature");
      await expectNothingHappened(m);
    });

    it("refuses an authorization whose validAfter equals the block timestamp with FiatTokenV2: authorization is not yet valid", async () => {
      const t = BigInt(await c.networkHelpers.time.latest()) + 60n;
      const { m, signature } = await authorization({ validAfter: t });
      await c.networkHelpers.time.setNextBlockTimestamp(t);
      await expectRevert(submit(m, signature), "FiatTokenV2: authorization is not yet valid");
      await expectNothingHappened(m);
    });

    it("accepts an authorization whose validAfter is one second before the block timestamp", async () => {
      const t = BigInt(await c.networkHelpers.time.latest()) + 60n;
      const { m, signature } = await authorization({ validAfter: t - 1n });
      await c.networkHelpers.time.setNextBlockTimestamp(t);
      const receipt = await c.receipt(await submit(m, signature));
      expect(await c.blockTimestamp(receipt)).to.equal(t);
      c.expectAuthorizationUsedAndTransfer(receipt, m);
    });

    it("refuses an authorization whose validBefore equals the block timestamp with FiatTokenV2: authorization is expired", async () => {
      const t = BigInt(await c.networkHelpers.time.latest()) + 60n;
      const { m, signature } = await authorization({ validBefore: t });
      await c.networkHelpers.time.setNextBlockTimestamp(t);
      await expectRevert(submit(m, signature), "FiatTokenV2: authorization is expired");
      await expectNothingHappened(m);
    });

    it("refuses an authorization that was already used with FiatTokenV2: authorization is used or canceled", async () => {
      const { m, signature } = await authorization();
      await c.receipt(await submit(m, signature));
      await expectRevert(submit(m, signature), "FiatTokenV2: authorization is used or canceled");
      expect(await c.balanceOf(m.to)).to.equal(m.value);
    });

    it("shares the nonce space with transferWithAuthorization: a nonce used there is refused here with FiatTokenV2: authorization is used or canceled", async () => {
      const m = await c.message({ from: payer().address });
      await c.receipt(await c.transferWithAuthorization(overload, m, await payer().sign(m)));
      const again = { ...m, value: 1n };
      await expectRevert(submit(again, await payer().sign(again, "ReceiveWithAuthorization")), "FiatTokenV2: authorization is used or canceled");
      expect(await c.balanceOf(m.to)).to.equal(m.value);
    });

    it("refuses a value above the payer's balance with ERC20: transfer amount exceeds balance", async () => {
      const { m, signature } = await authorization({ value: BUYER_FUNDS + 1n });
      await expectRevert(submit(m, signature), "ERC20: transfer amount exceeds balance");
      await expectNothingHappened(m);
    });

    it("refuses while the token is paused with Pausable: paused", async () => {
      const { m, signature } = await authorization();
      await c.receipt(await c.contract.write.pause());
      await expectRevert(submit(m, signature), "Pausable: paused");
      await expectNothingHappened(m);
    });

    it("refuses a blacklisted payer with Blacklistable: account is blacklisted", async () => {
      const { m, signature } = await authorization();
      await c.receipt(await c.contract.write.blacklist([m.from]));
      await expectRevert(submit(m, signature), "Blacklistable: account is blacklisted");
      await expectNothingHappened(m);
    });

    it("refuses a blacklisted payee with Blacklistable: account is blacklisted", async () => {
      const { m, signature } = await authorization();
      await c.receipt(await c.contract.write.blacklist([m.to]));
      await expectRevert(submit(m, signature), "Blacklistable: account is blacklisted");
      await expectNothingHappened(m);
    });
  });

  describe("order of checks", () => {
    const sign = (m: AuthorizationMessage) =>
      signTransferAuthorization({ walletClient: c.payer, domain: c.domain, message: m, primaryType: "ReceiveWithAuthorization" });

    it("reports Pausable: paused before a caller that is not the payee", async () => {
      const m = await c.message();
      await c.receipt(await c.contract.write.pause());
      await expectRevert(c.receiveWithAuthorization("bytes signature", m, await sign(m), c.relayer), "Pausable: paused");
    });

    it("reports a caller that is not the payee before an expired authorization", async () => {
      const t = BigInt(await c.networkHelpers.time.latest()) + 60n;
      const m = await c.message({ validBefore: t - 1n });
      await c.networkHelpers.time.setNextBlockTimestamp(t);
      await expectRevert(
        c.receiveWithAuthorization("bytes signature", m, await sign(m), c.relayer),
        "FiatTokenV2: caller must be the payee",
      );
    });
  });
});
