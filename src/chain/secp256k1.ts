import { createRequire } from "node:module";
import type { Address } from "viem";
import { keccak256Bytes } from "./keccak.js";

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

/** secp256k1 group order / 2, big-endian: FiatToken's ECRecover refuses a larger `s` (EIP-2 malleability). */
const HALF_N = Buffer.from("7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0", "hex");

/** The bytes of a signature's text (a two-character prefix, `0x`, and 65 bytes of hex: `r‖s‖v`) written at `offset`; false when it is not that. */
export function writeSignature(signature: string, target: Buffer, offset: number): boolean {
  if (signature.length !== 2 + 65 * 2) return false;
  // Buffer#write stops at the first pair that is not hex: fewer than 65 bytes written.
  return target.write(signature.slice(2), offset, 65, "hex") === 65;
}

/**
 * The signer (20 address bytes) of the 65-byte `r‖s‖v` signature at `offset` of `bytes` over a 32-byte
 * digest, exactly as FiatToken's ECRecover accepts it: `v` 27 or 28, low `s` only. Undefined where the
 * token would revert (or ecrecover yield address(0): `r` or `s` out of range, no point).
 */
export function recoverAddressBytes(digest: Uint8Array, bytes: Buffer, offset = 0): Uint8Array | undefined {
  const v = bytes[offset + 64]!;
  if (v !== 27 && v !== 28) return undefined;
  if (bytes.compare(HALF_N, 0, 32, offset + 32, offset + 64) > 0) return undefined;
  let publicKey: Uint8Array;
  try {
    publicKey = secp.ecdsaRecover(bytes.subarray(offset, offset + 64), v - 27, digest, false);
  } catch {
    return undefined;
  }
  return keccak256Bytes(publicKey.subarray(1)).subarray(12);
}

/** `0x` and the 20 address bytes at the start of `bytes`, in lower-case hex. */
export function addressText(bytes: Uint8Array): Address {
  return `0x${Buffer.from(bytes.buffer, bytes.byteOffset, 20).toString("hex")}` as Address;
}
