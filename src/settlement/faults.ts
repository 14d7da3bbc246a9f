// The faults of verify and settle: not protocol outcomes, answered by status at the HTTP edge.
import { KitError } from "../protocol/errors.js";

/**
 * A fault (RPC down, the ledger unreachable): not a protocol outcome. The HTTP layer answers it by
 * route, as decided: verify 500; settle 503 (thrown only before anything was sent).
 */
export class FacilitatorFault extends KitError<"facilitator_fault"> {
  override name = "FacilitatorFault";
  constructor(message: string, options?: ErrorOptions) {
    super("facilitator_fault", message, options);
  }
}

/**
 * A settle refused because the payer (whose signature was proven) spent its settle quota: answered
 * 429 with `Retry-After`. Nothing was claimed or sent.
 */
export class PayerQuotaExceeded extends KitError<"payer_quota_exceeded"> {
  override name = "PayerQuotaExceeded";
  constructor(readonly retryAfterSeconds: number) {
    super("payer_quota_exceeded", `the payer's settle quota is spent; retry in ${retryAfterSeconds} s`);
  }
}
