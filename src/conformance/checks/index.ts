import type { Check, Dialect } from "../check.js";
import type { Codec } from "../codec.js";
import { cronosCodec } from "../dialects/cronos.js";
import { x402v2Codec } from "../dialects/x402v2.js";
import type { Target } from "../target.js";
import { rateLimitChecks } from "./rate-limit.js";
import { requestChecks } from "./requests.js";
import { serviceChecks } from "./service.js";
import { paymentChecks, settleRefusalChecks } from "./settle.js";
import { verifyChecks } from "./verify.js";
import { v2ServiceChecks } from "./x402v2.js";

/** The codec of each dialect. */
export const CODECS: Readonly<Record<Dialect, Codec>> = { cronos: cronosCodec, "x402-v2": x402v2Codec };

/**
 * The catalog for the networks and dialects under test, in the order they run: the service and the
 * request-level refusals, then per network and dialect verify, settle's refusals and the paid checks,
 * and last the rate limits (they spend the quota).
 */
export function catalog(targets: readonly Target[], dialects: readonly Dialect[] = ["cronos"]): Check[] {
  const sample = targets[0];
  if (!sample) throw new RangeError("at least one network is needed");
  const codecs = (["cronos", "x402-v2"] as const).filter((dialect) => dialects.includes(dialect)).map((dialect) => CODECS[dialect]);
  return [
    ...serviceChecks(targets),
    ...(dialects.includes("x402-v2") ? v2ServiceChecks(targets) : []),
    ...requestChecks(sample),
    ...targets.flatMap((target) =>
      codecs.flatMap((codec) => [...verifyChecks(codec, target), ...settleRefusalChecks(codec, target), ...paymentChecks(codec, target)]),
    ),
    ...rateLimitChecks(sample),
  ];
}
