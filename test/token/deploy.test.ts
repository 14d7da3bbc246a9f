import { expect } from "chai";
import { isAddressEqual } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { NETWORKS } from "../../src/protocol/networks.js";
import { HARDHAT_KEYS, makePayment } from "../helpers/facilitator.js";
import { domainSeparator } from "../helpers/sign.js";
import { openChain } from "../helpers/token.js";

describe("BridgedUSDC deployed at a fresh address (not the real one)", () => {
  it("is initialized with the network's name, symbol and version, and its domain names its own address", async () => {
    const chain = await openChain("cronos-mainnet", { at: null });
    expect(isAddressEqual(chain.token, NETWORKS["cronos-mainnet"].token)).to.equal(false);
    expect(await chain.publicClient.getCode({ address: NETWORKS["cronos-mainnet"].token })).to.equal(undefined);
    expect(await chain.contract.read.name()).to.equal("Bridged USDC (Stargate)");
    expect(await chain.contract.read.symbol()).to.equal("USDC.e");
    expect(await chain.contract.read.version()).to.equal("2");
    expect(await chain.contract.read.decimals()).to.equal(6);
    expect(await chain.contract.read.DOMAIN_SEPARATOR()).to.equal(
      domainSeparator({ name: "Bridged USDC (Stargate)", version: "2", chainId: 25, verifyingContract: chain.token }),
    );
  });

  it("executes an authorization signed for that address", async () => {
    const chain = await openChain("cronos-testnet", { at: null });
    const payment = await makePayment(chain, { payer: privateKeyToAccount(HARDHAT_KEYS.buyer) });
    const m = payment.message;
    await chain.contract.write.transferWithAuthorization([m.from, m.to, m.value, m.validAfter, m.validBefore, m.nonce, payment.signature]);
    expect(await chain.contract.read.balanceOf([m.to])).to.equal(1_000_000n);
    expect(await chain.contract.read.authorizationState([m.from, m.nonce])).to.equal(true);
  });
});
