import { getAddress, isAddress, type Address, type Hex } from "viem";
import type { Authorization } from "./schemas.js";

// Hand-written checks of the shapes verify reads on every request, for the inputs they can vouch for: each
// returns exactly what its zod schema's parse gives for the fields verify uses, or undefined for anything it
// does not take (then the schema parses, and words its error as always). test/protocol/fast-parse.test.ts
// holds each to its schema on valid inputs and on thousands of mutations of them.

const MAX_UINT256 = (1n << 256n) - 1n;
const DIGITS = /^\d+$/;
const NONCE = /^0x[0-9a-fA-F]{64}$/;
const HEX_BYTES = /^0x([0-9a-fA-F]{2})*$/;

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Addresses as sent → checksummed, for the payers and payees that come back; cleared when full (a flood of new ones). */
const CHECKSUMMED = new Map<string, Address>();
const MAX_CHECKSUMMED = 10_000;

/** `addressSchema`: any letter case, checksummed. */
function address(value: unknown): Address | undefined {
  if (typeof value !== "string") return undefined;
  const known = CHECKSUMMED.get(value);
  if (known !== undefined) return known;
  if (!isAddress(value, { strict: false })) return undefined;
  const checksummed = getAddress(value);
  if (CHECKSUMMED.size >= MAX_CHECKSUMMED) CHECKSUMMED.clear();
  CHECKSUMMED.set(value, checksummed);
  return checksummed;
}

/** `uintStringSchema`: digits, below 2^256. */
function isUintString(value: unknown): value is string {
  return typeof value === "string" && DIGITS.test(value) && BigInt(value) <= MAX_UINT256;
}

/** An optional string field (absent, or a string). */
function optionalString(value: unknown): boolean {
  return value === undefined || typeof value === "string";
}

/** An optional positive safe integer (`z.number().int().positive().optional()`). */
function optionalPositiveInt(value: unknown): boolean {
  return value === undefined || (typeof value === "number" && Number.isSafeInteger(value) && value > 0);
}

/** `unixSecondsSchema`: a non-negative safe integer, or a string of digits, below 2^256; as bigint. */
function unixSeconds(value: unknown): bigint | undefined {
  let seconds: bigint;
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value) || value < 0) return undefined;
    seconds = BigInt(value);
  } else if (typeof value === "string" && DIGITS.test(value)) {
    seconds = BigInt(value);
  } else return undefined;
  return seconds <= MAX_UINT256 ? seconds : undefined;
}

/** The signed fields of an EIP-3009 authorization (`authorizationFields` of schemas.ts). */
export type FastAuthorization = Omit<Authorization, "signature">;

function authorizationFields(o: JsonObject): FastAuthorization | undefined {
  const from = address(o.from);
  const to = address(o.to);
  const raw = o.value;
  const value = typeof raw === "string" ? raw : typeof raw === "number" ? String(raw) : undefined;
  const validAfter = unixSeconds(o.validAfter);
  const validBefore = unixSeconds(o.validBefore);
  const nonce = o.nonce;
  if (!from || !to || value === undefined || validAfter === undefined || validBefore === undefined) return undefined;
  if (typeof nonce !== "string" || !NONCE.test(nonce)) return undefined;
  return { from, to, value, validAfter, validBefore, nonce: nonce as Hex };
}

function signature(value: unknown): Hex | undefined {
  return typeof value === "string" && HEX_BYTES.test(value) ? (value as Hex) : undefined;
}

/** What `paymentHeaderSchema` gives (both layouts), as `decodePaymentHeader` reads it. */
export interface FastPaymentHeader {
  scheme: string;
  network: string;
  /** `payload.asset` of the Cronos layout (its key present, undefined, in Coinbase's). */
  asset: string | undefined;
  authorization: FastAuthorization;
  signature: Hex;
}

