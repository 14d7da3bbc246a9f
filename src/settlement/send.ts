import type { Address } from "viem";
import { FeeCapError, KeyNotLeasedError, RelaySendError, type RelayHooks, type SentTransaction, type SignedRelay } from "../chain/relayer/index.js";
import type { SettlementCall, SettlementRecord } from "../ledger/types.js";
import { followTransaction } from "./follow.js";
import type { SettlementDeps } from "./deps.js";
import type { SettlementResult } from "./result.js";
import type { NetworkRuntime } from "./runtime.js";
import { KitErrorOf } from "../protocol/errors.js";
import { paymentAttributes, step } from "../telemetry/spans.js";

/** A write-ahead record refused: the row changed hands (or a lease lapsed), so this instance must not broadcast. */
export class Fenced extends KitErrorOf("Fenced", "fenced") {}

/**
 * Sends an owned claim from `from`, recording each signed transaction before its broadcast, then
 * follows it to its receipt until `deadline`. "fenced": the row changed hands meanwhile.
 */
export async function sendClaimed(
  deps: SettlementDeps,
  record: SettlementRecord,
  call: SettlementCall,
  network: NetworkRuntime,
  from: Address,
  deadline: number,
): Promise<SettlementResult | "fenced"> {
  const { ledger, instanceId, logger } = deps;
  let sent: Pick<SentTransaction, "hashes" | "superseded">;
  try {
    // A send the node refuses for now (a lagging backend, a full pool) is tried again until the settle's deadline.
    sent = await step("x402 send", {}, async (span) => {
      const transaction = await network.relayer.send(call, from, writeAhead(deps, record.id), deadline);
      span?.setAttributes(paymentAttributes({ txHash: transaction.hashes()[0] }));
      return transaction;
    });
  } catch (error) {
    // Nothing was signed or recorded: the key is not ours (now), so a key holder sends it.
    if (error instanceof Fenced || error instanceof KeyNotLeasedError || (error instanceof RelaySendError && error.cause instanceof Fenced)) return "fenced";
    if (error instanceof RelaySendError && error.maybeSent) {
      if (error.cause instanceof KeyNotLeasedError) {
        logger.warn({ id: record.id, txHash: error.hash, relayer: from }, "settle transaction recorded, then the relayer key's lease lapsed: the key's holder sends it; its receipt is awaited here");
      } else {
        logger.error({ id: record.id, txHash: error.hash, err: String(error.cause) }, "settle send failed midway");
      }
      sent = error.transaction ?? { hashes: () => [error.hash], superseded: false };
    } else {
      // Refused outright (or the fee cap stopped it before signing, or the ledger refused its
      // write-ahead record): nothing is out there. The row fails as "not sent" and may be claimed
      // again; while the ledger is unreachable it stays claimed until the service's recovery releases it.
      await ledger.markFailed(record.id, { code: "notSent", owner: instanceId }).catch(() => undefined);
      if (error instanceof FeeCapError) return { kind: "notSent", fault: { code: "fee_cap", neededWei: error.neededWei, capWei: error.capWei } };
      return { kind: "notSent", fault: { code: "not_sent", network: network.config.network, why: "refused", detail: error instanceof Error ? error.message : String(error) } };
    }
  }
  return followTransaction(deps, record, network, sent, deadline);
}

/**
 * The ledger's part in each broadcast of a row's transaction: the write-ahead record of the first
 * (for the row's owner) and of every replacement (for the relayer key's lease holder), and refusals.
 */
export function writeAhead(deps: SettlementDeps, id: number): RelayHooks {
  const { ledger, instanceId, logger } = deps;
  return {
    beforeBroadcast: async (tx) => {
      const fees = { ...recordedFees(tx), ...(tx.epoch !== undefined ? { leaseEpoch: tx.epoch } : {}) };
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
            checkAfterMs: deps.settings.reconcileAfterMs,
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

/**
 * The ledger's part in each broadcast of a gap filler of the key leased to this instance on `chainId`:
 * its own write-ahead record, refused unless the lease it was signed under is still this instance's.
 */
export function fillerWriteAhead(deps: SettlementDeps, chainId: number): RelayHooks {
  const { ledger, instanceId, logger } = deps;
  return {
    beforeBroadcast: async (tx) => {
      if (tx.epoch === undefined) throw new Fenced(`gap filler ${tx.hash} was signed under no lease`);
      const recorded = await ledger.recordFiller({
        chainId,
        holder: instanceId,
        leaseEpoch: tx.epoch,
        hash: tx.hash,
        raw: tx.raw,
        relayer: tx.from,
        relayerNonce: tx.nonce,
        ...recordedFees(tx),
        ...(tx.replaces ? { replaces: tx.replaces } : {}),
      });
      if (!recorded) throw new Fenced(`relayer key ${tx.from} is no longer leased to this instance (generation ${tx.epoch})`);
    },
    afterBroadcast: (tx, outcome) => {
      if (outcome !== "refused") return;
      ledger.markFillerRefused(tx.hash).catch((error: unknown) => logger.error({ txHash: tx.hash, err: String(error) }, "ledger: gap filler's state not recorded"));
    },
  };
}

function recordedFees(tx: SignedRelay): { feeCap: bigint; priorityFee?: bigint } {
  return { feeCap: tx.feeCap, ...(tx.priorityFee !== undefined ? { priorityFee: tx.priorityFee } : {}) };
}
