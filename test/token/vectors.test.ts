import { expect } from "chai";
import { hashStruct, parseSignature, recoverAddress, type Address, type Hex } from "viem";
import type { NetworkName } from "../../src/protocol/networks.js";
import { expectRevert } from "../helpers/revert.js";
import { AUTHORIZATION_TYPES, authorizationArgs, authorizationDigest, domainSeparator } from "../helpers/sign.js";
import { openChain } from "../helpers/token.js";
import {
  VECTORS,
  VECTOR_DOMAIN_NAME,
  VECTOR_MESSAGE,
  VECTOR_PAYEE,
  VECTOR_SIGNER,
  VECTOR_STRUCT_HASH,
  type Vector,
} from "../helpers/vectors.js";

/** A chain with the token at `at`, the vector signer (account #0, the token's owner) funded with 5 USDC.e. */
async function chainFor(network: NetworkName, at: Address) {
  const chain = await openChain(network, { at });
  // The vectors are signed by account #0, which also deployed the token: give it a balance.
  await chain.contract.write.configureMinter([VECTOR_SIGNER.address, 10n ** 12n]);
  await chain.contract.write.mint([VECTOR_SIGNER.address, 5_000_000n]);
  return chain;
}

function submitVector(chain: Awaited<ReturnType<typeof chainFor>>, signature: Hex) {
  const [, payee] = chain.wallets;
  return chain.contract.write.transferWithAuthorization([...authorizationArgs(VECTOR_MESSAGE), signature], {
    account: payee!.account,
  });
}

async function expectAccepted(chain: Awaited<ReturnType<typeof chainFor>>, vector: Vector) {
  expect(await chain.contract.read.balanceOf([VECTOR_PAYEE])).to.equal(0n);
  await chain.publicClient.waitForTransactionReceipt({ hash: await submitVector(chain, vector.signature) });
  expect(await chain.contract.read.balanceOf([VECTOR_PAYEE])).to.equal(1_000_000n);
  expect(await chain.contract.read.balanceOf([VECTOR_SIGNER.address])).to.equal(4_000_000n);
  expect(await chain.contract.read.authorizationState([VECTOR_SIGNER.address, VECTOR_MESSAGE.nonce])).to.equal(true);
}

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

  it("has vector M's domain separator on 25 at 0xf951eC28187D9E5Ca673Da8FE6757E6f0Be5F77C and accepts vector M's signature", async () => {
    const chain = await chainFor("cronos-mainnet", VECTORS.M.verifyingContract);
    expect(await chain.publicClient.getChainId()).to.equal(25);
    expect(await chain.contract.read.DOMAIN_SEPARATOR()).to.equal(VECTORS.M.domainSeparator);
    await expectAccepted(chain, VECTORS.M);
  });

  it("refuses vector A's signature on 25 (other chain id, address and version) with FiatTokenV2: invalid signature", async () => {
    const chain = await chainFor("cronos-mainnet", VECTORS.M.verifyingContract);
    await expectRevert(submitVector(chain, VECTORS.A.signature), "FiatTokenV2: invalid signature");
    expect(await chain.contract.read.balanceOf([VECTOR_PAYEE])).to.equal(0n);
  });

  describe("on 338 with the token at vector B's address 0x5FbDB2315678afecb367f032d93F642f64180aa3", () => {
    it("has vector B's domain separator and accepts vector B's signature", async () => {
      const chain = await chainFor("cronos-testnet", VECTORS.B.verifyingContract);
      expect(await chain.contract.read.DOMAIN_SEPARATOR()).to.equal(VECTORS.B.domainSeparator);
      await expectAccepted(chain, VECTORS.B);
    });

    it("refuses vector C (signed for chain id 31337) with FiatTokenV2: invalid signature", async () => {
      const chain = await chainFor("cronos-testnet", VECTORS.C.verifyingContract);
      expect(await chain.contract.read.DOMAIN_SEPARATOR()).to.not.equal(VECTORS.C.domainSeparator);
      await expectRevert(submitVector(chain, VECTORS.C.signature), "FiatTokenV2: invalid signature");
      expect(await chain.contract.read.balanceOf([VECTOR_PAYEE])).to.equal(0n);
      expect(await chain.contract.read.authorizationState([VECTOR_SIGNER.address, VECTOR_MESSAGE.nonce])).to.equal(false);
    });
  });

  describe("the vectors themselves", () => {
    it("share one struct hash, which viem's hashStruct reproduces", () => {
      expect(hashStruct({ data: VECTOR_MESSAGE, primaryType: "TransferWithAuthorization", types: AUTHORIZATION_TYPES })).to.equal(
        VECTOR_STRUCT_HASH,
      );
    });

    for (const [label, vector] of Object.entries(VECTORS) as Array<[string, Vector]>) {
      it(`vector ${label} has its domain separator and recovers to the vector signer over its own domain (chain id ${vector.chainId})`, async () => {
        const domain = {
          name: VECTOR_DOMAIN_NAME,
          version: vector.version,
          chainId: vector.chainId,
          verifyingContract: vector.verifyingContract,
        };
        expect(domainSeparator(domain)).to.equal(vector.domainSeparator);
        const digest = authorizationDigest(domain, VECTOR_MESSAGE);
        expect(await recoverAddress({ hash: digest, signature: vector.signature })).to.equal(VECTOR_SIGNER.address);
      });
    }
  });
});
