import { EXACT_SCHEME, RequestError, X402_VERSION } from "../../protocol/reasons.js";
import { fail, type Check } from "../check.js";
import { expectJson, expectObject } from "../expect.js";
import { describeAnswer, PATHS } from "../http.js";
import type { Target } from "../target.js";
import { brief } from "../brief.js";

/** The supported answer, read once per run by the first check that needs it. */
export const SUPPORTED_KEY = "supported";

/** Checks of the whole service: healthcheck, supported, unknown routes. */
export function serviceChecks(targets: readonly Target[]): Check[] {
  return [
    {
      id: "health.shape",
      title: "GET /healthcheck answers 200 {status: \"success\", results: {uptime, responseTime, message, timestamp}}",
      spec: "spec 4.1; wire format › healthcheck",
      dialect: "cronos",
      async run({ http }) {
        const answer = await http.get(PATHS.health);
        const what = "a healthy service's answer";
        const body = expectObject(expectJson(answer, 200, what), what);
        const results = expectObject(body.results, "healthcheck results");
        const problems: string[] = [];
        if (body.status !== "success") problems.push(`status ${brief(body.status)} (expected "success")`);
        if (typeof results.uptime !== "number") problems.push(`results.uptime ${brief(results.uptime)} (expected seconds, a number)`);
        const responseTime = results.responseTime;
        const hrtime = Array.isArray(responseTime) && responseTime.length === 2 && responseTime.every((n) => typeof n === "number");
        if (typeof responseTime !== "number" && !hrtime) problems.push(`results.responseTime ${brief(responseTime)} (expected a number or an [s, ns] pair)`);
        if (typeof results.message !== "string") problems.push(`results.message ${brief(results.message)} (expected a string)`);
        if (typeof results.timestamp !== "number") problems.push(`results.timestamp ${brief(results.timestamp)} (expected milliseconds, a number)`);
        if (problems.length > 0) fail("the documented healthcheck shape", `${problems.join("; ")} in ${describeAnswer(answer)}`);
      },
    },
    {
      id: "supported.shape",
      title: "GET /v2/x402/supported lists {x402Version: 1, scheme: \"exact\", network} once for each network checked",
      spec: "spec 4.2; decisions › Networks: each configured network once; wire format › supported",
      dialect: "cronos",
      async run({ http, shared }) {
        const answer = await http.get(PATHS.supported);
        const what = "the supported kinds";
        const body = expectObject(expectJson(answer, 200, what), what);
        if (!Array.isArray(body.kinds)) fail("{kinds: [...]}", describeAnswer(answer));
        shared.set(SUPPORTED_KEY, body);
        const kinds = body.kinds as unknown[];
        const cronos = kinds.filter((kind) => (kind as { x402Version?: unknown })?.x402Version === X402_VERSION);
        for (const kind of cronos) {
          const { scheme, network } = kind as { scheme?: unknown; network?: unknown };
          if (scheme !== EXACT_SCHEME || typeof network !== "string") fail(`each x402Version 1 kind {x402Version: 1, scheme: "exact", network: string}`, brief(kind));
        }
        const networks = cronos.map((kind) => (kind as { network: string }).network);
        const twice = networks.find((network, index) => networks.indexOf(network) !== index);
        if (twice !== undefined) fail(`each network once`, `${twice} twice in ${brief(kinds)}`);
        const missing = targets.map((target) => target.network).filter((network) => !networks.includes(network));
        if (missing.length > 0) fail(`x402Version 1 kinds for ${missing.join(", ")}`, `only ${networks.join(", ") || "none"} in ${brief(kinds)}`);
        return `lists ${networks.join(", ")}`;
      },
    },
    {
      id: "http.unknown-route",
      title: "an unknown route answers 404 JSON {\"error\": \"Not found\"}",
      spec: "decisions › HTTP status codes: unknown route",
      dialect: "cronos",
      async run({ http }) {
        const answer = await http.get("/v2/x402/no-such-operation");
        const body = expectObject(expectJson(answer, 404, 'an unknown route: {"error": "Not found"}'), "404 body");
        if (body.error !== RequestError.notFound) fail('{"error": "Not found"}', describeAnswer(answer));
      },
    },
  ];
}
