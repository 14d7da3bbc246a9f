import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { bytesToHex, hashTypedData, hexToBytes, keccak256, serializeSignature, parseSignature, type Address, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { keccak256Bytes, keccak256Js, keccakBackend } from "../../src/chain/keccak.js";
import { domainSeparator, recoverSigner, secp256k1Backend, transferAuthorizationDigest } from "../../src/chain/signature.js";
import { TRANSFER_WITH_AUTHORIZATION_TYPEHASH, transferAuthorizationTypedData, type TokenDomain } from "../../src/protocol/eip3009.js";
import { NETWORKS } from "../../src/protocol/networks.js";
import { openChain } from "../helpers/token.js";
import { VECTORS, VECTOR_DOMAIN_NAME, VECTOR_MESSAGE, VECTOR_SIGNER, VECTOR_STRUCT_HASH } from "../helpers/vectors.js";

const MAX_UINT256 = (1n << 256n) - 1n;
/** secp256k1's group order: a signature's `s` and `n - s` recover the same key. */
const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

const domainOf = (vector: (typeof VECTORS)[keyof typeof VECTORS]): TokenDomain => ({
  name: VECTOR_DOMAIN_NAME,
  version: vector.version,
  chainId: vector.chainId,
  verifyingContract: vector.verifyingContract,
});

const randomWord = () => BigInt(bytesToHex(randomBytes(32)));
const randomAddress = () => bytesToHex(randomBytes(20)) as Address;

describe("EIP-712 digest and signer recovery on verify's path (fixed layout, native keccak)", () => {
  it("runs the native keccak and secp256k1 bindings on this machine", () => {
    expect(keccakBackend).to.equal("native");
    expect(secp256k1Backend).to.equal("native");
  });

  it("hashes like viem's JS keccak-256 for every length across the 136-byte block boundary", () => {
    const data = randomBytes(400);
    for (let length = 0; length <= 400; length += 1) {
      expect(bytesToHex(keccak256Bytes(data.subarray(0, length)))).to.equal(bytesToHex(keccak256Js(data.subarray(0, length))));
    }
    // The empty string's well-known hash.
    expect(bytesToHex(keccak256Bytes(new Uint8Array()))).to.equal("0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470");
  });

  it("has the type hash of the TransferWithAuthorization type string", () => {
    const typeString =
      "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)";
    expect(keccak256(new TextEncoder().encode(typeString))).to.equal(TRANSFER_WITH_AUTHORIZATION_TYPEHASH);
  });

  for (const [name, vector] of Object.entries(VECTORS)) {
    it(`gives vector ${name}'s digest, as viem's hashTypedData does, and recovers its signer`, () => {
      const domain = domainOf(vector);
      const separator = domainSeparator(domain);
      expect(separator).to.equal(vector.domainSeparator);
      const digest = transferAuthorizationDigest(separator, VECTOR_MESSAGE);
      expect(bytesToHex(digest)).to.equal(hashTypedData(transferAuthorizationTypedData(domain, VECTOR_MESSAGE)));
      expect(recoverSigner(digest, vector.signature)).to.equal(VECTOR_SIGNER.address.toLowerCase());
    });
  }

  it("builds vector A's struct hash into its digest (the envelope is 0x1901 ‖ separator ‖ struct hash)", () => {
    const expected = keccak256(new Uint8Array([0x19, 0x01, ...hexToBytes(VECTORS.A.domainSeparator), ...hexToBytes(VECTOR_STRUCT_HASH)]));
    expect(bytesToHex(transferAuthorizationDigest(VECTORS.A.domainSeparator, VECTOR_MESSAGE))).to.equal(expected);
  });

  it("matches viem's hashTypedData on 300 random messages across both networks' domains, extremes included", () => {
    const domains = Object.values(NETWORKS).map((info) => ({ ...info.domain, chainId: info.chainId, verifyingContract: info.token }));
    const extremes = [0n, 1n, 255n, 256n, MAX_UINT256 - 1n, MAX_UINT256];
    for (let i = 0; i < 300; i++) {
      const domain = domains[i % domains.length]!;
      const message = {
        from: randomAddress(),
        to: randomAddress(),
        value: i < extremes.length ? extremes[i]! : randomWord() >> BigInt(i % 256),
        validAfter: extremes[(i + 1) % extremes.length]!,
        validBefore: randomWord() >> BigInt((i * 7) % 256),
        nonce: bytesToHex(randomBytes(32)),
      };
      // Alternating separators checks that each call writes its own domain into the envelope.
      expect(bytesToHex(transferAuthorizationDigest(domainSeparator(domain), message))).to.equal(
        hashTypedData(transferAuthorizationTypedData(domain, message)),
      );
    }
  });

  it("refuses to hash a field that does not fit its word (nothing is silently cut)", () => {
    const separator = VECTORS.A.domainSeparator;
    expect(() => transferAuthorizationDigest(separator, { ...VECTOR_MESSAGE, value: MAX_UINT256 + 1n })).to.throw(RangeError, /value/);
    expect(() => transferAuthorizationDigest(separator, { ...VECTOR_MESSAGE, validAfter: -1n })).to.throw(RangeError, /validAfter/);
    expect(() => transferAuthorizationDigest(separator, { ...VECTOR_MESSAGE, nonce: "0x11" })).to.throw(TypeError, /nonce/);
    expect(() => transferAuthorizationDigest(separator, { ...VECTOR_MESSAGE, to: `0x${"zz".repeat(20)}` as Address })).to.throw(TypeError, /to/);
    expect(() => transferAuthorizationDigest("0x1234", VECTOR_MESSAGE)).to.throw(TypeError, /separator/);
    expect(() => transferAuthorizationDigest(separator, { ...VECTOR_MESSAGE, nonce: `0X${"11".repeat(32)}` as Hex })).to.throw(TypeError, /nonce/);
    expect(() => transferAuthorizationDigest(separator, { ...VECTOR_MESSAGE, from: `0x${"é".repeat(40)}` as Address })).to.throw(TypeError, /from/);
    expect(() => transferAuthorizationDigest(separator, { ...VECTOR_MESSAGE, from: `0x${"1".repeat(39)}g` as Address })).to.throw(TypeError, /from/);
    // A refused call leaves nothing behind: the next digest is still right.
    expect(bytesToHex(transferAuthorizationDigest(separator, VECTOR_MESSAGE))).to.equal(
      hashTypedData(transferAuthorizationTypedData(domainOf(VECTORS.A), VECTOR_MESSAGE)),
    );
  });

  it("recovers fresh signatures by random keys, and refuses what FiatToken's ECRecover refuses", async () => {
    const separator = VECTORS.A.domainSeparator;
    for (let i = 0; i < 40; i++) {
      const account = privateKeyToAccount(bytesToHex(randomBytes(32)));
      const message = { ...VECTOR_MESSAGE, from: account.address, nonce: bytesToHex(randomBytes(32)) };
      const signature = await account.signTypedData(transferAuthorizationTypedData(domainOf(VECTORS.A), message));
      const digest = transferAuthorizationDigest(separator, message);
      expect(recoverSigner(digest, signature)).to.equal(account.address.toLowerCase());
      // Upper-case hex reads the same.
      expect(recoverSigner(digest, `0x${signature.slice(2).toUpperCase()}` as Hex)).to.equal(account.address.toLowerCase());

      const { r, s, yParity } = parseSignature(signature);
      // The same point with the high `s` (EIP-2): the token reverts, so no signer.
      const high = serializeSignature({ r, s: `0x${(N - BigInt(s)).toString(16).padStart(64, "0")}`, yParity: 1 - yParity! });
      expect(recoverSigner(digest, high)).to.equal(undefined);
      // `v` other than 27/28 (EIP-155 style 0/1 included).
      for (const v of [0, 1, 26, 29]) expect(recoverSigner(digest, `${signature.slice(0, 130)}${v.toString(16).padStart(2, "0")}` as Hex)).to.equal(undefined);
      // The other parity recovers another key, never the payer.
      const flipped = `${signature.slice(0, 130)}${(yParity ? 27 : 28).toString(16)}` as Hex;
      expect(recoverSigner(digest, flipped)).to.not.equal(account.address.toLowerCase());
    }
  });

  it("gives no signer for texts that are not a 65-byte signature, r or s out of range, or s at the boundary", () => {
    const digest = transferAuthorizationDigest(VECTORS.A.domainSeparator, VECTOR_MESSAGE);
    const good = VECTORS.A.signature;
    expect(recoverSigner(digest, good.slice(0, -2) as Hex)).to.equal(undefined);
    expect(recoverSigner(digest, `${good}00` as Hex)).to.equal(undefined);
    expect(recoverSigner(digest, `0x${"zz"}${good.slice(4)}` as Hex)).to.equal(undefined);
    expect(recoverSigner(digest, `${good.slice(0, 64)}zz${good.slice(66)}` as Hex)).to.equal(undefined);
    expect(recoverSigner(digest, `0x${"00".repeat(64)}1b` as Hex)).to.equal(undefined);
    expect(recoverSigner(digest, `0x${"ff".repeat(64)}1b` as Hex)).to.equal(undefined);
    // s = n/2 exactly is accepted by the token's check (s <= n/2); s = n/2 + 1 is not.
    const half = "7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0";
    const over = "7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a1";
    const r = good.slice(2, 66);
    expect(recoverSigner(digest, `0x${r}${over}1b` as Hex)).to.equal(undefined);
    const atHalf = recoverSigner(digest, `0x${r}${half}1b` as Hex);
    expect(atHalf).to.match(/^0x[0-9a-f]{40}$/);
  });

  it("has each Cronos token's on-chain DOMAIN_SEPARATOR as the separator verify computes", async () => {
    for (const network of ["cronos-testnet", "cronos-mainnet"] as const) {
      const chain = await openChain(network, { buyers: 0 });
      const info = NETWORKS[network];
      const onChain = await chain.contract.read.DOMAIN_SEPARATOR();
      expect(domainSeparator({ ...info.domain, chainId: info.chainId, verifyingContract: info.token })).to.equal(onChain);
    }
  });
});
