import { z } from "zod";
import type { Address, Hex } from "viem";
import { canonicalNetwork, NETWORK_NAMES, NETWORKS, type NetworkName } from "./networks.js";
import { addressSchema, coinbasePayloadSchema, expected, uintStringSchema, type PaymentRequirements } from "./schemas.js";

/**
 * The x402 v2 dialect, as the `@x402/*` packages (2.27) speak it: CAIP-2 networks, `amount`,
 * a `paymentPayload` object, and the `PAYMENT-*` headers. Facts read from those packages; the kit
 * does not need them at run time.
 */

/** The protocol version of the x402 v2 dialect. */
export const X402_V2_VERSION = 2;

/** The headers between buyer and seller in x402 v2, each base64 JSON. */
export const X402V2Header = {
  /** Seller → buyer, with a 402: a {@link V2PaymentRequired}. */
  paymentRequired: "PAYMENT-REQUIRED",
  /** Buyer → seller: a {@link V2PaymentPayload}. */
  paymentSignature: "PAYMENT-SIGNATURE",
  /** Seller → buyer, with the paid answer: a {@link V2SettleResponse}. */
  paymentResponse: "PAYMENT-RESPONSE",
} as const;

/** The `invalidReason` / `errorReason` codes `@x402/evm` answers for the `exact` scheme's EIP-3009 checks. */
export const EvmReason = {
  unsupportedPayloadType: "unsupported_payload_type",
  invalidScheme: "invalid_exact_evm_scheme",
  networkMismatch: "invalid_exact_evm_network_mismatch",
  eip3009NotSupported: "invalid_exact_evm_eip3009_not_supported",
  valueMismatch: "invalid_exact_evm_payload_authorization_value_mismatch",
  recipientMismatch: "invalid_exact_evm_recipient_mismatch",
  invalidSignature: "invalid_exact_evm_signature",
  validAfter: "invalid_exact_evm_payload_authorization_valid_after",
  validBefore: "invalid_exact_evm_payload_authorization_valid_before",
  nonceAlreadyUsed: "invalid_exact_evm_nonce_already_used",
  insufficientBalance: "invalid_exact_evm_insufficient_balance",
  transactionFailed: "invalid_exact_evm_transaction_failed",
} as const;

/** This facilitator's codes where `@x402/evm` has none: a request it cannot read (400), and faults (500/503). */
export const V2RequestReason = {
  invalidRequest: "invalid_request",
  /** The `payment-identifier` extension: the payer's id is bound to another payment. */
  paymentIdentifierConflict: "payment_identifier_conflict",
  /** An operator's lifecycle hook refused the payment. */
  refusedByOperator: "payment_refused",
  unavailable: "facilitator_unavailable",
  internal: "unexpected_error",
} as const;

// ---------------------------------------------------------------------------------------------
// Networks

const CAIP2 = /^[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}$/;

/** Whether `network` is written as a CAIP-2 chain id (`eip155:338`), the way x402 v2 names networks. */
export function isCaip2(network: string): boolean {
  return CAIP2.test(network);
}

/** The CAIP-2 id of a Cronos network name (the alias `cronos` included): `eip155:338` / `eip155:25`. */
export function caip2OfNetwork(network: string): string | undefined {
  const canonical = canonicalNetwork(network);
  return canonical && `eip155:${NETWORKS[canonical].chainId}`;
}

/** The Cronos network of a CAIP-2 id, if the kit knows it. */
export function networkOfCaip2(id: string): NetworkName | undefined {
  return NETWORK_NAMES.find((name) => `eip155:${NETWORKS[name].chainId}` === id);
}

/**
 * The Cronos network of any form the kit accepts: a name (`cronos-testnet`, `cronos-mainnet`, the alias
 * `cronos`) or a CAIP-2 id (`eip155:338`, `eip155:25`); `undefined` for anything else.
 */
export function networkOfAnyForm(network: string): NetworkName | undefined {
  return canonicalNetwork(network) ?? networkOfCaip2(network);
}

// ---------------------------------------------------------------------------------------------
// Wire shapes

/** Payment requirements in x402 v2. `extra.name` / `extra.version` carry the token's EIP-712 domain. */
export const v2RequirementsSchema = z.looseObject(
  {
    scheme: z.string({ error: expected("must be a string") }),
    network: z.string({ error: expected("must be a string") }),
    asset: z.string({ error: expected("must be a string") }),
    amount: uintStringSchema,
    payTo: addressSchema,
    maxTimeoutSeconds: z.number({ error: expected("must be a number") }).int().positive().optional(),
    extra: z.record(z.string(), z.unknown(), { error: expected("must be an object") }).optional(),
  },
  { error: expected("must be an object") },
);
export type V2PaymentRequirements = z.output<typeof v2RequirementsSchema>;

/** The resource a 402 is about. */
export const v2ResourceSchema = z.looseObject({
  url: z.string({ error: expected("must be a string") }),
  description: z.string().optional(),
  mimeType: z.string().optional(),
});
export type V2Resource = z.output<typeof v2ResourceSchema>;

