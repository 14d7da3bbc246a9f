import type { RefusalCase } from "../cases.js";
import type { Check, Need } from "../check.js";
import type { Codec } from "../codec.js";
import type { Target } from "../target.js";
import { caseContextOf } from "./context.js";

/** Whether a refusal case applies to `target`'s network. */
export function appliesTo(refusal: RefusalCase, target: Target): boolean {
  return refusal.networks === undefined || refusal.networks.includes(target.network);
}

/** What a check of `refusal` needs: a buyer for a used nonce (its own), an RPC for the chain's clock. */
function needsOf(refusal: RefusalCase): Need[] {
  return [...(refusal.needs?.includes("usedNonce") ? (["buyer"] as const) : []), ...(refusal.needs?.includes("chainClock") ? (["rpc"] as const) : [])];
}

/** What an x402 v2 check proves besides its row: the same row in that dialect's shapes and codes. */
const V2_ROW = "decisions › Two dialects (x402 v2 shapes, @x402/evm codes)";

/** The fields every check of `codec` on `target` carries, with the row it proves. */
export function boundTo(codec: Codec, target: Target, spec: string): Pick<Check, "dialect" | "target" | "network" | "spec"> {
  return { dialect: codec.dialect, target, network: codec.networkName(target), spec: codec.dialect === "x402-v2" ? `${spec}; ${V2_ROW}` : spec };
}

/**
 * `verify.<case>`: verify refuses the case's payment with its reason (Cronos: 200 `{isValid: false,
 * invalidReason}`). `settle.<case>`: settle refuses it with its own word for the reason, sending nothing.
 */
export function refusalCheck(codec: Codec, operation: "verify" | "settle", refusal: RefusalCase, target: Target): Check {
  return {
    id: `${operation}.${refusal.id}`,
    title: `${operation} refuses ${refusal.title}`,
    ...boundTo(codec, target, operation === "verify" ? refusal.spec : `${refusal.spec}; decisions › Settle (re-runs verify)`),
    needs: needsOf(refusal),
    async run(context) {
      const built = await refusal.build(await caseContextOf(context, target, refusal.needs));
      codec.expectRefused(operation, await codec.send(context.http, operation, built), built.expected, built);
    },
  };
}

/** The refusal cases `codec` can express on `target`, those needing a used nonce apart (they run after a payment). */
export function refusalCases(cases: readonly RefusalCase[], codec: Codec, target: Target, usedNonce: boolean): RefusalCase[] {
  return cases.filter((refusal) => appliesTo(refusal, target) && codec.expresses(refusal) && Boolean(refusal.needs?.includes("usedNonce")) === usedNonce);
}
