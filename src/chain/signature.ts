import { createRequire } from "node:module";
import { hashDomain, hexToBytes, keccak256, bytesToHex, type Address, type Hex } from "viem";
import { TRANSFER_WITH_AUTHORIZATION_TYPEHASH, type TokenDomain, type TransferAuthorizationMessage } from "../protocol/eip3009.js";

interface Secp256k1 {
  ecdsaRecover(signature: Uint8Array, recid: number, message: Uint8Array, compressed?: boolean): Uint8Array;
}

const require = createRequire(import.meta.url);
// The `secp256k1` package falls back to pure-JS elliptic when its native binding cannot load;
// load the binding ourselves so we know which one runs (it is ~30x faster than JS recovery).
let secp: Secp256k1;
let backend: "native" | "javascript";
try {
  secp = require("secp256k1/bindings") as Secp256k1;
  backend = "native";
} catch {
  secp = require("secp256k1/elliptic") as Secp256k1;
  backend = "javascript";
}

/** Which secp256k1 implementation recovers signatures: the native libsecp256k1 binding or the JS fallback. */
export const secp256k1Backend: "native" | "javascript" = backend;

/** secp256k1 group order / 2: FiatToken's ECRecover refuses a larger `s` (EIP-2 malleability). */
const HALF_N = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;
const TYPEHASH_BYTES = hexToBytes(TRANSFER_WITH_AUTHORIZATION_TYPEHASH);

/** The EIP-712 domain separator of a token on one chain. */
export function domainSeparator(domain: TokenDomain): Hex {
  return hashDomain({
    domain: { ...domain, chainId: BigInt(domain.chainId) },
    types: {
      EIP712Domain: [
        { name: "name", type: "string" },
        { name: "version", type: "string" },
        { name: "chainId", type: "uint256" },
        { name: "verifyingContract", type: "address" },
      ],
    },
  });
}

function putWord(buffer: Uint8Array, offset: number, value: bigint): void {
  for (let i = 31; i >= 0; i--) {
    buffer[offset + i] = Number(value & 0xffn);
    value >>= 8n;
  }
}

/**
 * The EIP-712 digest of a `TransferWithAuthorization`, encoded by hand: the same bytes as viem's
 * `hashTypedData`, without its generic encoder on the verify hot path.
 */
export function transferAuthorizationDigest(separator: Hex, message: TransferAuthorizationMessage): Uint8Array {
  const struct = new Uint8Array(7 * 32);
  struct.set(TYPEHASH_BYTES, 0);
  struct.set(hexToBytes(message.from), 32 + 12);
  struct.set(hexToBytes(message.to), 64 + 12);
  putWord(struct, 96, message.value);
  putWord(struct, 128, message.validAfter);
  putWord(struct, 160, message.validBefore);
  struct.set(hexToBytes(message.nonce), 192);
  const envelope = new Uint8Array(66);
  envelope[0] = 0x19;
  envelope[1] = 0x01;
  envelope.set(hexToBytes(separator), 2);
  envelope.set(keccak256(struct, "bytes"), 34);
  return keccak256(envelope, "bytes");
}

/**
 * Recovers the signer of a 65-byte `r‖s‖v` signature exactly as FiatToken's ECRecover accepts it:
 * low `s` only, `v` 27 or 28. Returns `undefined` where the token would revert.
 */
export function recoverSigner(digest: Uint8Array, signature: Hex): Address | undefined {
  if (signature.length !== 2 + 65 * 2) return undefined;
  const bytes = hexToBytes(signature);
  const v = bytes[64]!;
  if (v !== 27 && v !== 28) return undefined;
  const s = BigInt(bytesToHex(bytes.subarray(32, 64)));
  if (s > HALF_N) return undefined;
  let publicKey: Uint8Array;
  try {
    publicKey = secp.ecdsaRecover(bytes.subarray(0, 64), v - 27, digest, false);
  } catch {
    return undefined; // r or s out of range, or no point: ecrecover yields address(0)
  }
  const hash = keccak256(publicKey.subarray(1), "bytes");
  return bytesToHex(hash.subarray(12)) as Address;
}
