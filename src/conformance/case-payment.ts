// What a refusal case builds its payment from, and the tools it builds with: signing, tampering with a header, requirements.
import type { Address, Hex, LocalAccount } from "viem";
import { createPaymentHeader, type CreatePaymentHeaderParameters } from "../buyer/sign.js";
import { EXACT_SCHEME } from "../protocol/reasons.js";
import type { PaymentRequirements } from "../protocol/schemas.js";

/** What a case builds its payment from. */
export interface CaseContext {
  /** The requirements the payment is judged against: what the seller asks (price, payTo, asset, network). */
  requirements: PaymentRequirements;
  /** Signs the payment: a funded buyer, or a fresh key where funds do not matter. */
  signer: LocalAccount;
  /** The EIP-712 domain of the network's token, and its chain id. */
  chainId: number;
  domain: { name: string; version: string };
  /** The chain's clock (unix seconds), or the wall clock when no RPC was given. */
  now: bigint;
  /** A nonce `signer` has already used, when one is known. */
  usedNonce?: Hex;
}

/** The decoded JSON of a Cronos header. */
export type HeaderJson = { x402Version: number; scheme: string; network: string; payload: Record<string, unknown> } & Record<string, unknown>;

/** The JSON inside a base64 header. */
export function decodeHeaderJson(header: string): HeaderJson {
  return JSON.parse(Buffer.from(header, "base64").toString("utf8")) as HeaderJson;
}

/** Base64 of a JSON value (a header re-encoded after a change). */
export function encodeHeaderJson(json: unknown): string {
  return Buffer.from(JSON.stringify(json), "utf8").toString("base64");
}

/** A header with its decoded JSON changed (the signature left as it was). */
export function tamper(header: string, change: (json: HeaderJson) => void): string {
  const json = decodeHeaderJson(header);
  change(json);
  return encodeHeaderJson(json);
}

/** Signs a header for the context's requirements, with `overrides`. */
export function signFor(context: CaseContext, overrides: Partial<CreatePaymentHeaderParameters> = {}): Promise<string> {
  return createPaymentHeader({
    signer: context.signer,
    requirements: context.requirements,
    chainId: context.chainId,
    domain: context.domain,
    now: Number(context.now),
    ...overrides,
  });
}

/** Options of {@link requirementsFor}. */
export interface RequirementsForParameters {
  /** The network string as sent (`cronos-testnet`, `cronos-mainnet`, `cronos`). */
  network: string;
  payTo: Address;
  asset: Address;
  amount: bigint;
  resource?: string;
}

/** Payment requirements as a seller writes them (spec 2.2), for the checks' own payments. */
export function requirementsFor(parameters: RequirementsForParameters): PaymentRequirements {
  return {
    scheme: EXACT_SCHEME,
    network: parameters.network,
    payTo: parameters.payTo,
    asset: parameters.asset,
    maxAmountRequired: parameters.amount.toString(),
    description: "x402 facilitator conformance check",
    mimeType: "application/json",
    maxTimeoutSeconds: 300,
    ...(parameters.resource === undefined ? {} : { resource: parameters.resource }),
  };
}
