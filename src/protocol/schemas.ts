import { z } from "zod";
import { getAddress, isAddress, type Address, type Hex } from "viem";

const MAX_UINT256 = (1n << 256n) - 1n;

/** An error message that says "is required" for a missing field and `what` otherwise. */
export function expected(what: string) {
  return (issue: { input?: unknown }) => (issue.input === undefined ? "is required" : what);
}

/** An EVM address in any letter case; parsed to its checksummed form. */
export const addressSchema = z
  .string({ error: expected("must be a string") })
  .refine((value) => isAddress(value, { strict: false }), { error: expected("must be a 0x-prefixed 20-byte address") })
  .transform((value) => getAddress(value) as Address);

/** A decimal string of a non-negative integer below 2^256. */
export const uintStringSchema = z
  .string({ error: expected("must be a decimal string") })
  .regex(/^\d+$/, { error: expected("must be a decimal string of digits"), abort: true })
  .refine((value) => BigInt(value) <= MAX_UINT256, { error: expected("must be below 2^256") });

/** A unix time in seconds, as a JSON number or a numeric string; parsed to bigint. */
const unixSecondsSchema = z
  .union([z.number().int().nonnegative().refine(Number.isSafeInteger), z.string().regex(/^\d+$/)], {
    error: "must be a non-negative integer (unix seconds)",
  })
  .transform((value) => BigInt(value))
  .refine((value) => value <= MAX_UINT256, { error: expected("must be below 2^256") });

const hexSchema = z.string().regex(/^0x([0-9a-fA-F]{2})*$/, { error: expected("must be 0x-prefixed hex bytes") });

/** Payment requirements as sellers send them (spec 2.2). Extra fields are kept and not enforced. */
export const paymentRequirementsSchema = z.looseObject({
  scheme: z.string({ error: expected("must be a string") }),
  network: z.string({ error: expected("must be a string") }),
  payTo: addressSchema,
  asset: z.string({ error: expected("must be a string") }),
  maxAmountRequired: uintStringSchema,
  description: z.string({ error: expected("must be a string") }).optional(),
  mimeType: z.string({ error: expected("must be a string") }).optional(),
  maxTimeoutSeconds: z.number({ error: expected("must be a number") }).int().positive().optional(),
  resource: z.string({ error: expected("must be a string") }).optional(),
}, { error: expected("must be an object") });
/** Payment requirements after parsing. */
export type PaymentRequirements = z.output<typeof paymentRequirementsSchema>;
/** Payment requirements as written by a seller. */
export type PaymentRequirementsInput = z.input<typeof paymentRequirementsSchema>;

/** Body of verify and settle (spec 2.2). `x402Version` is checked to be 1 separately, for its own answer. */
export const facilitatorRequestSchema = z.object({
  x402Version: z.number({ error: expected("must be a number") }),
  paymentHeader: z.string({ error: expected("must be a string") }).min(1, { error: expected("must not be empty") }),
  paymentRequirements: paymentRequirementsSchema,
});
export type FacilitatorRequest = z.output<typeof facilitatorRequestSchema>;

/** The authorization fields of a payment header, common to the Cronos and Coinbase layouts. */
const authorizationFields = {
  from: addressSchema,
  to: addressSchema,
  // Checked by verify step 4 ("Invalid amount"), so any scalar is let through here.
  value: z.union([z.string(), z.number()], { error: expected("must be a decimal string") }).transform(String),
  validAfter: unixSecondsSchema,
  validBefore: unixSecondsSchema,
  nonce: z.string().regex(/^0x[0-9a-fA-F]{64}$/, { error: expected("must be 0x-prefixed 32 bytes") }).transform((v) => v as Hex),
};

/** Cronos layout: a flat payload (the official client's). */
const cronosPayloadSchema = z.looseObject({
  ...authorizationFields,
  signature: hexSchema.transform((v) => v as Hex),
  asset: z.string().optional(),
});

/** Coinbase x402 layout (v1 header payload, and the x402 v2 `exact` EVM payload): `{signature, authorization: {...}}`. */
export const coinbasePayloadSchema = z.looseObject({
  signature: hexSchema.transform((v) => v as Hex),
  authorization: z.looseObject(authorizationFields),
});

/** The decoded `X-PAYMENT` header. */
export const paymentHeaderSchema = z.looseObject({
  x402Version: z.literal(1, { error: expected("must be 1") }),
  scheme: z.string({ error: expected("must be a string") }),
  network: z.string({ error: expected("must be a string") }),
  // The layout is chosen by the presence of `authorization`, so errors name the faulty field.
  payload: z
    .looseObject({}, { error: expected("must be an object") })
    .pipe(
      z.custom<Record<string, unknown>>().transform((payload, ctx) => {
        const schema = "authorization" in payload ? coinbasePayloadSchema : cronosPayloadSchema;
        const parsed = schema.safeParse(payload);
        if (parsed.success) return parsed.data;
        for (const issue of parsed.error.issues) ctx.addIssue({ code: "custom", message: issue.message, path: issue.path });
        return z.NEVER;
      }),
    ),
});

/** A payment header normalised from either layout. */
export interface PaymentPayload {
  x402Version: 1;
  scheme: string;
  network: string;
  authorization: Authorization;
  /** `payload.asset` (Cronos layout only). */
  asset?: string;
}

