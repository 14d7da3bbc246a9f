import { expect } from "chai";
import { parseSignature } from "viem";
import { openChain } from "../helpers/token.js";
import { VECTORS, VECTOR_MESSAGE, VECTOR_SIGNER, VECTOR_PAYEE } from "../helpers/vectors.js";

describe("BridgedUSDC at the real token addresses", () => {
  it("has vector A's domain separator on 338 and accepts vector A's signature", async () => {
    const chain = await openChain("cronos-testnet", { at: VECTORS.A.verifyingContract });
    expect(await chain.contract.read.DOMAIN_SEPARATOR()).to.equal(VECTORS.A.domainSeparator);
    const [, payee] = chain.wallets;
    // vector A is signed by account #0, which also deployed the token: give it a balance.
    await chain.contract.write.configureMinter([VECTOR_SIGNER.address, 10n ** 12n]);
    await chain.contract.write.mint([VECTOR_SIGNER.address, 5_000_000n]);
    await chain.contract.write.transferWithAuthorization([
      VECTOR_MESSAGE.from, VECTOR_MESSAGE.to, VECTOR_MESSAGE.value, VECTOR_MESSAGE.validAfter,
      VECTOR_MESSAGE.validBefore, VECTOR_MESSAGE.nonce, VECTORS.A.signature,
    ], { account: payee!.account });
    expect(await chain.contract.read.balanceOf([VECTOR_PAYEE])).to.equal(1_000_000n);
    expect(await chain.contract.read.authorizationState([VECTOR_SIGNER.address, VECTOR_MESSAGE.nonce])).to.equal(true);
    const { v } = parseSignature(VECTORS.A.signature);
    expect(v).to.equal(28n);
  });
});
