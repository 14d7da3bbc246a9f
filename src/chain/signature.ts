import { hashDomain, type Address, type Hex } from "viem";
import { TRANSFER_WITH_AUTHORIZATION_TYPEHASH, type TokenDomain, type TransferAuthorizationMessage } from "../protocol/eip3009.js";
import { keccak256Bytes } from "./keccak.js";
import { addressText, recoverAddressBytes, writeSignature } from "./secp256k1.js";

export { secp256k1Backend } from "./secp256k1.js";

const MAX_WORD_DIGITS = 64;

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

// The struct's fixed layout (7 words; the type hash never changes) and the envelope's prefix per domain
// separator, written once; both are filled and hashed synchronously, so one buffer each serves every call.
const struct = Buffer.alloc(7 * 32);
Buffer.from(TRANSFER_WITH_AUTHORIZATION_TYPEHASH.slice(2), "hex").copy(struct, 0);
const envelopes = new Map<string, Buffer>();
const MAX_ENVELOPES = 64;

function envelopeOf(separator: Hex): Buffer {
  let envelope = envelopes.get(separator);
  if (!envelope) {
    envelope = Buffer.alloc(66);
    envelope[0] = 0x19;
    envelope[1] = 0x01;
    putHex(envelope, 2, separator, 32, "separator");
    // A few tokens per process in practice; a caller that makes up separators cannot grow this without bound.
    if (envelopes.size >= MAX_ENVELOPES) envelopes.clear();
    envelopes.set(separator, envelope);
  }
  return envelope;
}

/** Each hex digit's value (-1: not one), for the 128 ASCII codes. */
const NIBBLE = new Int8Array(128).fill(-1);
for (let i = 0; i < 16; i++) {
  NIBBLE["0123456789abcdef".charCodeAt(i)] = i;
  NIBBLE["0123456789ABCDEF".charCodeAt(i)] = i;
}

/** Writes `hex` (0x and exactly `bytes` bytes) at `offset`, digit by digit; throws on anything else, as viem's encoder would. */
function putHex(buffer: Buffer, offset: number, hex: string, bytes: number, field: string): void {
  if (hex.length === 2 + 2 * bytes && hex.charCodeAt(0) === 48 && hex.charCodeAt(1) === 120) {
    let i = 0;
    for (; i < bytes; i++) {
      const high = hex.charCodeAt(2 + 2 * i);
      const low = hex.charCodeAt(3 + 2 * i);
      const value = high < 128 && low < 128 ? (NIBBLE[high]! << 4) | NIBBLE[low]! : -1;
      if (value < 0) break;
      buffer[offset + i] = value;
    }
    if (i === bytes) return;
  }
  throw new TypeError(`${field} must be 0x and ${bytes} bytes of hex, got "${hex}"`);
}

/** Writes a uint256 as one big-endian word at `offset`; throws when it does not fit. */
function putUint(buffer: Buffer, offset: number, value: bigint, field: string): void {
  const hex = value.toString(16);
  if (value < 0n || hex.length > MAX_WORD_DIGITS) throw new RangeError(`${field} ${value} is not a uint256`);
  buffer.fill(0, offset, offset + 32 - ((hex.length + 1) >> 1));
  buffer.write(hex.length % 2 ? `0${hex}` : hex, offset + 32 - ((hex.length + 1) >> 1), "hex");
}

/**
 * The EIP-712 digest of a `TransferWithAuthorization`, encoded in its fixed layout: the same bytes as
 * viem's `hashTypedData`, without its generic encoder on the verify path (test/chain/signature.test.ts
 * holds it to viem and to the token's own `DOMAIN_SEPARATOR`).
 */
export function transferAuthorizationDigest(separator: Hex, message: TransferAuthorizationMessage): Uint8Array {
  const envelope = envelopeOf(separator);
  putHex(struct, 32 + 12, message.from, 20, "from");
  putHex(struct, 64 + 12, message.to, 20, "to");
  putUint(struct, 96, message.value, "value");
  putUint(struct, 128, message.validAfter, "validAfter");
  putUint(struct, 160, message.validBefore, "validBefore");
  putHex(struct, 192, message.nonce, 32, "nonce");
  envelope.set(keccak256Bytes(struct), 34);
  return keccak256Bytes(envelope);
}

/** One signature's bytes, reused: recovery is synchronous. */
const signatureBytes = Buffer.alloc(65);

/**
 * Recovers the signer of a 65-byte `r‖s‖v` signature exactly as FiatToken's ECRecover accepts it:
 * low `s` only, `v` 27 or 28. Returns `undefined` where the token would revert (or the text is not hex).
 * The address comes in lower case.
 */
export function recoverSigner(digest: Uint8Array, signature: Hex): Address | undefined {
  if (!writeSignature(signature, signatureBytes, 0)) return undefined;
  const address = recoverAddressBytes(digest, signatureBytes);
  return address && addressText(address);
}

