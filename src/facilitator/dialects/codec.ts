import type { Address } from "viem";
import type { NetworkName } from "../../protocol/networks.js";
import type { Payment } from "../../protocol/payment.js";
import { formatGwei } from "viem";
import { RequestError, SettleError, type SettleErrorCode, type VerifyRefusal } from "../../protocol/reasons.js";
import type { FaultFacts, NotSentWhy } from "../../settlement/faults.js";
import type { FailedSettlement, SettleOutcome } from "../../settlement/settle.js";
import type { VerifyAnswerOutcome } from "../../settlement/verify-outcome.js";
import type { RequestClock } from "../metrics/stages.js";
import type { z } from "zod";
import { describeZodError } from "../../protocol/schemas.js";

/** The dialects the facilitator speaks on one `/v2/x402` base: Cronos (x402Version 1) and x402 v2. */
export type DialectName = "cronos" | "x402v2";

/** The two payment endpoints. */
export type PaymentRoute = "verify" | "settle";

/** What an answer repeats from its request: the network as the caller wrote it, and the payer when known. */
export interface Echo {
  network: string;
  payer?: Address;
}

/** A verify/settle body read by its dialect: one payment, or the text of a 400 answer. */
export type ReadResult = { ok: true; payment: Payment; echo: Echo } | { ok: false; text: string; echo: Echo };

/** Why a request has no protocol outcome: unreadable (400), the chain could not be read (503/500), a bug. */
export type RefusalKind = "invalid" | "unavailable" | "internal";

/** A `supported` entry. */
export interface SupportedKind {
  x402Version: number;
  scheme: string;
  network: string;
}

/**
 * One dialect at the HTTP edge: it turns its body into one {@link Payment} and the dialect-free
 * outcomes of verify and settle back into its own answers. Nothing behind it knows the dialect.
 */
export interface DialectCodec {
  readonly name: DialectName;
  /** Reads a verify/settle body (any JSON) and the `X402-Version` header; `clock` times its `schema` and `headerDecode`. */
  read(body: unknown, headerVersion: string | undefined, clock: RequestClock): ReadResult;
  verifyAnswer(outcome: VerifyAnswerOutcome, echo: Echo): object;
  /** The words of a verify refusal in this dialect (the `invalidReason` text; x402 v2's `invalidMessage`). */
  verifyText(refusal: VerifyRefusal): string;
  settleAnswer(outcome: SettleOutcome, echo: Echo): object;
  /** The answer of a request without a protocol outcome, in the endpoint's shape. */
  refusal(route: PaymentRoute, kind: RefusalKind, text: string, echo: Echo): object;
  /** How `supported` lists a configured network in this dialect. */
  kind(network: NetworkName): SupportedKind;
}

/**
 * The text a failed settle answers with: settle's code made into the spec's words ({@link SettleError}), or
 * verify's words (`verifyText`, the dialect's) where settle has no word. The one place a settle code becomes text.
 */
export function settleErrorText(outcome: FailedSettlement, verifyText: (refusal: VerifyRefusal) => string): string {
  return isSettleErrorCode(outcome.code) ? SettleError[outcome.code] : verifyText(outcome as VerifyRefusal);
}

/** Whether a failed settlement's code is settle's own (else a verify refusal settle has no word for). */
export function isSettleErrorCode(code: string): code is SettleErrorCode {
  return Object.hasOwn(SettleError, code);
}

/** The words of a fault's answer (verify 500, settle 503), made from its code and facts: here only. */
export function faultText(facts: FaultFacts): string {
  return `${RequestError.unavailable}: ${faultWords(facts)}`;
}

const NOT_SENT: Readonly<Record<NotSentWhy, string>> = {
  noKeyHolder: "no relayer key holder sent the settlement in time",
  givenUp: "the settlement was given up before anything was sent",
  refused: "the relayer could not send",
};

function faultWords(facts: FaultFacts): string {
  switch (facts.code) {
    case "ledger_unavailable":
      return "the settlement ledger is unavailable";
    case "chain_unreadable":
      if (facts.read === "state") return `cannot read ${facts.network} state`;
      return facts.read === "simulation" ? `cannot simulate settlement on ${facts.network}` : `cannot read the fees on ${facts.network}`;
    case "fee_cap":
      return `the network asks ${formatGwei(facts.neededWei)} gwei per gas, above MAX_FEE_PER_GAS_GWEI (${formatGwei(facts.capWei)} gwei); nothing was sent`;
    case "not_sent":
      return `nothing sent on ${facts.network}: ${NOT_SENT[facts.why]}${facts.detail ? ` (${facts.detail})` : ""}`;
    case "hook_failed":
      return `the operator's ${facts.hook} hook ${facts.failure === "threw" ? "failed" : `did not answer within ${facts.timeoutMs} ms`}; nothing was sent`;
    case "payment_undecided":
      return facts.txHash
        ? `settlement transaction ${facts.txHash} on ${facts.network} reverted and it is not known yet whether the authorization was paid elsewhere (${facts.reason}); retry`
        : `it is not known yet whether the settlement on ${facts.network} was paid (${facts.reason}); retry`;
  }
}

/** A plain JSON object (not null, not an array). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * A body read by its hand check when that takes it (protocol/fast-parse.ts), else by `schema`, whose
 * output `fields` maps to the same shape and whose error words the 400 (`error`).
 */
export function checkedBody<T, S extends z.ZodType>(
  body: unknown,
  fast: (body: unknown) => T | undefined,
  schema: S,
  fields: (parsed: z.output<S>) => T,
): { ok: true; value: T } | { ok: false; error: string } {
  const value = fast(body);
  if (value !== undefined) return { ok: true, value };
  const parsed = schema.safeParse(body);
  return parsed.success ? { ok: true, value: fields(parsed.data) } : { ok: false, error: describeZodError(parsed.error) };
}
