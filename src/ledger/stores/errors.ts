import type { SettlementStatus } from "./settlements.js";
import { KitError } from "../../protocol/errors.js";

/** What a ledger call ran into: a refused state change, a row that is not there, a schema it cannot use, a database that does not answer. */
export type LedgerErrorCode = "illegal_transition" | "not_found" | "config" | "unavailable";

/** Every ledger error: `code` is stable. */
export class LedgerError extends KitError<LedgerErrorCode> {
  override name = "LedgerError";
  constructor(code: LedgerErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, { ...options, docsPath: "docs/operations.md#the-settlement-ledger-and-several-instances-as-one-service" });
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
