import { EXACT_SCHEME } from "../../protocol/reasons.js";
import { X402_V2_VERSION } from "../../protocol/x402v2.js";
import { brief } from "../brief.js";
import { signFor } from "../case-payment.js";
import { fail, type Check, type CheckContext } from "../check.js";
import { isV2Network, signersOf, v2BodyOf } from "../dialects/x402v2.js";
import { expectJson, expectObject } from "../expect.js";
import { describeAnswer, PATHS } from "../http.js";
import type { Target } from "../target.js";
import { caseContextOf, freshSignerOf } from "./context.js";
import { SUPPORTED_KEY } from "./service.js";

const V2_ROW = "decisions › Two dialects";

/** A well-formed x402 v2 body for `target`, signed by a key that holds nothing. */
async function validV2Body(context: CheckContext, target: Target) {
  const caseContext = { ...(await caseContextOf(context, target)), signer: freshSignerOf(context) };
  const paymentHeader = await signFor(caseContext);
  return { paymentHeader, ...v2BodyOf({ paymentHeader, paymentRequirements: caseContext.requirements }) };
}

/** A v2 request the facilitator must refuse as a request (400), and the word its answer must name. */
const BAD_V2_REQUESTS = [
  {
    id: "v2-mixed-dialects",
    title: "a body mixing the dialects (x402Version 2 with a Cronos paymentHeader) is 400 in v2's shape, naming paymentHeader",
    spec: `${V2_ROW}: a body that mixes the two is 400 naming the problem`,
    body: ({ paymentHeader, paymentRequirements }: Awaited<ReturnType<typeof validV2Body>>) => ({ x402Version: X402_V2_VERSION, paymentHeader, paymentRequirements }),
    names: "paymentHeader",
  },
  {
    id: "v2-field-missing",
    title: "an x402 v2 body without paymentRequirements is 400 in v2's shape, naming it",
    spec: `${V2_ROW}; decisions › HTTP status codes: missing fields → 400`,
    body: ({ x402Version, paymentPayload }: Awaited<ReturnType<typeof validV2Body>>) => ({ x402Version, paymentPayload }),
    names: "paymentRequirements",
  },
] as const;

/** The checks of the x402 v2 dialect that concern the whole service: supported, and requests refused as such. */
export function v2ServiceChecks(targets: readonly Target[]): Check[] {
  const sample = targets[0]!;
  const supported: Check = {
    id: "supported.x402-v2",
    title: 'GET /v2/x402/supported lists {x402Version: 2, scheme: "exact", network: "eip155:<chain id>"} once for each network checked, signers as lists of addresses',
    spec: `${V2_ROW}: supported lists both dialects (CAIP-2 for x402Version 2) with the relayers as signers`,
    dialect: "x402-v2",
    async run({ http, shared }) {
      const answer = await http.get(PATHS.supported);
      const body = expectObject(expectJson(answer, 200, "the supported kinds"), "the supported kinds");
      shared.set(SUPPORTED_KEY, body);
      const kinds = Array.isArray(body.kinds) ? body.kinds : [];
      const v2 = kinds.filter((kind) => (kind as { x402Version?: unknown })?.x402Version === X402_V2_VERSION) as Array<{ scheme?: unknown; network?: unknown }>;
      for (const kind of v2) {
        if (kind.scheme !== EXACT_SCHEME || !isV2Network(kind.network)) fail('each x402Version 2 kind {x402Version: 2, scheme: "exact", network: CAIP-2}', brief(kind));
      }
      const networks = v2.map((kind) => kind.network as string);
      const twice = networks.find((network, index) => networks.indexOf(network) !== index);
      if (twice !== undefined) fail("each network once", `${twice} twice in ${brief(kinds)}`);
      const missing = targets.map((target) => `eip155:${target.chainId}`).filter((network) => !networks.includes(network));
      if (missing.length > 0) fail(`x402Version 2 kinds for ${missing.join(", ")}`, `only ${networks.join(", ") || "none"} in ${brief(kinds)}`);
      if (body.signers !== undefined) {
        const signers = body.signers as Record<string, unknown>;
        const lists = typeof signers === "object" && signers !== null && !Array.isArray(signers) ? Object.values(signers) : [undefined];
        if (!lists.every((list) => Array.isArray(list) && list.every((a) => typeof a === "string" && /^0x[0-9a-fA-F]{40}$/.test(a)))) {
          fail('signers as {"<CAIP-2 pattern>": [addresses]}', brief(body.signers));
        }
      }
      const signers = signersOf(body);
      return `lists ${networks.join(", ")}${signers.length > 0 ? `; signers ${signers.join(", ")}` : ""}`;
    },
  };
  const requests = (["verify", "settle"] as const).flatMap((operation) =>
    BAD_V2_REQUESTS.map(
      (bad): Check => ({
        id: `${operation}.${bad.id}`,
        title: `${operation}: ${bad.title}`,
        spec: bad.spec,
        dialect: "x402-v2",
        async run(context) {
          const answer = await context.http.post(PATHS[operation], bad.body(await validV2Body(context, sample)), { "X402-Version": String(X402_V2_VERSION) });
          const what = operation === "verify" ? "{isValid: false, invalidReason, …}" : `{success: false, errorReason, transaction: "", network}`;
          const body = expectObject(expectJson(answer, 400, `400 ${what} naming ${bad.names}`), "400 body");
          const refused = operation === "verify" ? body.isValid === false && typeof body.invalidReason === "string" : body.success === false && typeof body.errorReason === "string";
          if (!refused) fail(`400 ${what}`, describeAnswer(answer));
          if (!answer.text.includes(bad.names)) fail(`the answer to name ${bad.names}`, describeAnswer(answer));
        },
      }),
    ),
  );
  return [supported, ...requests];
}
