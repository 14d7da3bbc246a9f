import { describeZodError, settleFailureSchema, settleSuccessSchema, type SettleFailure, type SettleSuccess } from "../protocol/schemas.js";
import { SettleEvent } from "../protocol/reasons.js";
import { describeReason, matchesReason, type ExpectedReason } from "./expected-reason.js";
import { fail } from "./check.js";
import { describeAnswer, isJsonAnswer, type Answer } from "./http.js";
import { brief } from "./brief.js";

// Assertions on answers. Each failure says what was expected and what came back.

/** The answer's JSON, after checking its status and that it is JSON (declared and parsable). */
export function expectJson(answer: Answer, status: number, what: string): unknown {
  if (answer.status !== status) fail(`${what}: HTTP ${status}`, describeAnswer(answer));
  if (!isJsonAnswer(answer)) fail(`${what}: a JSON answer (Content-Type application/json)`, describeAnswer(answer));
  if (answer.json === undefined) fail(`${what}: a JSON body`, describeAnswer(answer));
  return answer.json;
}

/** A JSON object (not an array, not null). */
export function expectObject(value: unknown, what: string): Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) fail(`${what}: a JSON object`, brief(value));
  return value as Record<string, unknown>;
}

/** verify's refusal: `{isValid: false, invalidReason}` with the expected reason (HTTP `status`, 200 for protocol outcomes). */
export function expectVerifyRefusal(answer: Answer, expected: ExpectedReason, status = 200): void {
  const what = `verify's refusal {isValid: false, invalidReason: ${describeReason(expected)}}`;
  const body = expectObject(expectJson(answer, status, what), what);
  if (body.isValid !== false || !matchesReason(body.invalidReason, expected)) fail(what, describeAnswer(answer));
}

/** verify's acceptance, exactly as the official client insists: `{isValid: true, invalidReason: null}`. */
export function expectVerifyValid(answer: Answer): void {
  const what = "verify's acceptance {isValid: true, invalidReason: null}";
  const body = expectObject(expectJson(answer, 200, what), what);
  if (body.isValid !== true || body.invalidReason !== null) fail(what, describeAnswer(answer));
}

/**
 * settle's `payment.failed` with the expected `error`, the network as sent, and every field the official
 * client insists on (`x402Version`, `event`, `network`, ISO `timestamp`).
 */
export function expectSettleFailure(answer: Answer, expected: ExpectedReason, network: string | undefined, status = 200): SettleFailure {
  const what = `settle's payment.failed with error ${describeReason(expected)}`;
  const body = expectObject(expectJson(answer, status, what), what);
  if (body.event !== SettleEvent.failed || !matchesReason(body.error, expected)) fail(what, describeAnswer(answer));
  const parsed = settleFailureSchema.safeParse(body);
  if (!parsed.success) fail(`${what} with x402Version, network and an ISO timestamp`, `${describeZodError(parsed.error)} in ${brief(body)}`);
  if (network !== undefined && parsed.data.network !== network) fail(`${what} for network ${JSON.stringify(network)} (as sent)`, describeAnswer(answer));
  return parsed.data;
}

/** settle's `payment.settled`, every field typed as the official client insists (spec 2.5; wire format). */
export function expectSettled(answer: Answer): SettleSuccess {
  const what = "settle's payment.settled";
  const body = expectObject(expectJson(answer, 200, what), what);
  if (body.event !== SettleEvent.settled) fail(what, describeAnswer(answer));
  const parsed = settleSuccessSchema.safeParse(body);
  if (!parsed.success) {
    fail(`${what} with x402Version, txHash, from, to, value (strings), blockNumber (a number), network and an ISO timestamp`, `${describeZodError(parsed.error)} in ${brief(body)}`);
  }
  return parsed.data;
}

/** Two values that must be equal (`what` names them). */
export function expectEqual<T>(actual: T, expected: T, what: string): void {
  if (actual !== expected) fail(`${what} ${brief(expected)}`, brief(actual));
}
