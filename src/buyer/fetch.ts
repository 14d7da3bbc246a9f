import { z } from "zod";
import { decodeBase64Json, encodeBase64Json } from "../protocol/header.js";
import { canonicalNetwork, NETWORK_NAMES, NETWORKS } from "../protocol/networks.js";
import { EXACT_SCHEME } from "../protocol/reasons.js";
import { parsePaymentRequirements, describeZodError, type PaymentRequirements, type SettleResponse } from "../protocol/schemas.js";
import {
  networkOfAnyForm,
  v2PaymentRequiredSchema,
  v2RequirementsSchema,
  X402V2Header,
  type V2PaymentRequirements,
  type V2Resource,
  type V2SettleResponse,
} from "../protocol/x402v2.js";
import { PaymentError } from "./errors.js";
import {
  createPaymentHeader,
  createV2PaymentPayload,
  decodePaymentResponse,
  decodeV2PaymentResponse,
  type PaymentSigner,
} from "./sign.js";

/** Options of {@link wrapFetchWithPayment}: who pays and what it is willing to pay. */
export interface PaymentFetchOptions {
  signer: PaymentSigner;
  /** The most a single request may cost, in the token's base units (1 USDC.e = 1_000_000n). */
  maxAmount: bigint;
  /** Networks it pays on. Default: `cronos-testnet` and `cronos-mainnet` (the alias `cronos` counts as mainnet). */
  networks?: readonly string[];
  /** Tokens it pays with (any letter case). Default: each allowed network's USDC.e from `NETWORKS`. */
  assets?: readonly string[];
  /** Overrides the EIP-712 chain id (e.g. a local chain with another id). Default: the network's. */
  chainId?: number;
  /** Overrides the token's EIP-712 name and version. Default: the network's. */
  domain?: { name: string; version: string };
}

/** Accepts both 402 layouts: the Cronos one (`paymentRequirements`) and the Coinbase one (`accepts`). */
const paymentRequiredBodySchema = z.looseObject({
  paymentRequirements: z.unknown().optional(),
  accepts: z.array(z.unknown(), { error: "must be a list" }).optional(),
});

/** One payable offer of a 402, in the dialect it came in. */
type Offer =
  | { dialect: "cronos"; requirements: PaymentRequirements }
  | { dialect: "x402v2"; raw: Record<string, unknown>; requirements: V2PaymentRequirements; resource?: V2Resource; extensions?: Record<string, unknown> };

/**
 * Wraps `fetch` so that a 402 answer is paid and the request retried once, in the dialect the seller offers.
 *
 * On a 402 it reads the Cronos body's requirements (`paymentRequirements`, then each of `accepts`), then
 * the x402 v2 offers of a `PAYMENT-REQUIRED` header (e.g. an `@x402/express` seller), and takes the first
 * it is willing to pay (scheme `exact`, an allowed network and asset, an amount `<= maxAmount`). A Cronos
 * offer is paid with `X-PAYMENT` ({@link createPaymentHeader}), a v2 one with `PAYMENT-SIGNATURE`
 * ({@link createV2PaymentPayload}). The second answer is returned whatever it is (a second 402 is not
 * paid again). Read the settlement with {@link getPaymentResponse} or {@link getV2PaymentResponse}.
 *
 * A request whose body is a one-shot stream cannot be sent twice; use a string, buffer or `Request`.
 *
 * @throws {PaymentError} `malformed_402` (no readable requirements in body nor header),
 *   `no_acceptable_requirements` (`details` lists why each was refused), or the signer's errors.
 */
