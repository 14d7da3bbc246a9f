// POST /harness/sign: `cronos-x402 sign` over the control endpoint, for suites that would rather not shell out.
// It signs for the stack's own funded buyers only, named by address: a key is never taken in the body, never
// answered. The signing is the buyer SDK's (src/buyer/payment-terms.ts), as the CLI's.
import { getAddress, type Address, type Hex, type LocalAccount } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { z } from "zod";
import { PaymentError } from "../../buyer/errors.js";
import { readPaymentRequired, type PaymentRequiredAnswer } from "../../buyer/offers.js";
import { offerOf, signedPaymentJson, signPayment } from "../../buyer/payment-terms.js";
import { describeZodError } from "../../protocol/schemas.js";
import { HarnessControlError } from "./spec.js";

const address = z.string({ error: "must be a 0x address" }).regex(/^0x[0-9a-fA-F]{40}$/, "must be a 0x address of 40 hex digits");
const TIME = 'must be unix seconds (a whole number), or "+N" (N seconds from now)';
/** Unix seconds, or `"+N"`: N seconds from now (this machine's clock, which the local chains keep). */
const unixSeconds = z.union([z.number({ error: TIME }).int(TIME).min(0, TIME).max(2 ** 53 - 1, TIME), z.string({ error: TIME }).regex(/^\+\d{1,12}$/, TIME)], { error: TIME }).transform((value) =>
  typeof value === "number" ? value : Math.floor(Date.now() / 1000) + Number(value.slice(1)),
);
const KEY_FIELD = /key|secret|mnemonic/i;

/** The body of `POST /harness/sign`: what `cronos-x402 sign` takes as flags, the payer named by its address. */
export const signRequestSchema = z.strictObject({
  /** One of the stack's buyers (its address); default the first. */
  payer: address.optional(),
  /** The 402 answer: its JSON body (an object), or as text (its body, `curl -si` output, or its PAYMENT-REQUIRED value). */
  paymentRequired: z.union([z.record(z.string(), z.unknown()), z.string().min(1)], { error: "must be the 402 answer: its JSON body, or text" }).optional(),
  dialect: z.enum(["cronos", "x402v2"], { error: 'must be "cronos" or "x402v2"' }).optional(),
  network: z.string({ error: "must be a network name" }).min(1).max(64).optional(),
  payTo: address.optional(),
  amount: z.string({ error: "must be base units as a string" }).regex(/^\d{1,78}$/, "must be a whole number of base units, as a string").optional(),
  asset: address.optional(),
  validAfter: unixSeconds.optional(),
  validBefore: unixSeconds.optional(),
  nonce: z.string({ error: "must be 0x and 64 hex digits" }).regex(/^0x[0-9a-fA-F]{64}$/, "must be 0x and 64 hex digits").optional(),
  domainName: z.string().min(1).max(256).optional(),
  domainVersion: z.string().min(1).max(64).optional(),
  chainId: z.number({ error: "must be a whole number" }).int().min(0).max(2 ** 53 - 1).optional(),
  /** Another of the stack's buyers (its address), whose key makes the signature while `from` stays the payer's. */
  signWith: address.optional(),
});
export type SignRequest = z.output<typeof signRequestSchema>;

/** The signing of `POST /harness/sign` over the stack's buyers: returns what `cronos-x402 sign --json` prints. */
export function harnessSigner(buyers: ReadonlyArray<{ address: Address; privateKey: Hex }>): (body: Record<string, unknown>) => Promise<Record<string, unknown>> {
  const accounts = new Map<string, LocalAccount>();
  for (const buyer of buyers) accounts.set(buyer.address.toLowerCase(), privateKeyToAccount(buyer.privateKey));
  const first = buyers[0]?.address;
  const listed = () => [...accounts.values()].map((account) => account.address).join(", ");
  const accountOf = (field: string, raw: string | undefined): LocalAccount => {
    const account = raw === undefined ? undefined : accounts.get(raw.toLowerCase());
    if (account) return account;
    throw new HarnessControlError(400, `${field}: ${raw === undefined ? "no buyer in this stack" : `${getAddress(raw)} is not one of this stack's buyers`} (${listed()}); the harness signs for its own buyers only`);
  };
  return async (body) => {
    const keyed = Object.keys(body).find((name) => KEY_FIELD.test(name));
    if (keyed !== undefined) {
      throw new HarnessControlError(400, `${keyed.slice(0, 32)}: the harness takes no key; it signs for the stack's own buyers, named by \`payer\` (their addresses: GET /harness/sign lists them); for another key use \`cronos-x402 sign --key-file\``);
    }
    const parsed = signRequestSchema.safeParse(body);
    if (!parsed.success) throw new HarnessControlError(400, describeZodError(parsed.error));
    const request = parsed.data;
    const signer = accountOf("payer", request.payer ?? first);
    const signWith = request.signWith === undefined ? undefined : accountOf("signWith", request.signWith);
    try {
      const signed = await signPayment({
        offer: offerOf({ answer: answerOf(request.paymentRequired), changes: request, dialect: request.dialect }),
        signer,
        signWith,
        domain: { name: request.domainName, version: request.domainVersion, chainId: request.chainId },
        validAfter: request.validAfter,
        validBefore: request.validBefore,
        nonce: request.nonce as Hex | undefined,
      });
      return signedPaymentJson(signed);
    } catch (error) {
      if (error instanceof PaymentError) throw new HarnessControlError(400, error.message.split("\n")[0]!);
      throw error;
    }
  };
}

/** The buyers `GET /harness/sign` lists: who the harness signs for. */
export function signers(buyers: ReadonlyArray<{ address: Address }>): { buyers: Address[] } {
  return { buyers: buyers.map((buyer) => buyer.address) };
}

/** The 402 answer a request carries: a JSON body given as an object, or the text forms `sign --from-402` reads. */
function answerOf(paymentRequired: SignRequest["paymentRequired"]): PaymentRequiredAnswer | undefined {
  if (paymentRequired === undefined) return undefined;
  return readPaymentRequired(typeof paymentRequired === "string" ? paymentRequired : JSON.stringify(paymentRequired));
}
