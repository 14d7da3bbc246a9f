import type { SettlementRecord } from "../ledger/types.js";
import type { RowProof } from "../state/index.js";
import { decidePayment, termsOf, type DecisionChain } from "./decision.js";

/**
 * What the one payment decision ({@link decidePayment}) says of a settled row on the chain now, for the chain's history
 * (state's `ChainHistory`, which keeps or sets aside the row by it): `proven` when the row's own transaction paid it in
 * the row's block; `disproven` when the chain shows otherwise (that transaction mined without paying it, or elsewhere; the
 * authorization spent by another transfer or canceled; paid by another transaction); `absent` when nothing shows either
 * way (no receipt, the authorization unused: a node behind looks the same); `unknown` when the chain cannot tell now.
 * Rejects when the row's receipt cannot be read.
 */
export async function proveSettled(chain: DecisionChain, row: SettlementRecord): Promise<RowProof> {
  if (!row.txHash || row.blockNumber === undefined) return "disproven";
  const receipt = await chain.receipt(row.txHash);
  const decision = await decidePayment(chain, termsOf(row), { ours: receipt ? [receipt] : [] });
  switch (decision.outcome) {
    case "paid":
      return decision.transfer.txHash.toLowerCase() === row.txHash.toLowerCase() && decision.transfer.blockNumber === row.blockNumber ? "proven" : "disproven";
    case "failed":
      return "disproven";
    case "unused":
      return receipt ? "disproven" : "absent";
    case "undecided":
      return "unknown";
  }
}
