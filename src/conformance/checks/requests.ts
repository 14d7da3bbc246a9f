import { RequestError } from "../../protocol/reasons.js";
import { signFor } from "../case-payment.js";
import type { ExpectedReason } from "../expected-reason.js";
import { fail, type Check, type CheckContext } from "../check.js";
import { expectJson, expectObject, expectSettleFailure, expectVerifyRefusal } from "../expect.js";
import { describeAnswer, PATHS, type Answer } from "../http.js";
import type { Target } from "../target.js";
import { caseContextOf, freshSignerOf } from "./context.js";

type Operation = "verify" | "settle";

/** A request body the facilitator must refuse before judging any payment, and the answer it must give. */
interface BadRequest {
  id: string;
  title: string;
  spec: string;
  /** The body to send (a string goes as is) and extra headers. */
  request(valid: { x402Version: number; paymentHeader: string; paymentRequirements: object }): { body: unknown; headers?: Record<string, string> };
  expected: ExpectedReason;
}

const STATUS_ROW = "decisions › HTTP status codes";

const BAD_REQUESTS: readonly BadRequest[] = [
  {
    id: "body-not-json",
    title: "a body that is not JSON is 400 in the endpoint's shape, Invalid request: …",
    spec: `${STATUS_ROW}: body is not JSON → 400`,
    request: () => ({ body: "{not json" }),
    expected: { startsWith: RequestError.invalidRequest("") },
  },
  {
    id: "field-missing",
    title: "a body without paymentHeader is 400 Invalid request: naming paymentHeader",
    spec: `${STATUS_ROW}: body misses paymentHeader → 400`,
    request: ({ x402Version, paymentRequirements }) => ({ body: { x402Version, paymentRequirements } }),
    expected: { startsWith: RequestError.invalidRequest(""), mentions: "paymentHeader" },
  },
  {
    id: "field-mistyped",
    title: "maxAmountRequired as a JSON number is 400 Invalid request: naming it",
    spec: `${STATUS_ROW}: body garbles paymentRequirements → 400`,
    request: (valid) => ({ body: { ...valid, paymentRequirements: { ...valid.paymentRequirements, maxAmountRequired: 10000 } } }),
    expected: { startsWith: RequestError.invalidRequest(""), mentions: "maxAmountRequired" },
  },
  {
    id: "version-in-body",
    title: "x402Version 3 in the body is 400 Unsupported x402Version: 3",
    spec: `${STATUS_ROW}: body x402Version other than 1 → 400`,
    request: (valid) => ({ body: { ...valid, x402Version: 3 } }),
    expected: { text: RequestError.unsupportedVersion(3) },
  },
  {
    id: "version-in-header",
    title: "an X402-Version: 3 header is 400 Unsupported x402Version: 3",
    spec: `spec 4 (X402-Version: 1); ${STATUS_ROW}: X402-Version header other than 1 → 400`,
    request: (valid) => ({ body: valid, headers: { "X402-Version": "3" } }),
    expected: { text: RequestError.unsupportedVersion(3) },
  },
];

/** A body over the 64 KiB limit. */
const TOO_LARGE_BYTES = 70 * 1024;

/** verify's and settle's answers to bodies they must refuse as requests (400, 413), judged on `sample`'s network. */
export function requestChecks(sample: Target): Check[] {
  const checks: Check[] = [];
  for (const operation of ["verify", "settle"] as const) {
    for (const bad of BAD_REQUESTS) {
      checks.push({
        id: `${operation}.${bad.id}`,
        title: `${operation}: ${bad.title}`,
        spec: bad.spec,
        dialect: "cronos",
        async run(context) {
          const { body, headers } = bad.request(await validBody(context, sample));
          const answer = await context.http.post(PATHS[operation], body, headers);
          expectRefusedRequest(operation, answer, bad.expected);
        },
      });
    }
    checks.push({
      id: `${operation}.content-type`,
      title: `${operation}: a JSON body sent as text/plain (a browser's simple request) is 415 JSON {"error": …}, nothing processed`,
      spec: "decisions › Relayer safety and the HTTP edge: a body whose Content-Type is not application/json → 415",
      dialect: "cronos",
      async run(context) {
        const body = JSON.stringify(await validBody(context, sample));
        const answer = await context.http.request({ method: "POST", path: PATHS[operation], body, headers: { "Content-Type": "text/plain", "X402-Version": "1" } });
        const json = expectObject(expectJson(answer, 415, 'a body that is not application/json: 415 {"error": …}'), "415 body");
        if (typeof json.error !== "string") fail('{"error": "…"}', describeAnswer(answer));
      },
    });
    checks.push({
      id: `${operation}.body-too-large`,
      title: `${operation}: a body over 64 KiB is 413 JSON {"error": …}`,
      spec: `${STATUS_ROW}: body larger than the limit (64 KiB) → 413`,
      dialect: "cronos",
      async run(context) {
        const valid = await validBody(context, sample);
        const body = { ...valid, paymentRequirements: { ...valid.paymentRequirements, description: "x".repeat(TOO_LARGE_BYTES) } };
        const answer = await context.http.post(PATHS[operation], body);
        const json = expectObject(expectJson(answer, 413, 'a body over 64 KiB: 413 {"error": …}'), "413 body");
        if (typeof json.error !== "string") fail('{"error": "…"}', describeAnswer(answer));
      },
    });
  }
  return checks;
}

/** A well-formed body for `target`, signed by a key without funds (so nothing could be paid even if it were taken). */
async function validBody(context: CheckContext, target: Target) {
  const caseContext = { ...(await caseContextOf(context, target)), signer: freshSignerOf(context) };
  return { x402Version: 1, paymentHeader: await signFor(caseContext), paymentRequirements: caseContext.requirements };
}

/** 400 in the endpoint's own shape: verify's `{isValid: false, invalidReason}`, settle's `payment.failed`. */
function expectRefusedRequest(operation: Operation, answer: Answer, expected: ExpectedReason): void {
  if (operation === "verify") expectVerifyRefusal(answer, expected, 400);
  else expectSettleFailure(answer, expected, undefined, 400);
}