/** A buyer's payment: the `PAYMENT-SIGNATURE` content and the `paymentPayload` of verify/settle. */
export const v2PaymentPayloadSchema = z.looseObject({
  x402Version: z.literal(X402_V2_VERSION, { error: expected("must be 2") }),
  resource: v2ResourceSchema.optional(),
  accepted: z.looseObject(
    {
      scheme: z.string({ error: expected("must be a string") }),
      network: z.string({ error: expected("must be a string") }),
      asset: z.string({ error: expected("must be a string") }).optional(),
    },
    { error: expected("must be an object") },
  ),
  payload: z
    .looseObject({ authorization: z.looseObject({}, { error: expected("must be an object") }) }, { error: expected("must be an object") })
    .pipe(coinbasePayloadSchema),
  extensions: z.record(z.string(), z.unknown()).optional(),
});
export type V2PaymentPayload = z.output<typeof v2PaymentPayloadSchema>;

/** An x402 v2 payment as a buyer writes it: numbers as decimal strings, `accepted` echoing the seller's offer. */
export interface SignedV2Payment {
  x402Version: typeof X402_V2_VERSION;
  resource?: V2Resource;
  accepted: Record<string, unknown>;
  payload: {
    signature: Hex;
    authorization: { from: Address; to: Address; value: string; validAfter: string; validBefore: string; nonce: Hex };
  };
  /** Extensions the payer adds, e.g. `{"payment-identifier": {info: {required: false, id}}}`. */
  extensions?: Record<string, unknown>;
}

/**
 * Body of verify and settle in x402 v2 (what `@x402/core`'s `HTTPFacilitatorClient` posts). The
 * payment payload's content is judged by verify's first check, so here it only has to be an object.
 */
export const v2FacilitatorRequestSchema = z.object({
  x402Version: z.literal(X402_V2_VERSION, { error: expected("must be 2") }),
  paymentPayload: z.looseObject({}, { error: expected("must be an object") }),
  paymentRequirements: v2RequirementsSchema,
});
export type V2FacilitatorRequest = z.output<typeof v2FacilitatorRequestSchema>;

/** verify's answer in x402 v2. */
export const v2VerifyResponseSchema = z.object({
  isValid: z.boolean(),
  invalidReason: z.string().optional(),
  invalidMessage: z.string().optional(),
  payer: z.string().optional(),
});
export type V2VerifyResponse = z.infer<typeof v2VerifyResponseSchema>;

/** settle's answer in x402 v2; `transaction` is `""` when nothing was sent. */
export const v2SettleResponseSchema = z.object({
  success: z.boolean(),
  errorReason: z.string().optional(),
  errorMessage: z.string().optional(),
  payer: z.string().optional(),
  transaction: z.string(),
  network: z.string(),
});
export type V2SettleResponse = z.infer<typeof v2SettleResponseSchema>;

/** A seller's 402 in x402 v2 (the `PAYMENT-REQUIRED` content). */
export const v2PaymentRequiredSchema = z.looseObject({
  x402Version: z.literal(X402_V2_VERSION, { error: expected("must be 2") }),
  error: z.string().optional(),
  resource: v2ResourceSchema.optional(),
  accepts: z.array(z.unknown(), { error: expected("must be a list") }),
  extensions: z.record(z.string(), z.unknown()).optional(),
});
export type V2PaymentRequired = z.output<typeof v2PaymentRequiredSchema>;

/**
 * The x402 v2 form of Cronos payment requirements (CAIP-2 network, `amount`, the token's EIP-712
 * domain in `extra`), or `undefined` for a network the kit does not know. `extra.name` / `extra.version`
 * are kept when the seller gave them; otherwise they are the network's USDC.e domain.
 */
