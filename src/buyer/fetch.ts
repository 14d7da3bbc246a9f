import { z } from "zod";
import { canonicalNetwork, NETWORK_NAMES, NETWORKS } from "../protocol/networks.js";
import { EXACT_SCHEME } from "../protocol/reasons.js";
import { parsePaymentRequirements, describeZodError, type PaymentRequirements, type SettleResponse } from "../protocol/schemas.js";
import { PaymentError } from "./errors.js";
import { createPaymentHeader, decodePaymentResponse, type PaymentSigner } from "./sign.js";

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

/**
 * Wraps `fetch` so that a 402 answer is paid and the request retried once with `X-PAYMENT`.
 *
 * On a 402 it reads the body's requirements (`paymentRequirements`, then each of `accepts`), takes the
 * first it is willing to pay (scheme `exact`, an allowed network and asset, `maxAmountRequired <= maxAmount`),
 * signs it with {@link createPaymentHeader} and sends the request again. The second answer is returned
 * whatever it is (a second 402 is not paid again). Read the settlement with {@link getPaymentResponse}.
 *
 * A request whose body is a one-shot stream cannot be sent twice; use a string, buffer or `Request`.
 *
 * @throws {PaymentError} `malformed_402` (body not JSON or without requirements),
 *   `no_acceptable_requirements` (`details` lists why each was refused), or the signer's errors.
 */
export function wrapFetchWithPayment(fetchImpl: typeof fetch, options: PaymentFetchOptions): typeof fetch {
  const networks = new Set((options.networks ?? NETWORK_NAMES).map(normaliseNetwork));
  const assets = options.assets?.map((asset) => asset.toLowerCase());

  function refusal(requirements: PaymentRequirements): string | undefined {
    if (requirements.scheme !== EXACT_SCHEME) return `scheme "${requirements.scheme}" is not "${EXACT_SCHEME}"`;
    const network = normaliseNetwork(requirements.network);
    if (!networks.has(network)) return `network "${requirements.network}" is not allowed`;
    const canonical = canonicalNetwork(network);
    const allowedAssets = assets ?? (canonical ? [NETWORKS[canonical].token.toLowerCase()] : []);
    if (!allowedAssets.includes(requirements.asset.toLowerCase())) {
      return `asset ${requirements.asset} is not allowed on ${requirements.network}`;
    }
    if (BigInt(requirements.maxAmountRequired) > options.maxAmount) {
      return `maxAmountRequired ${requirements.maxAmountRequired} exceeds maxAmount ${options.maxAmount}`;
    }
    return undefined;
  }

  async function choose(response: Response): Promise<PaymentRequirements> {
    const text = await response.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new PaymentError("malformed_402", "the 402 answer is not JSON", { status: response.status, details: text.slice(0, 200) });
    }
    const body = paymentRequiredBodySchema.safeParse(json);
    if (!body.success) {
      throw new PaymentError("malformed_402", "the 402 answer is malformed", {
        status: response.status,
        details: describeZodError(body.error),
      });
    }
    const { paymentRequirements, accepts } = body.data;
    const candidates = [...(paymentRequirements === undefined ? [] : [paymentRequirements]), ...(accepts ?? [])];
    if (candidates.length === 0) {
      throw new PaymentError("malformed_402", "the 402 answer holds no payment requirements", { status: response.status });
    }
    const reasons: string[] = [];
    for (const [index, candidate] of candidates.entries()) {
      const parsed = parsePaymentRequirements(candidate);
      const reason = parsed.ok ? refusal(parsed.requirements) : `invalid: ${parsed.problem}`;
      if (parsed.ok && reason === undefined) return parsed.requirements;
      reasons.push(`#${index}: ${reason}`);
    }
    throw new PaymentError("no_acceptable_requirements", "no acceptable payment requirements in the 402 answer", {
      status: response.status,
      details: reasons.join("; "),
    });
  }

  return async (input, init) => {
    // A Request's body can be read once: keep a copy for the paid retry.
    const replay = input instanceof Request ? input.clone() : undefined;
    const first = await fetchImpl(input, init);
    if (first.status !== 402) return first;

    const requirements = await choose(first);
    const paymentHeader = await createPaymentHeader({
      signer: options.signer,
      requirements,
      chainId: options.chainId,
      domain: options.domain,
    });
    const headers = new Headers(init?.headers ?? replay?.headers);
    headers.set("X-PAYMENT", paymentHeader);
    return fetchImpl(replay ?? input, { ...init, headers });
  };
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

function normaliseNetwork(network: string): string {
  return canonicalNetwork(network) ?? network;
}
