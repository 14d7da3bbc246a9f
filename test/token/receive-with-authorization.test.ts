import { expect } from "chai";
import { getAddress } from "viem";
import { expectRevert } from "../helpers/revert.js";
import { signTransferAuthorization, type AuthorizationMessage } from "../helpers/sign.js";
import { BUYER_FUNDS, OTHER_KEY, PAYER_MATRIX, describeMatrix, useTokenChain } from "./fixture.js";

// Mirrors Circle's stablecoin-evm test/v2/GasAbstraction/testReceiveWithAuthorization.ts.

describe("BridgedUSDC receiveWithAuthorization", () => {
  const c = useTokenChain();

  describeMatrix(
    c,
    PAYER_MATRIX,
    { role: "payer", primaryType: "ReceiveWithAuthorization", submit: (overload, m, signature, from) => c.receiveWithAuthorization(overload, m, signature, from) },
    ({ kind, overload, payer, authorization, expectNothingHappened, submit, expectRefused }) => {
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

      it("refuses an authorization whose validAfter equals the block timestamp with FiatTokenV2: authorization is not yet valid", () =>
        expectRefused("FiatTokenV2: authorization is not yet valid", { at: (t) => ({ validAfter: t }) }));

      it("accepts an authorization whose validAfter is one second before the block timestamp", async () => {
        const t = BigInt(await c.networkHelpers.time.latest()) + 60n;
        const { m, signature } = await authorization({ validAfter: t - 1n });
        await c.networkHelpers.time.setNextBlockTimestamp(t);
        const receipt = await c.receipt(await submit(m, signature));
        expect(await c.blockTimestamp(receipt)).to.equal(t);
        c.expectAuthorizationUsedAndTransfer(receipt, m);
      });

      it("refuses an authorization whose validBefore equals the block timestamp with FiatTokenV2: authorization is expired", () =>
        expectRefused("FiatTokenV2: authorization is expired", { at: (t) => ({ validBefore: t }) }));

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

      it("refuses a value above the payer's balance with ERC20: transfer amount exceeds balance", () =>
        expectRefused("ERC20: transfer amount exceeds balance", { overrides: { value: BUYER_FUNDS + 1n } }));

      it("refuses while the token is paused with Pausable: paused", () => expectRefused("Pausable: paused", { before: () => c.contract.write.pause() }));

      it("refuses a blacklisted payer with Blacklistable: account is blacklisted", () =>
        expectRefused("Blacklistable: account is blacklisted", { before: (m) => c.contract.write.blacklist([m.from]) }));

      it("refuses a blacklisted payee with Blacklistable: account is blacklisted", () =>
        expectRefused("Blacklistable: account is blacklisted", { before: (m) => c.contract.write.blacklist([m.to]) }));
    },
  );

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