export function v2RequirementsOf(requirements: PaymentRequirements): V2PaymentRequirements | undefined {
  const canonical = canonicalNetwork(requirements.network);
  if (!canonical) return undefined;
  const extra = isRecord(requirements.extra) ? requirements.extra : {};
  const domain = NETWORKS[canonical].domain;
  return {
    scheme: requirements.scheme,
    network: `eip155:${NETWORKS[canonical].chainId}`,
    asset: requirements.asset,
    amount: requirements.maxAmountRequired,
    payTo: requirements.payTo,
    maxTimeoutSeconds: requirements.maxTimeoutSeconds ?? 300,
    extra: {
      ...extra,
      name: typeof extra.name === "string" ? extra.name : domain.name,
      version: typeof extra.version === "string" ? extra.version : domain.version,
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Prices for `@x402/*` sellers and buyers

/** A price as `@x402/express` routes take it (its `AssetAmount`): token, base units, EIP-712 domain. */
export interface CronosAssetAmount {
  asset: Address;
  amount: string;
  extra: { name: string; version: string };
}

/**
 * The USDC.e price of a route on Cronos for `@x402/express` (`accepts: [{ scheme: "exact", network,
 * payTo, price: cronosPrice(network, "$0.01") }]`). `@x402/evm` knows no default asset on Cronos, so a
 * plain `"$0.01"` price fails there; this names the token, the amount and its EIP-712 domain.
 *
 * @param network `eip155:338`, `eip155:25`, or a Cronos name (`cronos-testnet`, `cronos-mainnet`, `cronos`).
 * @param price base units as a bigint (`10_000n` is 0.01 USDC.e), or US dollars as a string (`"$0.01"`, `"0.01"`).
 * @throws {RangeError} for another network, a negative amount, or dollars with more than 6 decimals.
 */
export function cronosPrice(network: string, price: bigint | string): CronosAssetAmount {
  const info = cronosNetwork(network);
  return { asset: info.token, amount: baseUnits(price).toString(), extra: { ...info.domain } };
}

/** An entry of `@x402/core`'s `spendControls.allowedAssets`: lets an `@x402/*` buyer pay USDC.e on Cronos, up to `maxAmount` base units. */
export interface CronosSpendControl {
  network: `eip155:${number}`;
  asset: Address;
  maxAmountPerPayment: string;
}

/**
 * Allows an `@x402/*` buyer to pay USDC.e on a Cronos network (its spend controls allow only the
 * assets `@x402/evm` knows, and it knows none on Cronos): `spendControls: { allowedAssets: [cronosSpendControl("eip155:338", 10_000n)] }`.
 */
export function cronosSpendControl(network: string, maxAmount: bigint | string): CronosSpendControl {
  const info = cronosNetwork(network);
  return { network: `eip155:${info.chainId}`, asset: info.token, maxAmountPerPayment: baseUnits(maxAmount).toString() };
}

function cronosNetwork(network: string) {
  const name = networkOfAnyForm(network);
  if (!name) throw new RangeError(`not a Cronos network: "${network}" (use eip155:338, eip155:25, cronos-testnet or cronos-mainnet)`);
  return NETWORKS[name];
}

/** Base units of a bigint, or of a dollar string with up to 6 decimals (USDC.e has 6). */
function baseUnits(price: bigint | string): bigint {
  if (typeof price === "bigint") {
    if (price < 0n) throw new RangeError(`price must not be negative, got ${price}`);
    return price;
  }
  const match = /^\$?(\d+)(?:\.(\d{1,6}))?$/.exec(price.trim());
  if (!match) throw new RangeError(`price must be US dollars with at most 6 decimals (e.g. "$0.01"), got "${price}"`);
  return BigInt(match[1]!) * 1_000_000n + BigInt((match[2] ?? "").padEnd(6, "0"));
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The x402 `payment-identifier` extension (idempotent payments): its key in a payment's `extensions`. */
export const PAYMENT_IDENTIFIER = "payment-identifier";

/** An identifier's rules, as `@x402/extensions` states them: 16 to 128 of A-Z a-z 0-9 _ -. */
export const PAYMENT_ID_PATTERN = /^[A-Za-z0-9_-]{16,128}$/;

const IDENTIFIER_FIELD = `paymentPayload.extensions["${PAYMENT_IDENTIFIER}"]`;

/**
 * The `payment-identifier` extension as a payment carries it: `info.required` a boolean, `info.id` (when there
 * is one) 16 to 128 of A-Z a-z 0-9 _ -: the shape the extension defines (`@x402/extensions`' own schema of
 * `info`, which its clients echo), checked by this fixed code in time bounded by the id's 128 characters.
 * The `schema` the payment carries beside `info` is the payer's to write: it is never read, compiled or run
 * (one made to double its work per level froze a process that ran it, issue 39).
 */
export const paymentIdentifierExtensionSchema = z.looseObject(
  {
    info: z.looseObject(
      {
        required: z.boolean({ error: "must be a boolean" }),
        id: z.string({ error: "must be 16 to 128 characters of A-Z a-z 0-9 _ -" }).regex(PAYMENT_ID_PATTERN, { error: "must be 16 to 128 characters of A-Z a-z 0-9 _ -" }).optional(),
      },
      { error: "must be an object" },
    ),
  },
  { error: "must be an object" },
);

/**
 * The payment identifier in an x402 v2 payment's `extensions` (`{"payment-identifier": {info: {required, id}}}`),
 * validated as `@x402/extensions`' `validatePaymentIdentifier` validates the shape: `undefined` when it carries
 * no extension or one without an id (a seller's declaration echoed back asks for nothing), else the id, or why
 * the extension is not valid (naming the field). Unlike the package, the extension's `schema` is not run:
 * `info` is held to the fixed shape whatever a payer's schema says (the official clients echo the package's
 * own schema, which that shape satisfies).
 */
export function paymentIdentifierOf(extensions: Record<string, unknown> | undefined): { id: string } | { error: string } | undefined {
  const extension = extensions?.[PAYMENT_IDENTIFIER];
  if (extension === undefined) return undefined;
  const parsed = paymentIdentifierExtensionSchema.safeParse(extension);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { error: `${[IDENTIFIER_FIELD, ...issue.path.map(String)].join(".")} ${issue.message}` };
  }
  const { info } = parsed.data;
  return info.id === undefined ? undefined : { id: info.id };
}
