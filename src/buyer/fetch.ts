import { SpanKind, type Span } from "@opentelemetry/api";
import { canonicalNetwork, NETWORK_NAMES, NETWORKS } from "../protocol/networks.js";
import { EXACT_SCHEME } from "../protocol/reasons.js";
import type { SettleResponse } from "../protocol/schemas.js";
import { networkOfAnyForm, X402V2Header, type V2SettleResponse } from "../protocol/x402v2.js";
import { globalTracer, inSpan, paymentAttributes } from "../telemetry/spans.js";
import { injectTraceHeaders } from "../telemetry/traceparent.js";
import { chooseOffer, PAYMENT_DIALECTS, signOffer, type Offer, type OfferTerms, type PaymentDialect } from "./offers.js";
import { decodePaymentResponse, decodeV2PaymentResponse, type PaymentSigner } from "./sign.js";

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
  /**
   * The dialects it pays in, in order of preference: `cronos` (`X-PAYMENT`), `x402v2` (`PAYMENT-SIGNATURE`).
   * Default both, Cronos first.
   */
  dialects?: readonly PaymentDialect[];
}

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

  function refusal(terms: OfferTerms): string | undefined {
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

  const pay = async (input: Parameters<typeof fetch>[0], init: RequestInit | undefined, span?: Span): Promise<Response> => {
    // A Request's body can be read once: keep a copy for the paid retry.
    const replay = input instanceof Request ? input.clone() : undefined;
    const first = await fetchImpl(input, span ? { ...init, headers: traced(init?.headers ?? replay?.headers) } : init);
    if (first.status !== 402) return first;

    const answer = { status: first.status, paymentRequired: first.headers.get(X402V2Header.paymentRequired), body: await first.text() };
    const offer = chooseOffer(answer, refusal, options.dialects ?? PAYMENT_DIALECTS);
    span?.setAttributes(paymentAttributes(offerTerms(offer)));
    const [name, value] = await signOffer(offer, { signer: options.signer, chainId: options.chainId, domain: options.domain });
    const headers = span ? traced(init?.headers ?? replay?.headers) : new Headers(init?.headers ?? replay?.headers);
    headers.set(name, value);
    return fetchImpl(replay ?? input, { ...init, headers });
  };

  return async (input, init) => {
    // With an OpenTelemetry SDK registered in this process: a span, whose `traceparent` both requests carry.
    const tracer = globalTracer();
    if (!tracer) return pay(input, init);
    return inSpan(tracer, BUYER_SPAN, { kind: SpanKind.CLIENT }, async (span) => {
      const response = await pay(input, init, span);
      span.setAttribute("http.response.status_code", response.status);
      return response;
    });
  };
}

/** The name of the buyer's span. */
export const BUYER_SPAN = "x402 buyer fetch";

/** `init`'s headers with the active span's `traceparent`. */
function traced(init: ConstructorParameters<typeof Headers>[0]): Headers {
  const headers = new Headers(init);
  injectTraceHeaders(headers);
  return headers;
}

/** What an offer asks, as a span shows it. */
function offerTerms(offer: Offer): { network: string; payee: string; value: string } {
  return offer.dialect === "cronos"
    ? { network: offer.requirements.network, payee: offer.requirements.payTo, value: offer.requirements.maxAmountRequired }
    : { network: offer.requirements.network, payee: offer.requirements.payTo, value: offer.requirements.amount };
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

