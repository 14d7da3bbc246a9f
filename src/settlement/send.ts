import type { Address } from "viem";
import { FeeCapError, RelaySendError, type RelayHooks, type SentTransaction } from "../chain/relayer.js";
import { NOT_SENT_ERROR, type SettlementCall, type SettlementRecord } from "../ledger/types.js";
import { followTransaction } from "./follow.js";
import type { SettlementNetwork, SettlementResult, SettlementSteps } from "./steps.js";

/** A write-ahead record refused: the row changed hands (or a lease lapsed), so this instance must not broadcast. */
export class Fenced extends Error {
  override name = "Fenced";
}

/**
 * Sends an owned claim from `from`, recording each signed transaction before its broadcast, then
 * follows it to its receipt until `deadline`. "fenced": the row changed hands meanwhile.
 */
export async function sendClaimed(
  steps: SettlementSteps,
  record: SettlementRecord,
  call: SettlementCall,
  network: SettlementNetwork,
  from: Address,
  deadline: number,
): Promise<SettlementResult | "fenced"> {
  const { ledger, instanceId, logger } = steps;
  let sent: Pick<SentTransaction, "hashes" | "superseded">;
  try {
    sent = await network.relayer.send(call, from, writeAhead(steps, record.id));
  } catch (error) {
    if (error instanceof Fenced || (error instanceof RelaySendError && error.cause instanceof Fenced)) return "fenced";
    if (error instanceof RelaySendError && error.maybeSent) {
      logger.error({ id: record.id, txHash: error.hash, err: String(error.cause) }, "settle send failed midway");
      sent = error.transaction ?? { hashes: () => [error.hash], superseded: false };
    } else {
      // Refused outright (or the fee cap stopped it before signing, or the ledger refused its
      // write-ahead record): nothing is out there. The row fails as "not sent" and may be claimed
      // again; while the ledger is unreachable it stays claimed until the service's recovery releases it.
      await ledger.markFailed(record.id, { error: NOT_SENT_ERROR, owner: instanceId }).catch(() => undefined);
      if (error instanceof FeeCapError) return { kind: "notSent", reason: `${error.message}; nothing was sent` };
      return { kind: "notSent", reason: `relayer could not send: ${error instanceof Error ? error.message : String(error)}` };
    }
  }
  return followTransaction(steps, record, network, sent, deadline);
}

/**
 * The ledger's part in each broadcast of a row's transaction: the write-ahead record of the first
 * (for the row's owner) and of every replacement (for the relayer key's lease holder), and refusals.
 */
export function writeAhead(steps: SettlementSteps, id: number): RelayHooks {
  const { ledger, instanceId, logger } = steps;
  return {
    beforeBroadcast: async (tx) => {
      const fees = { feeCap: tx.feeCap, ...(tx.priorityFee !== undefined ? { priorityFee: tx.priorityFee } : {}) };
      const recorded = tx.replaces
        ? await ledger.recordReplacement({ id, holder: instanceId, hash: tx.hash, raw: tx.raw, relayer: tx.from, relayerNonce: tx.nonce, ...fees })
        : await ledger.recordBroadcast({
            id,
            owner: instanceId,
            hash: tx.hash,
            raw: tx.raw,
            relayer: tx.from,
            relayerNonce: tx.nonce,
            ...fees,
            checkAfterMs: steps.reconcileAfterMs,
          });
      if (!recorded) throw new Fenced(`settlement ${id} is no longer ours to send`);
    },
    // Only a refusal changes what the ledger must know (that transaction never existed out there);
    // an accepted one stays `signed` until its receipt, which spares a write per settle.
    afterBroadcast: (tx, outcome) => {
      if (outcome !== "refused") return;
      ledger.markTransaction(tx.hash, outcome).catch((error: unknown) => logger.error({ txHash: tx.hash, err: String(error) }, "ledger: transaction state not recorded"));
    },
  };
}
