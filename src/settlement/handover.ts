import type { Address } from "viem";
import type { AdoptedTransaction } from "../chain/relayer.js";
import type { SettlementRecord } from "../ledger/types.js";
import { writeAhead } from "./send.js";
import type { KeyHolder, SettlementNetwork, SettlementSteps } from "./steps.js";

/**
 * Follows the relayer key `address` of this instance's now: every unfinished row whose latest
 * transaction is that key's goes to the relayer, which replaces it when stuck and re-broadcasts it
 * when dropped (after a restart, or a key taken over from an instance that died).
 */
export function adoptKey(steps: SettlementSteps, networks: ReadonlyMap<number, SettlementNetwork>, address: Address): void {
  const { ledger, logger } = steps;
  for (const network of networks.values()) {
    void network.relayer
      .adopt?.(address, async () => {
        const rows = await ledger.listPending({ chainIds: [network.chainId] });
        return rows.flatMap((row): AdoptedTransaction[] => {
          if (row.status !== "sent" || row.relayer?.toLowerCase() !== address.toLowerCase() || row.relayerNonce === undefined) return [];
          const versions = row.transactions
            .filter((tx) => tx.relayerNonce === row.relayerNonce && tx.relayer.toLowerCase() === address.toLowerCase() && (tx.state === "signed" || tx.state === "accepted"))
            .map((tx) => tx.raw);
          return versions.length > 0 ? [{ raws: versions, hooks: writeAhead(steps, row.id) }] : [];
        });
      })
      .catch((error: unknown) => logger.error({ relayer: address, network: network.name, err: String(error) }, "relayer: recorded transactions not taken over"));
  }
}

/** A handed-off settlement this instance took, ready to send. */
export interface TakenSettlement {
  row: SettlementRecord;
  network: SettlementNetwork;
  from: Address;
  /** `performance.now()` time by which its outcome is due (the row's settle time-out). */
  deadline: number;
}

/**
 * Takes settlements handed to key holders while this instance holds keys: each with the key to send it
 * from; one no held key can send goes back to the queue.
 */
export async function takeHandedOver(
  steps: SettlementSteps,
  parameters: { keys: KeyHolder; networks: ReadonlyMap<number, SettlementNetwork>; ownerTtlMs: number; settleTimeoutMs: number },
): Promise<TakenSettlement[]> {
  const { keys, networks } = parameters;
  const held = keys.held();
  if (held.length === 0) return [];
  const rows = await steps.ledger.takeQueued({ owner: steps.instanceId, chainIds: [...networks.keys()], limit: held.length * 8, ownerTtlMs: parameters.ownerTtlMs });
  const taken: TakenSettlement[] = [];
  for (const row of rows) {
    const network = networks.get(row.key.chainId)!;
    const from = network.relayer.pick(keys.held());
    if (!from) {
      await steps.ledger.requeue(row.id, steps.instanceId);
      continue;
    }
    // The handler waits on the ledger; the deadline is the row's (its settle time-out).
    taken.push({ row, network, from, deadline: performance.now() + Math.max(0, (row.deadlineAt ?? 0) - Date.now()) + parameters.settleTimeoutMs });
  }
  return taken;
}