/** An EIP-3009 `TransferWithAuthorization` with its signature. `value` is kept as sent, checked later. */
export interface Authorization {
  from: Address;
  to: Address;
  value: string;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
  signature: Hex;
}

/** verify's answer (spec 2.4; `invalidReason` always present, `null` when valid). */
export const verifyResponseSchema = z.object({
  isValid: z.boolean(),
  invalidReason: z.string().nullable(),
});
export type VerifyResponse = z.infer<typeof verifyResponseSchema>;

const settleCommon = {
  x402Version: z.number(),
  network: z.string(),
  timestamp: z.iso.datetime({ offset: true }),
};

/** A settled payment (spec 2.5, with the fields the official client insists on). */
export const settleSuccessSchema = z.object({
  ...settleCommon,
  event: z.literal("payment.settled"),
  txHash: z.string().regex(/^0x[0-9a-fA-F]{64}$/),
  from: z.string(),
  to: z.string(),
  value: z.string(),
  blockNumber: z.number().int().nonnegative(),
});
/** A failed settlement; `txHash` is present when a transaction was sent. */
export const settleFailureSchema = z.object({
  ...settleCommon,
  event: z.literal("payment.failed"),
  error: z.string(),
  txHash: z.string().regex(/^0x[0-9a-fA-F]{64}$/).optional(),
});
export const settleResponseSchema = z.discriminatedUnion("event", [settleSuccessSchema, settleFailureSchema]);
export type SettleSuccess = z.infer<typeof settleSuccessSchema>;
export type SettleFailure = z.infer<typeof settleFailureSchema>;
export type SettleResponse = z.infer<typeof settleResponseSchema>;

/** `GET /v2/x402/supported`: both dialects' kinds, and (x402 v2) extensions and the relayer addresses by CAIP family. */
export const supportedResponseSchema = z.object({
  kinds: z.array(z.object({ x402Version: z.number(), scheme: z.string(), network: z.string() })),
  extensions: z.array(z.string()).optional(),
  signers: z.record(z.string(), z.array(z.string())).optional(),
});
export type SupportedResponse = z.infer<typeof supportedResponseSchema>;

/** The seller's 402 answer: one requirements object for Cronos buyers, `accepts` for Coinbase-style buyers. */
export const paymentRequiredSchema = z.looseObject({
  error: z.string(),
  x402Version: z.number(),
  paymentRequirements: paymentRequirementsSchema.optional(),
  accepts: z.array(paymentRequirementsSchema).optional(),
  reason: z.string().optional(),
});
export type PaymentRequired = z.infer<typeof paymentRequiredSchema>;

/** One readable line from a zod error: `field.path: message; …`. */
export function describeZodError(error: z.ZodError): string {
  return error.issues
    .slice(0, 3)
    .map((issue) => {
      const path = issue.path.join(".");
      return path ? `${path} ${issue.message}` : issue.message;
    })
    .join("; ");
}

/** The outcome of parsing payment requirements. */
export type ParsedRequirements = { ok: true; requirements: PaymentRequirements } | { ok: false; problem: string };

/** Parses payment requirements, with a readable problem line when they are malformed. */
export function parsePaymentRequirements(input: unknown): ParsedRequirements {
  const parsed = paymentRequirementsSchema.safeParse(input);
  return parsed.success ? { ok: true, requirements: parsed.data } : { ok: false, problem: describeZodError(parsed.error) };
}

// --- Settlement status (GET {base}/v2/x402/settlements…, added with the settlement ledger) ---

const txHashSchema = z.string().regex(/^0x[0-9a-fA-F]{64}$/);

/** Where a settlement stands, for sellers that reconcile (e.g. after a `payment.failed` carrying a `txHash`). */
export const settlementStatusSchema = z.object({
  status: z.enum(["pending", "settled", "failed"]),
  network: z.string(),
  from: z.string(),
  to: z.string(),
  value: z.string(),
  nonce: z.string(),
  /** The transaction that settled it, else the latest one sent; null when none was sent yet. */
  txHash: txHashSchema.nullable(),
  /** Every transaction broadcast for it, oldest first. */
  transactions: z.array(txHashSchema),
  blockNumber: z.number().int().nonnegative().optional(),
  timestamp: z.iso.datetime({ offset: true }).optional(),
  error: z.string().optional(),
});
export type SettlementStatus = z.infer<typeof settlementStatusSchema>;

/** The query of `GET {base}/v2/x402/settlements?network=…&from=…&nonce=…`. */
export const settlementQuerySchema = z.object({
  network: z.string({ error: expected("must be a string") }).min(1, { error: expected("must not be empty") }),
  from: addressSchema,
  nonce: z.string({ error: expected("must be a string") }).regex(/^0x[0-9a-fA-F]{64}$/, { error: expected("must be 0x-prefixed 32 bytes of hex") }),
});

/** The path parameter of `GET {base}/v2/x402/settlements/{txHash}`. */
export const settlementTxHashSchema = z.string().regex(/^0x[0-9a-fA-F]{64}$/, { error: "must be 0x-prefixed 32 bytes of hex" });
