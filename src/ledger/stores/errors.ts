import type { SettlementStatus } from "./settlements.js";

/** Every ledger error: `code` is stable. */
export class LedgerError extends Error {
  override name = "LedgerError";
  constructor(
    readonly code: "illegal_transition" | "not_found" | "config" | "unavailable",
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A state change the ledger refuses (e.g. a settled row marked failed). */
export class IllegalTransitionError extends LedgerError {
  override name = "IllegalTransitionError";
  constructor(
    readonly from: SettlementStatus,
    readonly to: SettlementStatus,
    id: number,
  ) {
    super("illegal_transition", `settlement ${id}: ${from} → ${to} is not allowed`);
  }
}
