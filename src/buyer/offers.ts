// A 402 answer read as the offers it makes (the Cronos body's requirements, the x402 v2 PAYMENT-REQUIRED
// header's), one chosen, and signed in its dialect: what the paying fetch and the `cronos-x402 sign` / `pay`
// commands share.
import { z } from "zod";
import { decodeBase64Json, encodeBase64Json } from "../protocol/header.js";
import { parsePaymentRequirements, describeZodError, type PaymentRequirements } from "../protocol/schemas.js";
import {
  v2PaymentRequiredSchema,
  v2RequirementsSchema,
  X402V2Header,
  type V2PaymentRequirements,
  type V2Resource,
} from "../protocol/x402v2.js";
import { PaymentError } from "./errors.js";
import { createPaymentHeader, createV2PaymentPayload, type PaymentSigner } from "./sign.js";

/** The two ways a payment travels: the Cronos `X-PAYMENT` and the x402 v2 `PAYMENT-SIGNATURE`. */
export type PaymentDialect = "cronos" | "x402v2";
export const PAYMENT_DIALECTS: readonly PaymentDialect[] = ["cronos", "x402v2"];

/** The header each dialect's payment is sent in. */
export const PAYMENT_HEADER: Readonly<Record<PaymentDialect, string>> = { cronos: "X-PAYMENT", x402v2: X402V2Header.paymentSignature };

/** One payable offer of a 402, in the dialect it came in. */
export type Offer =
  | { dialect: "cronos"; requirements: PaymentRequirements }
  | { dialect: "x402v2"; raw: Record<string, unknown>; requirements: V2PaymentRequirements; resource?: V2Resource; extensions?: Record<string, unknown> };

/** What an offer asks, whichever dialect: what a buyer's policy judges. */
export interface OfferTerms {
  scheme: string;
  network: string;
  asset: string;
  amount: string;
  /** The field the amount is read from: `maxAmountRequired` (Cronos) or `amount` (x402 v2). */
  amountName: string;
}

/** A 402 answer as read: its status, its `PAYMENT-REQUIRED` header (or null) and its body text. */
export interface PaymentRequiredAnswer {
  status: number;
  paymentRequired: string | null;
  body: string;
}

/** Accepts both 402 layouts: the Cronos one (`paymentRequirements`) and the Coinbase one (`accepts`). */
const paymentRequiredBodySchema = z.looseObject({
  paymentRequirements: z.unknown().optional(),
  accepts: z.array(z.unknown(), { error: "must be a list" }).optional(),
});

/** An offer of a `PAYMENT-REQUIRED` header, told apart from the Cronos body's. */
class V2Offer {
  constructor(
    readonly raw: Record<string, unknown>,
    readonly resource: V2Resource | undefined,
    readonly extensions: Record<string, unknown> | undefined,
  ) {}
}

/** The offers in a `PAYMENT-REQUIRED` value (base64 JSON); `undefined` when it is not one (the body may still be). */
function v2OffersOf(header: string): V2Offer[] | undefined {
  const decoded = decodeBase64Json(header);
  return decoded.ok ? v2OffersOfJson(decoded.json) : undefined;
}

/** The offers of a decoded x402 v2 `PaymentRequired` (`{x402Version: 2, accepts, resource?, extensions?}`). */
function v2OffersOfJson(json: unknown): V2Offer[] | undefined {
  const parsed = v2PaymentRequiredSchema.safeParse(json);
  if (!parsed.success) return undefined;
  const { resource, extensions } = parsed.data;
  return parsed.data.accepts.map((entry) => new V2Offer(isRecord(entry) ? entry : { invalid: entry }, resource, extensions));
}

/**
 * The candidate offers of a 402: the Cronos body's (`paymentRequirements`, then each of `accepts`), then
 * the `PAYMENT-REQUIRED` header's. A body that is itself an x402 v2 `PaymentRequired` (`x402Version: 2`)
 * counts as the header's.
 *
 * @throws {PaymentError} `malformed_402` when neither body nor header holds requirements.
 */
function candidatesOf(answer: PaymentRequiredAnswer): unknown[] {
  const v2 = answer.paymentRequired === null ? undefined : v2OffersOf(answer.paymentRequired);
  let json: unknown;
  try {
    json = JSON.parse(answer.body);
  } catch {
    if (v2) return v2;
    throw new PaymentError("malformed_402", "the 402 answer is not JSON", { status: answer.status, details: answer.body.slice(0, 200) });
  }
  if (isRecord(json) && json.x402Version === 2) {
    const offers = v2OffersOfJson(json);
    if (offers) return [...offers, ...(v2 ?? [])];
  }
  const body = paymentRequiredBodySchema.safeParse(json);
  if (!body.success) {
    if (v2) return v2;
    throw new PaymentError("malformed_402", "the 402 answer is malformed", { status: answer.status, details: describeZodError(body.error) });
  }
  const { paymentRequirements, accepts } = body.data;
  return [...(paymentRequirements === undefined ? [] : [paymentRequirements]), ...(accepts ?? []), ...(v2 ?? [])];
}

