// The reason a facilitator must give for a refused payment, in verify's and settle's words, and how an answer is held to it.
import { SettleError, type VerifyReason } from "../protocol/reasons.js";

/** A key of {@link VerifyReason}: which refusal, whatever its words in a dialect. */
export type VerifyReasonKey = keyof typeof VerifyReason;

/** The reason a facilitator must give: exact, or (where the decisions fix only its start) a prefix naming a field. */
export interface ExpectedReason {
  /** Which verify reason; absent for request-level texts (`Invalid request: …`). */
  key?: VerifyReasonKey;
  /** The exact text. */
  text?: string;
  /** The text's fixed start, when the rest is the facilitator's own words. */
  startsWith?: string;
  /** A word the rest must contain (the field at fault). */
  mentions?: string;
}

/** Settle's words for a verify refusal: its own where it has one (spec 7.2), else verify's reason itself (decisions › Settle). */
const SETTLE_WORDS: Partial<Record<VerifyReasonKey, string>> = {
  invalidSignature: SettleError.invalidSignature,
  notYetValid: SettleError.notYetValid,
  expired: SettleError.expired,
  alreadyUsed: SettleError.alreadyUsed,
  insufficientBalance: SettleError.insufficientBalance,
};

/** What settle must answer (`error`) for a payment verify refuses with `expected`. */
export function settleExpectation(expected: ExpectedReason): ExpectedReason {
  const word = expected.key === undefined ? undefined : SETTLE_WORDS[expected.key];
  return word === undefined ? expected : { key: expected.key, text: word };
}

/** Whether `text` is the expected reason. */
export function matchesReason(text: unknown, expected: ExpectedReason): boolean {
  if (typeof text !== "string") return false;
  if (expected.text !== undefined) return text === expected.text;
  return text.startsWith(expected.startsWith ?? "") && (expected.mentions === undefined || text.slice((expected.startsWith ?? "").length).includes(expected.mentions));
}

/** The expected reason in words, for messages. */
export function describeReason(expected: ExpectedReason): string {
  if (expected.text !== undefined) return JSON.stringify(expected.text);
  const mentions = expected.mentions === undefined ? "" : ` naming ${expected.mentions}`;
  return `a text starting ${JSON.stringify(expected.startsWith ?? "")}${mentions}`;
}
