import { RequestError } from "../../protocol/reasons.js";
import { fail, type Check } from "../check.js";
import { expectJson, expectObject } from "../expect.js";
import { describeAnswer, PATHS, type Answer, type FacilitatorHttp } from "../http.js";
import type { Target } from "../target.js";
import { caseContextOf } from "./context.js";
import { brief } from "../brief.js";

/** The spec's limits per IP and minute (section 8). */
const SPEC_LIMIT = { verify: 10, settle: 5 } as const;

/** Requests in flight at once while spending a quota. */
const BATCH = 10;

/** The quota left, from the standard headers: `RateLimit: "verify"; r=9; t=60` (draft 8) or `RateLimit-Remaining: 9`. */
export function remainingQuota(headers: Headers): number | undefined {
  const draft8 = headers.get("ratelimit")?.match(/(?:^|;)\s*r=(\d+)/);
  if (draft8) return Number(draft8[1]);
  const remaining = headers.get("ratelimit-remaining");
  return remaining !== null && /^\d+$/.test(remaining.trim()) ? Number(remaining) : undefined;
}

/** The rate-limit answer shape of verify and settle (run last: they spend this IP's quota). */
export function rateLimitChecks(sample: Target): Check[] {
  return (["verify", "settle"] as const).map(
    (operation): Check => ({
      id: `${operation}.rate-limited`,
      title: `${operation} past its quota answers 429 {"error": "Too many requests", retryAfter} with Retry-After and RateLimit headers; a forged X-Forwarded-For buys no new quota`,
      spec: `spec 8 (${SPEC_LIMIT[operation]} per minute per IP); decisions › HTTP status codes: rate limit exceeded → 429; decisions › Rate limits`,
      dialect: "cronos",
      needs: ["rate-limit"],
      last: true,
      async run(context) {
        // A refusal that needs no chain read: cheap for the facilitator, a request like any other for its limit.
        const { requirements } = await caseContextOf(context, sample);
        const body = { x402Version: 1, paymentHeader: "%%%not base64%%%", paymentRequirements: requirements };
        const send = (headers?: Record<string, string>) => postLimited(context.http, PATHS[operation], body, headers);
        const probe = await send();
        let limited = probe.status === 429 ? probe : undefined;
        let sent = 1;
        const remaining = remainingQuota(probe.headers);
        const cap = remaining !== undefined ? remaining + 5 : SPEC_LIMIT[operation] * 3;
        while (!limited && sent < cap) {
          const batch = Math.min(BATCH, cap - sent);
          const answers = await Promise.all(Array.from({ length: batch }, () => send()));
          sent += batch;
          limited = answers.find((answer) => answer.status === 429);
        }
        if (!limited) {
          fail(`HTTP 429 once the quota is spent (spec 8: ${SPEC_LIMIT[operation]} per minute)`, `none after ${sent} requests; the first: ${describeAnswer(probe)}`);
        }
        const json = expectObject(expectJson(limited, 429, `429 {"error": "Too many requests", "retryAfter": seconds}`), "429 body");
        if (json.error !== RequestError.tooManyRequests || !Number.isInteger(json.retryAfter) || (json.retryAfter as number) < 1) {
          fail(`{"error": "Too many requests", "retryAfter": whole seconds ≥ 1}`, describeAnswer(limited));
        }
        const retryAfter = limited.headers.get("retry-after");
        if (retryAfter !== String(json.retryAfter)) fail(`a Retry-After header of ${json.retryAfter} (the body's retryAfter)`, brief(retryAfter));
        if (remainingQuota(limited.headers) === undefined) {
          fail("the standard RateLimit header (RateLimit: …; r=0 or RateLimit-Remaining: 0)", brief(Object.fromEntries(limited.headers)));
        }
        const forged = await send({ "X-Forwarded-For": `203.0.113.${Math.floor(Math.random() * 250) + 1}` });
        if (forged.status !== 429) fail("HTTP 429 for a request with a forged X-Forwarded-For (no new quota)", describeAnswer(forged));
        const policy = limited.headers.get("ratelimit-policy")?.match(/q=(\d+).*?w=(\d+)/);
        return `429 after ${sent} request${sent === 1 ? "" : "s"}${policy ? ` (policy: ${policy[1]} per ${policy[2]} s)` : ""}, retryAfter ${json.retryAfter} s`;
      },
    }),
  );
}

function postLimited(http: FacilitatorHttp, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return http.request({ method: "POST", path, body, headers: { "Content-Type": "application/json", "X402-Version": "1", ...headers }, acceptRateLimit: true });
}
