import { expect } from "chai";
import { getAddress, zeroAddress } from "viem";
import { expectRevert } from "../helpers/revert.js";
import { signTransferAuthorization, type AuthorizationMessage } from "../helpers/sign.js";
import { BUYER_FUNDS, OTHER_KEY, WALLET_OWNER, PAYER_MATRIX, describeMatrix, useTokenChain, type Overload, type TokenChain } from "./fixture.js";

// Mirrors Circle's stablecoin-evm test/v2/GasAbstraction/testTransferWithAuthorization.ts: the same
// cases for an EOA payer and an ERC-1271 wallet payer, through both signature interfaces.

describe("BridgedUSDC transferWithAuthorization", () => {
  const c = useTokenChain();

  describeMatrix(
    c,
    [...PAYER_MATRIX, { kind: "ERC-1271 wallet", overload: "v, r, s" }],
    { role: "payer", submit: (overload, m, signature, from) => c.transferWithAuthorization(overload, m, signature, from) },
    ({ kind, overload, payer, authorization, expectNothingHappened, submit, expectRefused }) => {
      it("executes a transfer when a valid authorization is given: balances, AuthorizationUsed and Transfer events, nonce used", async () => {
        const { m, signature } = await authorization();
        const supply = await c.contract.read.totalSupply();
        expect(await c.balanceOf(m.from)).to.equal(BUYER_FUNDS);
        expect(await c.balanceOf(m.to)).to.equal(0n);
        expect(await c.authorizationState(m.from, m.nonce)).to.equal(false);

        const receipt = await c.receipt(await submit(m, signature));

        expect(await c.balanceOf(m.from)).to.equal(BUYER_FUNDS - 1_500_000n);
        expect(await c.balanceOf(m.to)).to.equal(1_500_000n);
        expect(await c.balanceOf(c.relayer.account.address)).to.equal(0n);
        expect(await c.contract.read.totalSupply()).to.equal(supply);
        c.expectAuthorizationUsedAndTransfer(receipt, m);
        expect(getAddress(receipt.from)).to.equal(getAddress(c.relayer.account.address));
        expect(await c.authorizationState(m.from, m.nonce)).to.equal(true);
      });

      it("can be submitted by the payee as well as by a relayer", async () => {
        const { m, signature } = await authorization();
        const receipt = await c.receipt(await submit(m, signature, c.payee));
        c.expectAuthorizationUsedAndTransfer(receipt, m);
        expect(await c.balanceOf(m.to)).to.equal(m.value);
      });

      const tampered: ReadonlyArray<[string, (m: AuthorizationMessage, t: TokenChain) => AuthorizationMessage]> = [
        ["value", (m) => ({ ...m, value: m.value * 2n })],
        ["payee", (m, t) => ({ ...m, to: t.stranger.account.address })],
        ["payer", (m, t) => ({ ...m, from: t.secondBuyer.account.address })],
        ["validAfter", (m) => ({ ...m, validAfter: m.validAfter + 1n })],
        ["validBefore", (m) => ({ ...m, validBefore: m.validBefore + 1n })],
        ["nonce", (m) => ({ ...m, nonce: `0x${"ab".repeat(32)}` as const })],
      ];
      for (const [field, tamper] of tampered) {
        it(`refuses a signature over another ${field} with FiatTokenV2: invalid signature`, async () => {
          const { m, signature } = await authorization();
          const submitted = tamper(m, c);
          await expectRevert(submit(submitted, signature), "FiatTokenV2: invalid signature");
          await expectNothingHappened(m);
          expect(await c.balanceOf(c.secondBuyer.account.address)).to.equal(BUYER_FUNDS);
        });
      }

      it("refuses a signature made with another key with FiatTokenV2: invalid signature", async () => {
        const m = await c.message({ from: payer().address });
        const signature = await signTransferAuthorization({ account: OTHER_KEY, domain: c.domain, message: m });
        await expectRevert(submit(m, signature), "FiatTokenV2: invalid signature");
        await expectNothingHappened(m);
      });

      it("refuses a ReceiveWithAuthorization signature with FiatTokenV2: invalid signature", async () => {
        const m = await c.message({ from: payer().address });
        const signature = await payer().sign(m, "ReceiveWithAuthorization");
        await expectRevert(submit(m, signature), "FiatTokenV2: invalid signature");
        await expectNothingHappened(m);
      });

      const otherDomains: ReadonlyArray<[string, (t: TokenChain) => TokenChain["domain"]]> = [
        ["chain id 31337", (t) => ({ ...t.domain, chainId: 31337 })],
        ["chain id 25", (t) => ({ ...t.domain, chainId: 25 })],
        ["token address", (t) => ({ ...t.domain, verifyingContract: "0x5FbDB2315678afecb367f032d93F642f64180aa3" })],
        ["version", (t) => ({ ...t.domain, version: "2" })],
        ["name", (t) => ({ ...t.domain, name: "USD Coin" })],
      ];
      for (const [what, domainOf] of otherDomains) {
        it(`refuses a signature for another ${what} with FiatTokenV2: invalid signature`, async () => {
          const m = await c.message({ from: payer().address });
          const domain = domainOf(c);
          const signature =
            kind === "EOA"
              ? await signTransferAuthorization({ walletClient: c.payer, domain, message: m })
              : await signTransferAuthorization({ account: WALLET_OWNER, domain, message: m });
          await expectRevert(submit(m, signature), "FiatTokenV2: invalid signature");
          await expectNothingHappened(m);
        });
      }

      it("refuses an authorization whose validAfter equals the block timestamp with FiatTokenV2: authorization is not yet valid", () =>
        expectRefused("FiatTokenV2: authorization is not yet valid", { at: (t) => ({ validAfter: t }) }));

      it("accepts an authorization whose validAfter is one second before the block timestamp", async () => {
        const t = BigInt(await c.networkHelpers.time.latest()) + 60n;
        const { m, signature } = await authorization({ validAfter: t - 1n });
        await c.networkHelpers.time.setNextBlockTimestamp(t);
        const receipt = await c.receipt(await submit(m, signature));
        expect(await c.blockTimestamp(receipt)).to.equal(t);
        c.expectAuthorizationUsedAndTransfer(receipt, m);
        expect(await c.balanceOf(m.to)).to.equal(m.value);
      });

      it("refuses an authorization whose validAfter is after the block timestamp with FiatTokenV2: authorization is not yet valid", () =>
        expectRefused("FiatTokenV2: authorization is not yet valid", { at: (t) => ({ validAfter: t + 3600n, validBefore: t + 7200n }) }));

      it("refuses an authorization whose validBefore equals the block timestamp with FiatTokenV2: authorization is expired", () =>
        expectRefused("FiatTokenV2: authorization is expired", { at: (t) => ({ validBefore: t }) }));

      it("accepts an authorization whose validBefore is one second after the block timestamp", async () => {
        const t = BigInt(await c.networkHelpers.time.latest()) + 60n;
        const { m, signature } = await authorization({ validBefore: t + 1n });
        await c.networkHelpers.time.setNextBlockTimestamp(t);
        const receipt = await c.receipt(await submit(m, signature));
        expect(await c.blockTimestamp(receipt)).to.equal(t);
        c.expectAuthorizationUsedAndTransfer(receipt, m);
      });

      it("refuses an authorization whose validBefore has passed with FiatTokenV2: authorization is expired", () =>
        expectRefused("FiatTokenV2: authorization is expired", { at: (t) => ({ validBefore: t - 30n }) }));

      it("refuses an authorization that was already used with FiatTokenV2: authorization is used or canceled", async () => {
        const { m, signature } = await authorization();
        await c.receipt(await submit(m, signature));
        await expectRevert(submit(m, signature), "FiatTokenV2: authorization is used or canceled");
        expect(await c.balanceOf(m.from)).to.equal(BUYER_FUNDS - m.value);
        expect(await c.balanceOf(m.to)).to.equal(m.value);
        expect(await c.authorizationState(m.from, m.nonce)).to.equal(true);
      });

      it("refuses another authorization with a nonce the payer already used with FiatTokenV2: authorization is used or canceled", async () => {
        const first = await authorization();
        await c.receipt(await submit(first.m, first.signature));
        const second = await authorization({ nonce: first.m.nonce, value: 1_000_000n, to: c.stranger.account.address });
        await expectRevert(submit(second.m, second.signature), "FiatTokenV2: authorization is used or canceled");
        expect(await c.balanceOf(c.stranger.account.address)).to.equal(0n);
        expect(await c.balanceOf(first.m.from)).to.equal(BUYER_FUNDS - first.m.value);
      });

      it("keeps nonces per authorizer: another payer can use the same nonce", async () => {
        const first = await authorization();
        await c.receipt(await submit(first.m, first.signature));
        const other = kind === "EOA" ? c.payerOf("ERC-1271 wallet") : c.payerOf("EOA");
        const m = await c.message({ from: other.address, nonce: first.m.nonce });
        expect(await c.authorizationState(other.address, m.nonce)).to.equal(false);
        const receipt = await c.receipt(await submit(m, await other.sign(m)));
        c.expectAuthorizationUsedAndTransfer(receipt, m);
        expect(await c.balanceOf(c.payee.account.address)).to.equal(first.m.value + m.value);
      });

      it("refuses a value above the payer's balance with ERC20: transfer amount exceeds balance", () =>
        expectRefused("ERC20: transfer amount exceeds balance", { overrides: { value: BUYER_FUNDS + 1n } }));

      it("transfers exactly the payer's whole balance", async () => {
        const { m, signature } = await authorization({ value: BUYER_FUNDS });
        c.expectAuthorizationUsedAndTransfer(await c.receipt(await submit(m, signature)), m);
        expect(await c.balanceOf(m.from)).to.equal(0n);
        expect(await c.balanceOf(m.to)).to.equal(BUYER_FUNDS);
      });

      it("refuses a transfer to the zero address with ERC20: transfer to the zero address", async () => {
        const { m, signature } = await authorization({ to: zeroAddress });
        await expectRevert(submit(m, signature), "ERC20: transfer to the zero address");
        expect(await c.balanceOf(m.from)).to.equal(BUYER_FUNDS);
        expect(await c.authorizationState(m.from, m.nonce)).to.equal(false);
      });

      it("refuses while the token is paused with Pausable: paused, and works after unpause", async () => {
        const { m, signature } = await authorization();
        await c.receipt(await c.contract.write.pause());
        await expectRevert(submit(m, signature), "Pausable: paused");
        await expectNothingHappened(m);
        await c.receipt(await c.contract.write.unpause());
        c.expectAuthorizationUsedAndTransfer(await c.receipt(await submit(m, signature)), m);
      });

      it("refuses a blacklisted payer with Blacklistable: account is blacklisted", () =>
        expectRefused("Blacklistable: account is blacklisted", { before: (m) => c.contract.write.blacklist([m.from]) }));

      it("refuses a blacklisted payee with Blacklistable: account is blacklisted", () =>
        expectRefused("Blacklistable: account is blacklisted", { before: (m) => c.contract.write.blacklist([m.to]) }));

      it("does not check the submitter: a blacklisted relayer can still submit", async () => {
        const { m, signature } = await authorization();
        await c.receipt(await c.contract.write.blacklist([c.relayer.account.address]));
        c.expectAuthorizationUsedAndTransfer(await c.receipt(await submit(m, signature)), m);
      });
    },
  );

  describe("order of checks (FiatToken v2.2: pause, blacklist, validAfter, validBefore, nonce, signature, balance)", () => {
    const overload: Overload = "bytes signature";
    const sign = (m: AuthorizationMessage) => signTransferAuthorization({ walletClient: c.payer, domain: c.domain, message: m });
    const wrong = (m: AuthorizationMessage) => signTransferAuthorization({ account: OTHER_KEY, domain: c.domain, message: m });

    it("reports Pausable: paused before a blacklisted payer", async () => {
      const m = await c.message();
      await c.receipt(await c.contract.write.blacklist([m.from]));
      await c.receipt(await c.contract.write.pause());
      await expectRevert(c.transferWithAuthorization(overload, m, await sign(m)), "Pausable: paused");
    });

    it("reports a blacklisted payer before an expired authorization", async () => {
      const t = BigInt(await c.networkHelpers.time.latest()) + 60n;
      const m = await c.message({ validBefore: t - 1n });
      await c.receipt(await c.contract.write.blacklist([m.from]));
      await c.networkHelpers.time.setNextBlockTimestamp(t);
      await expectRevert(c.transferWithAuthorization(overload, m, await sign(m)), "Blacklistable: account is blacklisted");
    });

    it("reports not yet valid before expired when both hold", async () => {
      const t = BigInt(await c.networkHelpers.time.latest()) + 60n;
      const m = await c.message({ validAfter: t + 10n, validBefore: t - 10n });
      await c.networkHelpers.time.setNextBlockTimestamp(t);
      await expectRevert(c.transferWithAuthorization(overload, m, await sign(m)), "FiatTokenV2: authorization is not yet valid");
    });

    it("reports an expired authorization before a used nonce", async () => {
      const t = BigInt(await c.networkHelpers.time.latest()) + 60n;
      const used = await c.message();
      await c.receipt(await c.transferWithAuthorization(overload, used, await sign(used)));
      const m = await c.message({ nonce: used.nonce, validBefore: t - 1n });
      await c.networkHelpers.time.setNextBlockTimestamp(t);
      await expectRevert(c.transferWithAuthorization(overload, m, await sign(m)), "FiatTokenV2: authorization is expired");
    });

    it("reports a used nonce before an invalid signature", async () => {
      const used = await c.message();
      await c.receipt(await c.transferWithAuthorization(overload, used, await sign(used)));
      const m = await c.message({ nonce: used.nonce });
      await expectRevert(c.transferWithAuthorization(overload, m, await wrong(m)), "FiatTokenV2: authorization is used or canceled");
    });

    it("reports an invalid signature before an amount above the balance", async () => {
      const m = await c.message({ value: BUYER_FUNDS + 1n });
      await expectRevert(c.transferWithAuthorization(overload, m, await wrong(m)), "FiatTokenV2: invalid signature");
    });
  });
});
