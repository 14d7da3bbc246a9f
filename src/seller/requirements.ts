// A route's payment requirements: built from options, parsed, declared for discovery.
import type { Request } from "express";
import { canonicalNetwork, NETWORKS } from "../protocol/networks.js";
import { EXACT_SCHEME } from "../protocol/reasons.js";
import { parsePaymentRequirements, type PaymentRequirements, type PaymentRequirementsInput } from "../protocol/schemas.js";
import { outputSchemaOf, type DiscoveryDeclaration } from "../protocol/bazaar.js";
import { messageOf } from "./values.js";
import { KitErrorOf } from "../protocol/errors.js";

/** A seller configuration mistake: requirements that are not valid payment requirements. */
export class InvalidRequirementsError extends KitErrorOf("InvalidRequirementsError", "invalid_requirements") {}

/** Input of {@link paymentRequirements}. */
export interface PaymentRequirementsOptions {
  /** `cronos-testnet`, `cronos-mainnet` or its alias `cronos` (kept as written), or another network with `asset`. */
  network: string;
  /** The seller's address that receives the payment. */
  payTo: string;
  /** Price in the token's base units (USDC.e has 6 decimals: `"1000000"` or `1_000_000n` is 1 USDC.e). */
  amount: string | bigint;
  /** Token address. Default: the network's USDC.e from `NETWORKS`. */
  asset?: string;
  /** Default `"X402 payment request"` (the official client's). */
  description?: string;
  /** MIME type of the paid content. Default `"application/json"`. */
  mimeType?: string;
  /** Default 300. */
  maxTimeoutSeconds?: number;
  /** URL of the paid resource. Omitted when not given. */
  resource?: string;
  /** Scheme-specific extra data, passed through. Omitted when not given. */
  extra?: Record<string, unknown>;
  /**
   * Lists the route in the facilitator's discovery catalog (x402 `bazaar`) once it is paid: sent as the
   * requirements' `outputSchema` (`input.discoverable: true`), which the Cronos wire format carries and does
   * not enforce, and as the `bazaar` extension of the x402 v2 offer. Without `resource`, the middleware names
   * the request's URL. `requirePayment(…, { discovery })` does the same for requirements given as they are.
   */
  discovery?: DiscoveryDeclaration;
}

export type { DiscoveryDeclaration };

/** Defaults of {@link paymentRequirements}, the official client's. */
export const REQUIREMENTS_DEFAULTS = {
  description: "X402 payment request",
  mimeType: "application/json",
  maxTimeoutSeconds: 300,
} as const;

/**
 * Builds the wire payment requirements:
 * `{scheme: "exact", network, payTo, asset, maxAmountRequired, description, mimeType, maxTimeoutSeconds, resource?, extra?}`.
 * `payTo` is checksummed.
 *
 * @throws {InvalidRequirementsError} on an invalid address or amount, or an unknown network without `asset`.
 */
export function paymentRequirements(options: PaymentRequirementsOptions): PaymentRequirements {
  const canonical = canonicalNetwork(options.network);
  const asset = options.asset ?? (canonical ? NETWORKS[canonical].token : undefined);
  if (asset === undefined) {
    throw new InvalidRequirementsError(`unknown network "${options.network}": pass the token address as \`asset\``);
  }
  if (typeof options.amount === "bigint" && options.amount < 0n) {
    throw new InvalidRequirementsError(`amount must not be negative, got ${options.amount}`);
  }
  return parseRequirements({
    scheme: EXACT_SCHEME,
    network: options.network,
    payTo: options.payTo,
    asset,
    maxAmountRequired: String(options.amount),
    description: options.description ?? REQUIREMENTS_DEFAULTS.description,
    mimeType: options.mimeType ?? REQUIREMENTS_DEFAULTS.mimeType,
    maxTimeoutSeconds: options.maxTimeoutSeconds ?? REQUIREMENTS_DEFAULTS.maxTimeoutSeconds,
    ...(options.resource === undefined ? {} : { resource: options.resource }),
    ...(options.extra === undefined ? {} : { extra: options.extra }),
    ...(options.discovery === undefined ? {} : { outputSchema: discoveryOutputSchema(options.discovery) }),
  });
}

/** The `outputSchema` that declares a route for discovery (x402 v1's form, which the Cronos dialect carries). */
export function discoveryOutputSchema(discovery: DiscoveryDeclaration): Record<string, unknown> {
  try {
    return outputSchemaOf(discovery);
  } catch (error) {
    throw new InvalidRequirementsError(`invalid discovery declaration: ${messageOf(error)}`);
  }
}

/** Whether requirements declare their route for discovery (`outputSchema.input.discoverable`). */
export function declaresDiscovery(requirements: PaymentRequirements): boolean {
  const schema = (requirements as { outputSchema?: { input?: { discoverable?: unknown } } }).outputSchema;
  return typeof schema === "object" && schema !== null && schema.input?.discoverable === true;
}

/** Parses requirements, throwing {@link InvalidRequirementsError} naming the problem. */
export function parseRequirements(input: unknown): PaymentRequirements {
  const parsed = parsePaymentRequirements(input);
  if (!parsed.ok) throw new InvalidRequirementsError(`invalid payment requirements: ${parsed.problem}`);
  return parsed.requirements;
}

/** Requirements for a route: fixed, or computed per request (e.g. a price that depends on the query). */
export type RequirementsSource =
  | PaymentRequirementsInput
  | ((req: Request) => PaymentRequirementsInput | Promise<PaymentRequirementsInput>);

/** Requirements that do not depend on the request. */
export function constant(requirements: PaymentRequirements): () => Promise<PaymentRequirements> {
  return async () => requirements;
}