/** `paymentHeaderSchema` on a decoded `X-PAYMENT` JSON, for inputs it vouches for. */
export function fastPaymentHeader(json: unknown): FastPaymentHeader | undefined {
  if (!isObject(json) || json.x402Version !== 1) return undefined;
  const { scheme, network, payload } = json;
  if (typeof scheme !== "string" || typeof network !== "string" || !isObject(payload)) return undefined;
  const signed = signature(payload.signature);
  if (signed === undefined) return undefined;
  if ("authorization" in payload) {
    if (!isObject(payload.authorization)) return undefined;
    const authorization = authorizationFields(payload.authorization);
    return authorization && { scheme, network, asset: undefined, authorization, signature: signed };
  }
  const asset = payload.asset;
  if (!optionalString(asset)) return undefined;
  const authorization = authorizationFields(payload);
  return authorization && { scheme, network, asset: asset as string | undefined, authorization, signature: signed };
}

/** The requirements' fields verify uses, from either dialect. */
export interface FastRequirements {
  scheme: string;
  network: string;
  payTo: Address;
  asset: string;
  amount: string;
}

/** `facilitatorRequestSchema` (the Cronos body, x402Version 1), for inputs it vouches for. */
export function fastCronosRequest(body: unknown): { paymentHeader: string; requirements: FastRequirements } | undefined {
  if (!isObject(body) || typeof body.x402Version !== "number") return undefined;
  const { paymentHeader, paymentRequirements: r } = body;
  if (typeof paymentHeader !== "string" || paymentHeader.length === 0 || !isObject(r)) return undefined;
  const { scheme, network, asset, maxAmountRequired } = r;
  const payTo = address(r.payTo);
  if (typeof scheme !== "string" || typeof network !== "string" || !payTo || typeof asset !== "string" || !isUintString(maxAmountRequired)) return undefined;
  if (!optionalString(r.description) || !optionalString(r.mimeType) || !optionalString(r.resource) || !optionalPositiveInt(r.maxTimeoutSeconds)) return undefined;
  return { paymentHeader, requirements: { scheme, network, payTo, asset, amount: maxAmountRequired } };
}

/** `v2FacilitatorRequestSchema` (x402Version 2), for inputs it vouches for. */
export function fastV2Request(body: unknown): { paymentPayload: JsonObject; requirements: FastRequirements } | undefined {
  if (!isObject(body) || body.x402Version !== 2) return undefined;
  const { paymentPayload, paymentRequirements: r } = body;
  if (!isObject(paymentPayload) || !isObject(r)) return undefined;
  const { scheme, network, asset, amount, extra } = r;
  const payTo = address(r.payTo);
  if (typeof scheme !== "string" || typeof network !== "string" || typeof asset !== "string" || !isUintString(amount) || !payTo) return undefined;
  if (!optionalPositiveInt(r.maxTimeoutSeconds) || !(extra === undefined || isObject(extra))) return undefined;
  return { paymentPayload, requirements: { scheme, network, payTo, asset, amount } };
}

/** What `v2PaymentPayloadSchema` gives of an x402 v2 payment, as the codec reads it. */
export interface FastV2Payment {
  accepted: { scheme: string; network: string; asset: string | undefined };
  authorization: FastAuthorization;
  signature: Hex;
  extensions: JsonObject | undefined;
}

/** `v2PaymentPayloadSchema`, for inputs it vouches for. */
export function fastV2Payment(payment: JsonObject): FastV2Payment | undefined {
  if (payment.x402Version !== 2) return undefined;
  const { resource, accepted, payload, extensions } = payment;
  if (resource !== undefined && !(isObject(resource) && typeof resource.url === "string" && optionalString(resource.description) && optionalString(resource.mimeType))) {
    return undefined;
  }
  if (!isObject(accepted) || typeof accepted.scheme !== "string" || typeof accepted.network !== "string" || !optionalString(accepted.asset)) return undefined;
  if (!isObject(payload) || !isObject(payload.authorization) || !(extensions === undefined || isObject(extensions))) return undefined;
  const signed = signature(payload.signature);
  const authorization = authorizationFields(payload.authorization);
  if (signed === undefined || !authorization) return undefined;
  return {
    accepted: { scheme: accepted.scheme, network: accepted.network, asset: accepted.asset as string | undefined },
    authorization,
    signature: signed,
    extensions,
  };
}
