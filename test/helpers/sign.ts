import { randomBytes } from "node:crypto";
import {
  bytesToHex,
  hashDomain,
  hashTypedData,
  numberToHex,
  parseSignature,
  serializeSignature,
  size,
  type Account,
  type Address,
  type Chain,
  type Hex,
  type LocalAccount,
  type Transport,
  type WalletClient,
} from "viem";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
//
// The EIP-712 types are written out here rather than imported from src/, so that the tests check
// the token (and the kit) against an independent statement of EIP-3009.

/** The order n of the secp256k1 group. */
export const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/** The largest `s` FiatToken's ECRecover accepts (n / 2). */
export const SECP256K1_HALF_N = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;

export const TRANSFER_WITH_AUTHORIZATION_TYPE =
  "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)";
export const RECEIVE_WITH_AUTHORIZATION_TYPE =
  "ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)";
export const CANCEL_AUTHORIZATION_TYPE = "CancelAuthorization(address authorizer,bytes32 nonce)";

const AUTHORIZATION_FIELDS = [
  { name: "from", type: "address" },
  { name: "to", type: "address" },
  { name: "value", type: "uint256" },
  { name: "validAfter", type: "uint256" },
  { name: "validBefore", type: "uint256" },
  { name: "nonce", type: "bytes32" },
] as const;

export const AUTHORIZATION_TYPES = {
  TransferWithAuthorization: AUTHORIZATION_FIELDS,
  ReceiveWithAuthorization: AUTHORIZATION_FIELDS,
} as const;

export const CANCEL_AUTHORIZATION_TYPES = {
  CancelAuthorization: [
    { name: "authorizer", type: "address" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;

export type AuthorizationPrimaryType = keyof typeof AUTHORIZATION_TYPES;

/** The token's EIP-712 domain. */
export interface Eip712Domain {
  name: string;
  version: string;
  chainId: number | bigint;
  verifyingContract: Address;
}

/** The message of a `TransferWithAuthorization` / `ReceiveWithAuthorization`. */
export interface AuthorizationMessage {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
}

/** The message of a `CancelAuthorization`. */
export interface CancelMessage {
  authorizer: Address;
  nonce: Hex;
}

/** Who signs: a local (private-key) account, or a wallet client whose node holds the key. */
export type Signer =
  | { account: LocalAccount; walletClient?: undefined }
  | { walletClient: WalletClient<Transport, Chain | undefined, Account>; account?: undefined };

/** A signature as the `bytes` overloads take it (r‖s‖v, 65 bytes) and as the `v, r, s` overloads take it. */
export interface SplitSignature {
  signature: Hex;
  v: number;
  r: Hex;
  s: Hex;
}

/** A fresh random 32-byte nonce, as EIP-3009 and x402 clients use. */
export function randomNonce(): Hex {
  return bytesToHex(randomBytes(32));
}

/** Splits a 65-byte r‖s‖v signature into the `v, r, s` arguments (v stays as encoded: 27 or 28, or whatever byte is there). */
export function splitSignature(signature: Hex): SplitSignature {
  if (size(signature) !== 65) throw new Error(`expected a 65-byte signature, got ${size(signature)} bytes`);
  return {
    signature,
    r: `0x${signature.slice(2, 66)}`,
    s: `0x${signature.slice(66, 130)}`,
    v: Number.parseInt(signature.slice(130, 132), 16),
  };
}

/** The 65-byte r‖s‖v encoding of `v, r, s`. */
export function joinSignature(parts: { v: number; r: Hex; s: Hex }): Hex {
  return `0x${parts.r.slice(2).padStart(64, "0")}${parts.s.slice(2).padStart(64, "0")}${parts.v.toString(16).padStart(2, "0")}`;
}

/**
 * The malleable twin of a signature: s' = n − s and v flipped (27 ↔ 28). ecrecover returns the
 * same signer for it, but FiatToken's ECRecover refuses it because s' is in the upper half.
 */
export function toHighS(signature: Hex): SplitSignature {
  const { r, s, yParity } = parseSignature(signature);
  const highS = numberToHex(SECP256K1_N - BigInt(s), { size: 32 });
  const flipped = serializeSignature({ r, s: highS, yParity: yParity === 0 ? 1 : 0 });
  return splitSignature(flipped);
}

/** The same signature with another `v` byte. */
export function withV(signature: Hex, v: number): SplitSignature {
  const parts = splitSignature(signature);
  return splitSignature(joinSignature({ ...parts, v }));
}

/** The EIP-712 domain separator (name, version, chainId, verifyingContract), as FiatToken's DOMAIN_SEPARATOR(). */
export function domainSeparator(domain: Eip712Domain): Hex {
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

/** The EIP-712 digest of an authorization (what an EOA or an ERC-1271 wallet signs). */
export function authorizationDigest(
  domain: Eip712Domain,
  message: AuthorizationMessage,
  primaryType: AuthorizationPrimaryType = "TransferWithAuthorization",
): Hex {
  return hashTypedData({ domain, types: AUTHORIZATION_TYPES, primaryType, message });
}

/** The EIP-712 digest of a cancellation. */
export function cancelDigest(domain: Eip712Domain, message: CancelMessage): Hex {
  return hashTypedData({ domain, types: CANCEL_AUTHORIZATION_TYPES, primaryType: "CancelAuthorization", message });
}

/**
 * Signs a `TransferWithAuthorization` (default) or `ReceiveWithAuthorization` with EIP-712.
 * For an ERC-1271 wallet, pass the wallet's owner as the signer and the wallet as `message.from`.
 */
export async function signTransferAuthorization(
  parameters: Signer & { domain: Eip712Domain; message: AuthorizationMessage; primaryType?: AuthorizationPrimaryType },
): Promise<SplitSignature> {
  const typedData = {
    domain: parameters.domain,
    types: AUTHORIZATION_TYPES,
    primaryType: parameters.primaryType ?? "TransferWithAuthorization",
    message: parameters.message,
  } as const;
  const signature = parameters.account
    ? await parameters.account.signTypedData(typedData)
    : await parameters.walletClient.signTypedData({ ...typedData, account: parameters.walletClient.account });
  return splitSignature(signature);
}

/** Signs a `CancelAuthorization` with EIP-712. */
export async function signCancelAuthorization(
  parameters: Signer & { domain: Eip712Domain; message: CancelMessage },
): Promise<SplitSignature> {
  const typedData = {
    domain: parameters.domain,
    types: CANCEL_AUTHORIZATION_TYPES,
    primaryType: "CancelAuthorization",
    message: parameters.message,
  } as const;
  const signature = parameters.account
    ? await parameters.account.signTypedData(typedData)
    : await parameters.walletClient.signTypedData({ ...typedData, account: parameters.walletClient.account });
  return splitSignature(signature);
}

/** The six authorization arguments in contract order. */
export function authorizationArgs(message: AuthorizationMessage) {
  return [message.from, message.to, message.value, message.validAfter, message.validBefore, message.nonce] as const;
}