/**
 * A 402 answer as text: `curl -si` output (status line, headers, body: the `PAYMENT-REQUIRED`
 * header and the JSON body are read), a JSON body alone (Cronos `{paymentRequirements, accepts}`, or an x402
 * v2 `PaymentRequired`), or a `PAYMENT-REQUIRED` value alone (base64).
 */
export function readPaymentRequired(text: string): PaymentRequiredAnswer {
  const trimmed = text.replace(/^\uFEFF/, "").trim();
  if (/^HTTP\/\d/.test(trimmed)) {
    // The last head (a 100 Continue comes first), then its body.
    let rest = trimmed;
    let head = "";
    while (/^HTTP\/\d/.test(rest)) {
      const end = rest.search(/\r?\n\r?\n/);
      head = end < 0 ? rest : rest.slice(0, end);
      rest = end < 0 ? "" : rest.slice(end).replace(/^\r?\n\r?\n/, "");
    }
    const lines = head.split(/\r?\n/);
    const status = Number(/^HTTP\/[\d.]+ (\d{3})/.exec(lines[0]!)?.[1] ?? 0);
    const wanted = X402V2Header.paymentRequired.toLowerCase();
    const header = lines.slice(1).find((line) => line.slice(0, line.indexOf(":")).trim().toLowerCase() === wanted);
    return { status, paymentRequired: header === undefined ? null : header.slice(header.indexOf(":") + 1).trim(), body: rest };
  }
  if (trimmed.startsWith("{")) return { status: 402, paymentRequired: null, body: trimmed };
  if (!decodeBase64Json(trimmed).ok) throw new PaymentError("malformed_402", "the 402 answer is neither JSON, `curl -si` output nor a PAYMENT-REQUIRED value (base64 JSON)");
  return { status: 402, paymentRequired: trimmed, body: "" };
}

/**
 * The first offer of a 402 that `refusal` finds nothing against (in the order of `dialects`, default
 * Cronos then x402 v2; within one, the order of {@link candidatesOf}).
 *
 * @throws {PaymentError} `malformed_402` (no readable requirements), `no_acceptable_requirements`
 *   (`details` lists why each was refused).
 */
export function chooseOffer(
  answer: PaymentRequiredAnswer,
  refusal: (terms: OfferTerms, dialect: PaymentDialect) => string | undefined,
  dialects: readonly PaymentDialect[] = PAYMENT_DIALECTS,
): Offer {
  const candidates = candidatesOf(answer);
  if (candidates.length === 0) {
    throw new PaymentError("malformed_402", "the 402 answer holds no payment requirements", { status: answer.status });
  }
  const reasons: string[] = [];
  for (const dialect of dialects) {
    for (const [index, candidate] of candidates.entries()) {
      if ((candidate instanceof V2Offer ? "x402v2" : "cronos") !== dialect) continue;
      let reason: string | undefined;
      if (candidate instanceof V2Offer) {
        const parsed = v2RequirementsSchema.safeParse(candidate.raw);
        if (!parsed.success) reason = `invalid: ${describeZodError(parsed.error)}`;
        else {
          const terms = parsed.data;
          reason = refusal({ ...terms, amountName: "amount" }, dialect);
          if (reason === undefined) return { dialect: "x402v2", raw: candidate.raw, requirements: terms, resource: candidate.resource, extensions: candidate.extensions };
        }
      } else {
        const parsed = parsePaymentRequirements(candidate);
        if (!parsed.ok) reason = `invalid: ${parsed.problem}`;
        else {
          const terms = parsed.requirements;
          reason = refusal({ ...terms, amount: terms.maxAmountRequired, amountName: "maxAmountRequired" }, dialect);
          if (reason === undefined) return { dialect: "cronos", requirements: terms };
        }
      }
      reasons.push(`#${index}: ${reason}`);
    }
  }
  if (reasons.length === 0) {
    throw new PaymentError("no_acceptable_requirements", `the 402 answer offers nothing in ${dialects.join(" or ")}`, { status: answer.status });
  }
  throw new PaymentError("no_acceptable_requirements", "no acceptable payment requirements in the 402 answer", { status: answer.status, details: reasons.join("; ") });
}

/** How an offer is signed: who signs, and the EIP-712 and validity parameters of the signers. */
export interface OfferSigning {
  signer: PaymentSigner;
  chainId?: number;
  domain?: { name: string; version: string };
  validAfter?: number | bigint;
  validBefore?: number | bigint;
  nonce?: `0x${string}`;
  now?: number;
}

/**
 * Signs an offer in its dialect: the header to send and its value (`X-PAYMENT` with the Cronos layout,
 * `PAYMENT-SIGNATURE` with the x402 v2 payment, whose `accepted` echoes the offer and whose extensions echo
 * the 402's, with a payment id added where `payment-identifier` is declared).
 */
export async function signOffer(offer: Offer, signing: OfferSigning): Promise<[string, string]> {
  if (offer.dialect === "cronos") {
    return [PAYMENT_HEADER.cronos, await createPaymentHeader({ ...signing, requirements: offer.requirements })];
  }
  const payment = await createV2PaymentPayload({ ...signing, requirements: offer.raw, resource: offer.resource, ...(offer.extensions ? { extensions: offer.extensions } : {}) });
  return [PAYMENT_HEADER.x402v2, encodeBase64Json(payment)];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
