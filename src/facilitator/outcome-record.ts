// One verify or settle request's outcome, as the metrics, the log line and the dashboard's feed take it.
import type { DialectName } from "./dialects/index.js";

/** What happened to one verify or settle request. */
export interface OutcomeRecord {
  requestId: string;
  route: "verify" | "settle";
  /** Which dialect the request spoke: `cronos` (x402Version 1) or `x402v2`; `unknown` when refused before its body was read. */
  dialect: DialectName | "unknown";
  status: number;
  network: string;
  payer?: string;
  payee?: string;
  amount?: string;
  /** `valid`, `settled`, or the reason / error text. */
  outcome: string;
  /** A bounded label for metrics: `valid`, `settled`, a verify failure code, a settle error key, `invalid_request`, `fault`. */
  code: string;
  txHash?: string;
  durationMs: number;
  /**
   * Refused before any payment check: a missing or unknown API key (401), a body too large (413) or
   * of another type (415), a body that is not JSON or not a payment (400). Counted in metrics and
   * logged; not a payment's outcome, so the dashboard's feed does not show it.
   */
  edge?: true;
}
