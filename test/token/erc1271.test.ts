import { expect } from "chai";
import { getAddress, type Hex } from "viem";
import { expectRevert } from "../helpers/revert.js";
import { authorizationDigest, splitSignature, type AuthorizationMessage } from "../helpers/sign.js";
import { BUYER_FUNDS, OTHER_KEY, WALLET_OWNER, useTokenChain } from "./fixture.js";

// An ERC-1271 contract wallet as the payer: FiatToken v2.2's SignatureChecker asks the wallet.

const ERC1271_MAGIC_VALUE = "0x1626ba7e";

describe("BridgedUSDC with an ERC-1271 wallet payer", () => {
  const c = useTokenChain();

  const walletMessage = (overrides: Partial<AuthorizationMessage> = {}) =>
    c.message({ from: getAddress(c.wallet.address), ...overrides });

  /** The wallet owner's raw signature over the EIP-712 digest (no prefix). */
  const signDigest = async (account: typeof WALLET_OWNER, m: AuthorizationMessage): Promise<Hex> =>
    account.sign({ hash: authorizationDigest(c.domain, m) });

  it("is funded and owned as the fixture says", async () => {
    expect(await c.wallet.read.owner()).to.equal(WALLET_OWNER.address);
    expect(await c.balanceOf(c.wallet.address)).to.equal(BUYER_FUNDS);
    const code = (await c.publicClient.getCode({ address: c.wallet.address })) ?? "0x";
    expect(code.length).to.be.greaterThan(2);
  });

  it("executes a transfer from the wallet when its owner signed the EIP-712 digest (bytes overload)", async () => {
    const m = await walletMessage();
    const signature = await signDigest(WALLET_OWNER, m);
    expect(await c.wallet.read.isValidSignature([authorizationDigest(c.domain, m), signature])).to.equal(ERC1271_MAGIC_VALUE);

    const receipt = await c.receipt(await c.transferWithAuthorization("bytes signature", m, splitSignature(signature)));

    c.expectAuthorizationUsedAndTransfer(receipt, m);
    expect(await c.balanceOf(c.wallet.address)).to.equal(BUYER_FUNDS - m.value);
    expect(await c.balanceOf(m.to)).to.equal(m.value);
    expect(await c.authorizationState(m.from, m.nonce)).to.equal(true);
  });

  it("refuses a wallet signature by another key with FiatTokenV2: invalid signature", async () => {
    const m = await walletMessage();
    const signature = await signDigest(OTHER_KEY, m);
    expect(await c.wallet.read.isValidSignature([authorizationDigest(c.domain, m), signature])).to.equal("0xffffffff");
    await expectRevert(c.transferWithAuthorization("bytes signature", m, splitSignature(signature)), "FiatTokenV2: invalid signature");
    expect(await c.balanceOf(c.wallet.address)).to.equal(BUYER_FUNDS);
    expect(await c.authorizationState(m.from, m.nonce)).to.equal(false);
  });

  it("refuses the owner's signature over other parameters with FiatTokenV2: invalid signature", async () => {
    const m = await walletMessage();
    const signature = await signDigest(WALLET_OWNER, m);
    await expectRevert(
      c.transferWithAuthorization("bytes signature", { ...m, value: m.value + 1n }, splitSignature(signature)),
      "FiatTokenV2: invalid signature",
    );
    expect(await c.balanceOf(c.wallet.address)).to.equal(BUYER_FUNDS);
  });

  it("does not let the wallet's signature move the owner's own EOA balance (the digest names the wallet)", async () => {
    // Give the owner's EOA tokens, then try the wallet-signed authorization with from = owner.
    await c.receipt(await c.contract.write.mint([WALLET_OWNER.address, BUYER_FUNDS]));
    const m = await walletMessage();
    const signature = await signDigest(WALLET_OWNER, m);
    await expectRevert(
      c.transferWithAuthorization("bytes signature", { ...m, from: WALLET_OWNER.address }, splitSignature(signature)),
      "FiatTokenV2: invalid signature",
    );
    expect(await c.balanceOf(WALLET_OWNER.address)).to.equal(BUYER_FUNDS);
  });

  it("refuses a payer contract that does not implement ERC-1271 (the token itself) with FiatTokenV2: invalid signature", async () => {
    const m = await c.message({ from: getAddress(c.token) });
    const signature = await signDigest(WALLET_OWNER, m);
    await expectRevert(c.transferWithAuthorization("bytes signature", m, splitSignature(signature)), "FiatTokenV2: invalid signature");
  });

  it("accepts receiveWithAuthorization from the wallet when the payee calls", async () => {
    const m = await walletMessage();
    const signature = await WALLET_OWNER.sign({ hash: authorizationDigest(c.domain, m, "ReceiveWithAuthorization") });
    const receipt = await c.receipt(await c.receiveWithAuthorization("bytes signature", m, splitSignature(signature)));
    c.expectAuthorizationUsedAndTransfer(receipt, m);
    expect(await c.balanceOf(m.to)).to.equal(m.value);
  });
});
