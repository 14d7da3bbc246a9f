// The key worker: what this instance does as a relayer key's lease holder (adopt, release, drain the hand-overs, recover after an outage).
import type { Address, Hex } from "viem";
import type { AdoptedTransaction, KeyLease, RelayHooks } from "../chain/relayer/index.js";
import type { FillerRecord, SettlementRecord } from "../ledger/types.js";
import { networkOfChain, type SettlementDeps } from "./deps.js";
import { fillerWriteAhead, sendClaimed, writeAhead } from "./send.js";

/** Most gap fillers of one key a new holder follows (a key's fillers in flight are a handful). */
const MAX_ADOPTED_FILLERS = 256;

/**
 * This instance as a relayer key holder: it follows the keys it takes ({@link adopt}), stops sending from
 * those it loses ({@link release}), sends the settlements other instances handed to key holders
 * ({@link drain}, notified by the ledger, with a poll as fallback), and after a ledger outage writes what
 * the outbox kept and releases the claims answered 503 meanwhile ({@link recover}).
 */
export class KeyWorker {
  readonly #deps: SettlementDeps;
  #unsubscribe: (() => void) | undefined;
  #poll: NodeJS.Timeout | undefined;
  #draining: Promise<void> | undefined;
  #again = false;

  constructor(deps: SettlementDeps) {
    this.#deps = deps;
  }

  /**
   * Follows the relayer key `address`, leased to this instance now under generation `epoch`: every
   * unfinished row whose latest transaction is that key's, and every gap filler of the key not yet mined,
   * goes to the relayer, which replaces each when stuck and re-broadcasts it when dropped (after a restart,
   * or a key taken over from an instance that died or lost the lease). Every broadcast after this is
   * written ahead under that lease.
   */
  adopt(address: Address, epoch: number): void {
    const deps = this.#deps;
    const { ledger, logger, keys } = deps;
    for (const network of deps.networks.values()) {
      const { chainId } = network.config;
      const lease: KeyLease = { epoch, valid: () => keys.holds(address, epoch), fillers: fillerWriteAhead(deps, chainId) };
      const load = async () => {
        const [rows, mined] = await Promise.all([ledger.listPending({ chainIds: [chainId] }), network.client.getTransactionCount({ address, blockTag: "latest" })]);
        const fillers = await ledger.pendingFillers({ chainId, relayer: address, fromNonce: mined, limit: MAX_ADOPTED_FILLERS });
        return [...rows.flatMap((row) => settlementTransactionOf(deps, row, address)), ...fillersByNonce(fillers, lease.fillers)];
      };
      void network.relayer
        .adopt(address, load, lease)
        .catch((error: unknown) => logger.error({ relayer: address, network: network.config.network, err: String(error) }, "relayer: recorded transactions not taken over"));
    }
  }

  /**
   * The lease of `address` is no longer this instance's: nothing more is sent from the key here, at once,
   * and its transactions in flight are left to their records for the next holder. Returns how many there were.
   */
  release(address: Address): number {
    let handedOver = 0;
    for (const network of this.#deps.networks.values()) handedOver += network.relayer.revoke(address);
    return handedOver;
  }

  /** Takes settlements handed to key holders while this instance holds keys, and sends them. */
  drain(): Promise<void> {
    if (this.#draining) {
      this.#again = true;
      return this.#draining;
    }
    this.#draining = (async () => {
      do {
        this.#again = false;
        await this.#drainOnce();
      } while (this.#again);
    })().finally(() => (this.#draining = undefined));
    return this.#draining;
  }

  /** One take of the queue: each row with a held key to send it from; one no held key can send goes back. */
  async #drainOnce(): Promise<void> {
    const deps = this.#deps;
    const { ledger, keys, instanceId, settings } = deps;
    const held = keys.held();
    if (held.length === 0) return;
    const chainIds = [...deps.networks.values()].map((network) => network.config.chainId);
    const rows = await ledger.takeQueued({ owner: instanceId, chainIds, limit: held.length * 8, ownerTtlMs: settings.ownerTtlMs });
    for (const row of rows) {
      const network = networkOfChain(deps.networks, row.key.chainId)!;
      const from = network.relayer.pick(keys.held());
      if (!from) {
        await ledger.requeue(row.id, instanceId);
        continue;
      }
      // The handler that handed it over waits on the ledger; the deadline is the row's (its settle time-out).
      const deadline = performance.now() + Math.max(0, (row.deadlineAt ?? 0) - deps.now()) + settings.settleTimeoutMs;
      void deps.inFlight
        .claim(row.id, () => sendClaimed(deps, row, row.call!, network, from, deadline))
        .catch((error: unknown) => deps.logger.error({ id: row.id, err: String(error) }, "handed-off settle failed"));
    }
  }

  /**
   * After the ledger was unreachable: writes the outcomes kept meanwhile (first), then gives up this
   * instance's claims whose settles were answered 503 meanwhile (nothing was recorded as sent for them),
   * so a retry of each claims it afresh. False while the ledger still refuses.
   */
  async recover(): Promise<boolean> {
    const { outbox, ledger, instanceId, inFlight, logger } = this.#deps;
    if (!(await outbox.drain())) return false;
    const released = await ledger.withdrawOwned({ owner: instanceId, code: "notSent", keep: inFlight.claims() });
    if (released.length > 0) logger.info({ released }, "claims abandoned during the ledger outage released (nothing was sent for them)");
    return true;
  }

  /** Starts taking handed-off settlements (notified by the ledger, and polling as a fallback). */
  start(): void {
    const wake = () => void this.drain().catch((error: unknown) => this.#deps.logger.error({ err: String(error) }, "ledger: taking queued settlements failed"));
    this.#unsubscribe = this.#deps.ledger.onQueued(wake);
    this.#poll = setInterval(wake, this.#deps.settings.queuePollMs);
    this.#poll.unref();
    wake();
  }

  /** Stops taking new work and waits (up to `graceMs`) for the sends and receipt waits in flight. */
  async stop(graceMs = 30_000): Promise<void> {
    this.#unsubscribe?.();
    clearInterval(this.#poll);
    await this.#deps.inFlight.settled(graceMs, this.#draining);
  }
}

/** The versions of a row's latest transaction when it is the key's and may still be mined. */
function settlementTransactionOf(deps: SettlementDeps, row: SettlementRecord, address: Address): AdoptedTransaction[] {
  if (row.status !== "sent" || row.relayer?.toLowerCase() !== address.toLowerCase() || row.relayerNonce === undefined) return [];
  const versions = row.transactions
    .filter((tx) => tx.relayerNonce === row.relayerNonce && tx.relayer.toLowerCase() === address.toLowerCase() && (tx.state === "signed" || tx.state === "accepted"))
    .map((tx) => tx.raw);
  return versions.length > 0 ? [{ raws: versions, hooks: writeAhead(deps, row.id) }] : [];
}

/** Recorded gap fillers as the relayer follows them: every version at one nonce together, oldest first. */
function fillersByNonce(fillers: readonly FillerRecord[], hooks: RelayHooks): AdoptedTransaction[] {
  const byNonce = new Map<number, Hex[]>();
  for (const filler of fillers) byNonce.set(filler.relayerNonce, [...(byNonce.get(filler.relayerNonce) ?? []), filler.raw]);
  return [...byNonce.values()].map((raws) => ({ raws, hooks, filler: true }));
}
