import { paymentHeaderSchema, describeZodError, type Authorization, type PaymentPayload } from "./schemas.js";

type AuthorizationFields = Omit<Authorization, "signature">;

/** The outcome of decoding an `X-PAYMENT` value. */
export type DecodeHeaderResult =
  | { ok: true; payload: PaymentPayload }
  | { ok: false; kind: "base64" }
  | { ok: false; kind: "shape"; detail: string };

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Decodes a base64 `X-PAYMENT` value (standard alphabet, padding optional) into a payment payload
 * in either the Cronos flat layout or Coinbase's nested one.
 */
export function decodePaymentHeader(header: string): DecodeHeaderResult {
  const text = header.trim();
  if (text.length === 0 || !BASE64.test(text) || text.length % 4 === 1) return { ok: false, kind: "base64" };
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(text, "base64").toString("utf8"));
  } catch {
    return { ok: false, kind: "base64" };
  }
  const parsed = paymentHeaderSchema.safeParse(json);
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
      authorization: {
        from: authorization.from,
        to: authorization.to,
        value: authorization.value,
        validAfter: authorization.validAfter,
        validBefore: authorization.validBefore,
        nonce: authorization.nonce,
        signature: payload.signature,
      },
    },
  };
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
  const json = JSON.stringify({
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
  return Buffer.from(json, "utf8").toString("base64");
}