export function wrapFetchWithPayment(fetchImpl: typeof fetch, options: PaymentFetchOptions): typeof fetch {
  const networks = new Set((options.networks ?? NETWORK_NAMES).map(normaliseNetwork));
  const assets = options.assets?.map((asset) => asset.toLowerCase());

  function refusal(terms: { scheme: string; network: string; asset: string; amount: string; amountName: string }): string | undefined {
    if (terms.scheme !== EXACT_SCHEME) return `scheme "${terms.scheme}" is not "${EXACT_SCHEME}"`;
    const network = normaliseNetwork(terms.network);
    if (!networks.has(network)) return `network "${terms.network}" is not allowed`;
    const canonical = canonicalNetwork(network);
    const allowedAssets = assets ?? (canonical ? [NETWORKS[canonical].token.toLowerCase()] : []);
    if (!allowedAssets.includes(terms.asset.toLowerCase())) {
      return `asset ${terms.asset} is not allowed on ${terms.network}`;
    }
    if (BigInt(terms.amount) > options.maxAmount) {
      return `${terms.amountName} ${terms.amount} exceeds maxAmount ${options.maxAmount}`;
    }
    return undefined;
  }

  /** The offers of a 402: the Cronos body's, then the `PAYMENT-REQUIRED` header's. */
  function offersOf(response: Response, text: string): unknown[] {
    const header = response.headers.get(X402V2Header.paymentRequired);
    const v2 = header === null ? undefined : v2OffersOf(header);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      if (v2) return v2;
      throw new PaymentError("malformed_402", "the 402 answer is not JSON", { status: response.status, details: text.slice(0, 200) });
    }
    const body = paymentRequiredBodySchema.safeParse(json);
    if (!body.success) {
      if (v2) return v2;
      throw new PaymentError("malformed_402", "the 402 answer is malformed", {
        status: response.status,
        details: describeZodError(body.error),
      });
    }
    const { paymentRequirements, accepts } = body.data;
    return [...(paymentRequirements === undefined ? [] : [paymentRequirements]), ...(accepts ?? []), ...(v2 ?? [])];
  }

  async function choose(response: Response): Promise<Offer> {
    const candidates = offersOf(response, await response.text());
    if (candidates.length === 0) {
      throw new PaymentError("malformed_402", "the 402 answer holds no payment requirements", { status: response.status });
    }
    const reasons: string[] = [];
    for (const [index, candidate] of candidates.entries()) {
      let reason: string | undefined;
      if (candidate instanceof V2Offer) {
        const parsed = v2RequirementsSchema.safeParse(candidate.raw);
        if (!parsed.success) reason = `invalid: ${describeZodError(parsed.error)}`;
        else {
          const terms = parsed.data;
          reason = refusal({ ...terms, amountName: "amount" });
          if (reason === undefined) return { dialect: "x402v2", raw: candidate.raw, requirements: terms, resource: candidate.resource, extensions: candidate.extensions };
        }
      } else {
        const parsed = parsePaymentRequirements(candidate);
        if (!parsed.ok) reason = `invalid: ${parsed.problem}`;
        else {
          const terms = parsed.requirements;
          reason = refusal({ ...terms, amount: terms.maxAmountRequired, amountName: "maxAmountRequired" });
          if (reason === undefined) return { dialect: "cronos", requirements: terms };
        }
      }
      reasons.push(`#${index}: ${reason}`);
    }
    throw new PaymentError("no_acceptable_requirements", "no acceptable payment requirements in the 402 answer", {
      status: response.status,
      details: reasons.join("; "),
    });
  }

  async function paymentHeaders(offer: Offer): Promise<[string, string]> {
    const signing = { signer: options.signer, chainId: options.chainId, domain: options.domain };
    if (offer.dialect === "cronos") {
      return ["X-PAYMENT", await createPaymentHeader({ ...signing, requirements: offer.requirements })];
    }
    // The 402's extensions are echoed (an id is added where the seller declares payment-identifier).
    const payment = await createV2PaymentPayload({ ...signing, requirements: offer.raw, resource: offer.resource, ...(offer.extensions ? { extensions: offer.extensions } : {}) });
    return [X402V2Header.paymentSignature, encodeBase64Json(payment)];
  }

  return async (input, init) => {
    // A Request's body can be read once: keep a copy for the paid retry.
    const replay = input instanceof Request ? input.clone() : undefined;
    const first = await fetchImpl(input, init);
    if (first.status !== 402) return first;

    const [name, value] = await paymentHeaders(await choose(first));
    const headers = new Headers(init?.headers ?? replay?.headers);
    headers.set(name, value);
    return fetchImpl(replay ?? input, { ...init, headers });
  };
}

/** An offer of a `PAYMENT-REQUIRED` header, told apart from the Cronos body's. */
class V2Offer {
  constructor(
    readonly raw: Record<string, unknown>,
    readonly resource: V2Resource | undefined,
    readonly extensions: Record<string, unknown> | undefined,
  ) {}
}

/** The offers in a `PAYMENT-REQUIRED` value; `undefined` when it is not one (the body may still be). */
function v2OffersOf(header: string): V2Offer[] | undefined {
  const decoded = decodeBase64Json(header);
  const parsed = decoded.ok ? v2PaymentRequiredSchema.safeParse(decoded.json) : undefined;
  if (!parsed?.success) return undefined;
  const { resource, extensions } = parsed.data;
  return parsed.data.accepts.map((entry) => new V2Offer(isRecord(entry) ? entry : { invalid: entry }, resource, extensions));
}

/**
 * The settlement a paid answer carries in `X-PAYMENT-RESPONSE`, or `undefined` when there is none.
 *
 * @throws {PaymentError} `malformed_payment_response` when the header is present but unreadable.
 */
export function getPaymentResponse(response: Response): SettleResponse | undefined {
  const value = response.headers.get("X-PAYMENT-RESPONSE");
  return value === null ? undefined : decodePaymentResponse(value);
}

/**
 * The x402 v2 settlement a paid answer carries in `PAYMENT-RESPONSE`, or `undefined` when there is none.
 *
 * @throws {PaymentError} `malformed_payment_response` when the header is present but unreadable.
 */
export function getV2PaymentResponse(response: Response): V2SettleResponse | undefined {
  const value = response.headers.get(X402V2Header.paymentResponse);
  return value === null ? undefined : decodeV2PaymentResponse(value);
}

function normaliseNetwork(network: string): string {
  return networkOfAnyForm(network) ?? network;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
