import type { Hex } from "viem";
import { fastPaymentHeader } from "./fast-parse.js";
import { paymentHeaderSchema, describeZodError, type Authorization, type PaymentPayload } from "./schemas.js";

type AuthorizationFields = Omit<Authorization, "signature">;

/** The outcome of decoding an `X-PAYMENT` value. */
export type DecodeHeaderResult =
  | { ok: true; payload: PaymentPayload }
  | { ok: false; kind: "base64" }
  | { ok: false; kind: "shape"; detail: string };

/** 1 for each character of the standard base64 alphabet (padding apart). */
const ALPHABET = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") ALPHABET[c.charCodeAt(0)] = 1;

/** Whether `text` is standard base64 letters followed by at most two `=` (what `/^[A-Za-z0-9+/]*={0,2}$/` says, in one pass). */
function isBase64(text: string): boolean {
  let end = text.length;
  if (end > 0 && text.charCodeAt(end - 1) === 61) end--;
  if (end > 0 && text.charCodeAt(end - 1) === 61) end--;
  for (let i = 0; i < end; i++) {
    const code = text.charCodeAt(i);
    if (code >= 128 || ALPHABET[code] === 0) return false;
  }
  return true;
}

/** Standard base64 (with padding) of the UTF-8 JSON of `value`: how every x402 header carries JSON. */
export function encodeBase64Json(value: unknown): string {
  return Buffer.from(JSON.stringify(value), "utf8").toString("base64");
}

/** Reads a base64 JSON header value (standard alphabet, padding optional); `ok: false` when it is not one. */
export function decodeBase64Json(value: string): { ok: true; json: unknown } | { ok: false } {
  const text = value.trim();
  if (text.length === 0 || text.length % 4 === 1 || !isBase64(text)) return { ok: false };
  try {
    return { ok: true, json: JSON.parse(Buffer.from(text, "base64").toString("utf8")) };
  } catch {
    return { ok: false };
  }
}

/**
 * Decodes a base64 `X-PAYMENT` value (standard alphabet, padding optional) into a payment payload
 * in either the Cronos flat layout or Coinbase's nested one.
 */
export function decodePaymentHeader(header: string): DecodeHeaderResult {
  const decoded = decodeBase64Json(header);
  if (!decoded.ok) return { ok: false, kind: "base64" };
  // The common case checked by hand (the same result); anything else by the schema, which words the error.
  const fast = fastPaymentHeader(decoded.json);
  if (fast) {
    const { scheme, network, asset, authorization, signature } = fast;
    return { ok: true, payload: { x402Version: 1, scheme, network, asset, authorization: signedAuthorization(authorization, signature) } };
  }
  const parsed = paymentHeaderSchema.safeParse(decoded.json);
  if (!parsed.success) return { ok: false, kind: "shape", detail: describeZodError(parsed.error) };
  const { x402Version, scheme, network, payload } = parsed.data;
  const nested = "authorization" in payload ? (payload.authorization as AuthorizationFields) : undefined;
  const authorization: AuthorizationFields = nested ?? (payload as AuthorizationFields);
  const asset = nested ? undefined : (payload as { asset?: string }).asset;
  return {
    ok: true,
    payload: {
      x402Version,
      scheme,
      network,
      asset,
      authorization: signedAuthorization(authorization, payload.signature),
    },
  };
}

/** The authorization fields of a decoded payload (extra keys dropped) with their signature. */
export function signedAuthorization(fields: Omit<Authorization, "signature">, signature: Hex): Authorization {
  const { from, to, value, validAfter, validBefore, nonce } = fields;
  return { from, to, value, validAfter, validBefore, nonce, signature };
}

/** The fields the Cronos layout carries, in the order the official client writes them. */
export interface CronosHeaderFields {
  network: string;
  from: string;
  to: string;
  value: string;
  validAfter: number | bigint;
  validBefore: number | bigint;
  nonce: string;
  signature: string;
  asset: string;
}

/**
 * Encodes a payment header in the Cronos layout, byte for byte as the official client does:
 * `{x402Version, scheme, network, payload: {from, to, value, validAfter, validBefore, nonce, signature, asset}}`,
 * time bounds as JSON numbers, standard base64.
 */
export function encodePaymentHeader(fields: CronosHeaderFields): string {
  return encodeBase64Json({
    x402Version: 1,
    scheme: "exact",
    network: fields.network,
    payload: {
      from: fields.from,
      to: fields.to,
      value: fields.value,
      validAfter: Number(fields.validAfter),
      validBefore: Number(fields.validBefore),
      nonce: fields.nonce,
      signature: fields.signature,
      asset: fields.asset,
    },
  });
}
