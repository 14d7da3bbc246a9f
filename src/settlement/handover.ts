import type { Address, Hex } from "viem";
import type { AdoptedTransaction, KeyLease, RelayHooks } from "../chain/relayer/index.js";
import type { FillerRecord, SettlementRecord } from "../ledger/types.js";
import { fillerWriteAhead, writeAhead } from "./send.js";
import type { KeyHolder, SettlementNetwork, SettlementSteps } from "./steps.js";

/** Most gap fillers of one key a new holder follows (a key's fillers in flight are a handful). */
const MAX_ADOPTED_FILLERS = 256;

/**
 * Follows the relayer key `address`, leased to this instance now under generation `epoch`: every
 * unfinished row whose latest transaction is that key's, and every gap filler of the key not yet mined,
 * goes to the relayer, which replaces each when stuck and re-broadcasts it when dropped (after a restart,
 * or a key taken over from an instance that died or lost the lease). Every broadcast after this is
 * written ahead under that lease.
 */
export function adoptKey(steps: SettlementSteps, networks: ReadonlyMap<number, SettlementNetwork>, keys: KeyHolder, address: Address, epoch: number): void {
  const { ledger, logger } = steps;
  for (const network of networks.values()) {
    const lease: KeyLease = { epoch, valid: () => keys.holds(address, epoch), fillers: fillerWriteAhead(steps, network.chainId) };
    void network.relayer
      .adopt(
        address,
        async () => {
          const [rows, mined] = await Promise.all([
            ledger.listPending({ chainIds: [network.chainId] }),
            network.client.getTransactionCount({ address, blockTag: "latest" }),
          ]);
          const fillers = await ledger.pendingFillers({ chainId: network.chainId, relayer: address, fromNonce: mined, limit: MAX_ADOPTED_FILLERS });
          return [...rows.flatMap((row) => settlementTransactionOf(steps, row, address)), ...fillersByNonce(fillers, lease.fillers)];
        },
        lease,
      )
      .catch((error: unknown) => logger.error({ relayer: address, network: network.name, err: String(error) }, "relayer: recorded transactions not taken over"));
  }
}

/**
 * This instance lost (or gave up) the lease of `address`: its relayers stop sending from it at once,
 * leaving the key's transactions in flight to the ledger's records (its next holder adopts them).
 * Returns how many transactions were handed over that way.
 */
export function releaseKey(networks: ReadonlyMap<number, SettlementNetwork>, address: Address): number {
  let handedOver = 0;
  for (const network of networks.values()) handedOver += network.relayer.revoke(address);
  return handedOver;
}

/** The versions of a row's latest transaction when it is the key's and may still be mined. */
function settlementTransactionOf(steps: SettlementSteps, row: SettlementRecord, address: Address): AdoptedTransaction[] {
  if (row.status !== "sent" || row.relayer?.toLowerCase() !== address.toLowerCase() || row.relayerNonce === undefined) return [];
  const versions = row.transactions
    .filter((tx) => tx.relayerNonce === row.relayerNonce && tx.relayer.toLowerCase() === address.toLowerCase() && (tx.state === "signed" || tx.state === "accepted"))
    .map((tx) => tx.raw);
  return versions.length > 0 ? [{ raws: versions, hooks: writeAhead(steps, row.id) }] : [];
}

/** Recorded gap fillers as the relayer follows them: every version at one nonce together, oldest first. */
function fillersByNonce(fillers: readonly FillerRecord[], hooks: RelayHooks): AdoptedTransaction[] {
  const byNonce = new Map<number, Hex[]>();
  for (const filler of fillers) byNonce.set(filler.relayerNonce, [...(byNonce.get(filler.relayerNonce) ?? []), filler.raw]);
  return [...byNonce.values()].map((raws) => ({ raws, hooks, filler: true }));
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
