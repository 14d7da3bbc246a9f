import { expect } from "chai";
import { getAddress, keccak256, stringToHex, zeroHash } from "viem";
import type { NetworkName } from "../../src/protocol/networks.js";
import {
  CANCEL_AUTHORIZATION_TYPE,
  RECEIVE_WITH_AUTHORIZATION_TYPE,
  TRANSFER_WITH_AUTHORIZATION_TYPE,
  authorizationDigest,
  domainSeparator,
} from "../helpers/sign.js";
import { BUYER_FUNDS, openTokenChain, type TokenChain } from "./fixture.js";

// EIP-712 / ERC-5267 surface and the token's metadata on each network.

const EXPECTED: Record<NetworkName, { chainId: number; address: string; name: string; symbol: string; decimals: number; version: string }> = {
  "cronos-testnet": {
    chainId: 338,
    address: "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0",
    name: "Bridged USDC (Stargate)",
    symbol: "devUSDC.e",
    decimals: 6,
    version: "1",
  },
  "cronos-mainnet": {
    chainId: 25,
    address: "0xf951eC28187D9E5Ca673Da8FE6757E6f0Be5F77C",
    name: "Bridged USDC (Stargate)",
    symbol: "USDC.e",
    decimals: 6,
    version: "2",
  },
};

describe("BridgedUSDC EIP-712 domain and metadata", () => {
  describe("type hashes", () => {
    let c: TokenChain;
    before(async () => {
      c = await openTokenChain("cronos-testnet");
    });

    it("TRANSFER_WITH_AUTHORIZATION_TYPEHASH is keccak256 of the TransferWithAuthorization type string", async () => {
      expect(await c.contract.read.TRANSFER_WITH_AUTHORIZATION_TYPEHASH()).to.equal(keccak256(stringToHex(TRANSFER_WITH_AUTHORIZATION_TYPE)));
      expect(keccak256(stringToHex(TRANSFER_WITH_AUTHORIZATION_TYPE))).to.equal(
        "0x7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267",
      );
    });

    it("RECEIVE_WITH_AUTHORIZATION_TYPEHASH is keccak256 of the ReceiveWithAuthorization type string", async () => {
      expect(await c.contract.read.RECEIVE_WITH_AUTHORIZATION_TYPEHASH()).to.equal(keccak256(stringToHex(RECEIVE_WITH_AUTHORIZATION_TYPE)));
      expect(keccak256(stringToHex(RECEIVE_WITH_AUTHORIZATION_TYPE))).to.equal(
        "0xd099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de8",
      );
    });

    it("CANCEL_AUTHORIZATION_TYPEHASH is keccak256 of the CancelAuthorization type string", async () => {
      expect(await c.contract.read.CANCEL_AUTHORIZATION_TYPEHASH()).to.equal(keccak256(stringToHex(CANCEL_AUTHORIZATION_TYPE)));
      expect(keccak256(stringToHex(CANCEL_AUTHORIZATION_TYPE))).to.equal(
        "0x158b0a9edf7a828aad02f63cd515c68ef2f50ba807396f6d12842833a1597429",
      );
    });
  });

  for (const network of Object.keys(EXPECTED) as NetworkName[]) {
    const expected = EXPECTED[network];
    describe(`on ${network} (chain id ${expected.chainId})`, () => {
      let c: TokenChain;
      before(async () => {
        c = await openTokenChain(network);
      });

      it(`runs on chain id ${expected.chainId} with the token at ${expected.address}`, async () => {
        expect(await c.publicClient.getChainId()).to.equal(expected.chainId);
        expect(getAddress(c.token)).to.equal(expected.address);
      });

      it(`has name "${expected.name}", symbol "${expected.symbol}", decimals ${expected.decimals}, version "${expected.version}"`, async () => {
        expect(await c.contract.read.name()).to.equal(expected.name);
        expect(await c.contract.read.symbol()).to.equal(expected.symbol);
        expect(await c.contract.read.decimals()).to.equal(expected.decimals);
        expect(await c.contract.read.version()).to.equal(expected.version);
      });

      it(`DOMAIN_SEPARATOR() equals viem's hashDomain for chain id ${expected.chainId}`, async () => {
        // viem's hashDomain over EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)
        const separator = domainSeparator({
          name: expected.name,
          version: expected.version,
          chainId: expected.chainId,
          verifyingContract: expected.address as `0x${string}`,
        });
        expect(await c.contract.read.DOMAIN_SEPARATOR()).to.equal(separator);
      });

      it("eip712Domain() returns fields 0x0f, name, version, chain id, token address, zero salt, no extensions", async () => {
        const [fields, name, version, chainId, verifyingContract, salt, extensions] = await c.contract.read.eip712Domain();
        expect(fields).to.equal("0x0f");
        expect(name).to.equal(expected.name);
        expect(version).to.equal(expected.version);
        expect(chainId).to.equal(BigInt(expected.chainId));
        expect(getAddress(verifyingContract)).to.equal(expected.address);
        expect(salt).to.equal(zeroHash);
        expect(extensions).to.deep.equal([]);
      });

      it("signs over the domain the kit's NETWORKS table describes (fixture domain = on-chain domain)", async () => {
        expect(c.domain).to.deep.equal({
          name: expected.name,
          version: expected.version,
          chainId: expected.chainId,
          verifyingContract: expected.address,
        });
        // A digest made from the on-chain eip712Domain() equals one made from the fixture's domain.
        const [, name, version, chainId, verifyingContract] = await c.contract.read.eip712Domain();
        const m = await c.message();
        expect(authorizationDigest({ name, version, chainId, verifyingContract }, m)).to.equal(authorizationDigest(c.domain, m));
      });

      it("starts with the funded supply (three buyers and the ERC-1271 wallet) and the owner in every role", async () => {
        expect(await c.contract.read.totalSupply()).to.equal(4n * BUYER_FUNDS); // 3 buyers + the ERC-1271 wallet
        const owner = getAddress(c.owner.account.address);
        expect(await c.contract.read.owner()).to.equal(owner);
        expect(await c.contract.read.masterMinter()).to.equal(owner);
        expect(await c.contract.read.pauser()).to.equal(owner);
        expect(await c.contract.read.blacklister()).to.equal(owner);
        expect(await c.contract.read.paused()).to.equal(false);
      });
    });
  }
});
