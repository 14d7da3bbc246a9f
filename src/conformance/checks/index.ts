import type { Check } from "../check.js";
import { cronosCodec } from "../dialects/cronos.js";
import type { Target } from "../target.js";
import { rateLimitChecks } from "./rate-limit.js";
import { requestChecks } from "./requests.js";
import { serviceChecks } from "./service.js";
import { paymentChecks, settleRefusalChecks } from "./settle.js";
import { verifyChecks } from "./verify.js";

/**
 * The catalog of the Cronos dialect for the networks under test, in the order they run: the service,
 * request-level refusals, then per network verify, settle's refusals and the paid checks, and last the
 * rate limits (they spend the quota).
 */
export function cronosCatalog(targets: readonly Target[]): Check[] {
  const sample = targets[0];
  if (!sample) throw new RangeError("at least one network is needed");
  return [
    ...serviceChecks(targets),
    ...requestChecks(sample),
    ...targets.flatMap((target) => [...verifyChecks(cronosCodec, target), ...settleRefusalChecks(cronosCodec, target), ...paymentChecks(cronosCodec, target)]),
    ...rateLimitChecks(sample),
  ];
}
