import { expect } from "chai";
import { getAddress, type Hash, type Hex } from "viem";
import { expectRevert } from "../helpers/revert.js";
import { randomNonce, signCancelAuthorization, toHighS, type SplitSignature } from "../helpers/sign.js";
import { BUYER_FUNDS, OTHER_KEY, OVERLOADS, PAYER_MATRIX, describeMatrix, useTokenChain } from "./fixture.js";

// Mirrors Circle's stablecoin-evm test/v2/GasAbstraction/testCancelAuthorization.ts.

describe("BridgedUSDC cancelAuthorization", () => {
  const c = useTokenChain();

  describeMatrix(c, PAYER_MATRIX, { role: "authorizer" }, ({ overload, payer: authorizer }) => {
    const cancel = (nonce: Hex, signature: SplitSignature, from = c.relayer): Promise<Hash> =>
      c.cancelAuthorization(overload, authorizer().address, nonce, signature, from);

    it("cancels an unused nonce: AuthorizationCanceled(authorizer, nonce) only, nonce state true, no balance moves", async () => {
      const nonce = randomNonce();
      expect(await c.authorizationState(authorizer().address, nonce)).to.equal(false);
      const receipt = await c.receipt(await cancel(nonce, await authorizer().signCancel(nonce)));
      expect(c.events(receipt)).to.deep.equal([["AuthorizationCanceled", { authorizer: getAddress(authorizer().address), nonce }]]);
      expect(await c.authorizationState(authorizer().address, nonce)).to.equal(true);
      expect(await c.balanceOf(authorizer().address)).to.equal(BUYER_FUNDS);
    });

    for (const transferOverload of OVERLOADS) {
      it(`makes transferWithAuthorization (${transferOverload}) of the canceled nonce fail with FiatTokenV2: authorization is used or canceled`, async () => {
        const m = await c.message({ from: authorizer().address });
        const authorization = await authorizer().sign(m);
        await c.receipt(await cancel(m.nonce, await authorizer().signCancel(m.nonce)));
        await expectRevert(c.transferWithAuthorization(transferOverload, m, authorization), "FiatTokenV2: authorization is used or canceled");
        expect(await c.balanceOf(m.from)).to.equal(BUYER_FUNDS);
        expect(await c.balanceOf(m.to)).to.equal(0n);
      });
    }

    it("makes receiveWithAuthorization of the canceled nonce fail with FiatTokenV2: authorization is used or canceled", async () => {
      const m = await c.message({ from: authorizer().address });
      const authorization = await authorizer().sign(m, "ReceiveWithAuthorization");
      await c.receipt(await cancel(m.nonce, await authorizer().signCancel(m.nonce)));
      await expectRevert(c.receiveWithAuthorization(overload, m, authorization), "FiatTokenV2: authorization is used or canceled");
      expect(await c.balanceOf(m.to)).to.equal(0n);
    });

    it("refuses to cancel a used nonce with FiatTokenV2: authorization is used or canceled", async () => {
      const m = await c.message({ from: authorizer().address });
      await c.receipt(await c.transferWithAuthorization(overload, m, await authorizer().sign(m)));
      await expectRevert(cancel(m.nonce, await authorizer().signCancel(m.nonce)), "FiatTokenV2: authorization is used or canceled");
      expect(await c.balanceOf(m.to)).to.equal(m.value);
    });

    it("refuses to cancel a canceled nonce again with FiatTokenV2: authorization is used or canceled", async () => {
      const nonce = randomNonce();
      const cancellation = await authorizer().signCancel(nonce);
      await c.receipt(await cancel(nonce, cancellation));
      await expectRevert(cancel(nonce, cancellation), "FiatTokenV2: authorization is used or canceled");
    });

    it("cannot cancel someone else's authorization: another key gets FiatTokenV2: invalid signature and the authorization still works", async () => {
      const m = await c.message({ from: authorizer().address });
      const authorization = await authorizer().sign(m);
      const forged = await signCancelAuthorization({
        account: OTHER_KEY,
        domain: c.domain,
        message: { authorizer: authorizer().address, nonce: m.nonce },
      });
      await expectRevert(cancel(m.nonce, forged), "FiatTokenV2: invalid signature");
      expect(await c.authorizationState(m.from, m.nonce)).to.equal(false);
      c.expectAuthorizationUsedAndTransfer(await c.receipt(await c.transferWithAuthorization(overload, m, authorization)), m);
    });

    it("refuses a cancellation signed for another nonce with FiatTokenV2: invalid signature", async () => {
      const nonce = randomNonce();
      await expectRevert(cancel(nonce, await authorizer().signCancel(randomNonce())), "FiatTokenV2: invalid signature");
      expect(await c.authorizationState(authorizer().address, nonce)).to.equal(false);
    });

    it("refuses a TransferWithAuthorization signature offered as a cancellation with FiatTokenV2: invalid signature", async () => {
      const m = await c.message({ from: authorizer().address });
      await expectRevert(cancel(m.nonce, await authorizer().sign(m)), "FiatTokenV2: invalid signature");
      expect(await c.authorizationState(m.from, m.nonce)).to.equal(false);
    });

    it("refuses while the token is paused with Pausable: paused", async () => {
      const nonce = randomNonce();
      const cancellation = await authorizer().signCancel(nonce);
      await c.receipt(await c.contract.write.pause());
      await expectRevert(cancel(nonce, cancellation), "Pausable: paused");
      expect(await c.authorizationState(authorizer().address, nonce)).to.equal(false);
    });

    it("lets a blacklisted authorizer cancel (cancelAuthorization has no blacklist check)", async () => {
      const nonce = randomNonce();
      await c.receipt(await c.contract.write.blacklist([authorizer().address]));
      const receipt = await c.receipt(await cancel(nonce, await authorizer().signCancel(nonce)));
      expect(c.events(receipt)).to.deep.equal([["AuthorizationCanceled", { authorizer: getAddress(authorizer().address), nonce }]]);
      expect(await c.authorizationState(authorizer().address, nonce)).to.equal(true);
    });
  });

  describe("with an EOA authorizer: ECRecover rules", () => {
    for (const overload of OVERLOADS) {
      it(`refuses the high-s twin of a cancellation (${overload}) with ECRecover: invalid signature 's' value`, async () => {
        const nonce = randomNonce();
        const cancellation = await c.payerOf("EOA").signCancel(nonce);
        await expectRevert(
          c.cancelAuthorization(overload, c.payer.account.address, nonce, toHighS(cancellation.signature)),
          "ECRecover: invalid signature 's' value",
        );
        expect(await c.authorizationState(c.payer.account.address, nonce)).to.equal(false);
      });
    }
  });
});
