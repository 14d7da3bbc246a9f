import type { SettlementRecord } from "../ledger/types.js";
import type { NetworkName } from "../protocol/networks.js";
import { networkOfChain } from "./deps.js";
import { reconcileRow, type ReconcilerAction, type ResendFollowed, type RowCheckDeps } from "./reconcile-row.js";
import type { NetworkRuntime } from "./runtime.js";

export { UndecidedPaymentError, type ReconcilerAction } from "./reconcile-row.js";

/** What the reconciler reads: a row's check's, and each served network's chain reads. */
export type ReconcilerDeps = RowCheckDeps & { networks: ReadonlyMap<NetworkName, Pick<NetworkRuntime, "config" | "paymentReads">> };

/** Options of {@link Reconciler}. */
export interface ReconcilerOptions {
  /** Rows per round; default 20. */
  batch?: number;
  /** A row still pending is looked at again after this long; default 5 s. */
  recheckMs?: number;
  /**
   * Broadcasts again, through this instance's relayer, the transaction at `relayer`'s `relayerNonce` on `chainId`
   * when the relayer follows it (in the key's nonce order, under its lock: a second sender of the same key could
   * only race it, out of order on a Cronos node): true when it was sent again, false when the relayer did not
   * need to, undefined when the relayer does not follow it (the reconciler broadcasts it itself). Default: none.
   */
  resendFollowed?: ResendFollowed;
  onAction?: (action: ReconcilerAction, record: SettlementRecord) => void;
  onError?: (error: unknown, record: SettlementRecord) => void;
}

/**
 * Finishes settlements whose owner is gone or late. Every instance runs one; `takeDue` hands each due
 * row of the chains it serves to one instance per round, so they share the work without doing it twice;
 * each row is checked by {@link reconcileRow}.
 */
export class Reconciler {
  readonly #deps: ReconcilerDeps;
  readonly #options: ReconcilerOptions;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<number> | undefined;

  constructor(deps: ReconcilerDeps, options: ReconcilerOptions = {}) {
    this.#deps = deps;
    this.#options = options;
  }

  /** One round over the due rows; resolves with how many were looked at. */
  tick(): Promise<number> {
    this.#running ??= this.#round().finally(() => (this.#running = undefined));
    return this.#running;
  }

  async #round(): Promise<number> {
    const rows = await this.#deps.ledger.takeDue({
      chainIds: [...this.#deps.networks.values()].map((network) => network.config.chainId),
      limit: this.#options.batch ?? 20,
      recheckMs: this.#options.recheckMs ?? 5_000,
    });
    await Promise.all(
      rows.map(async (row) => {
        try {
          const action = await this.reconcile(row);
          if (action) this.#options.onAction?.(action, row);
        } catch (error) {
          this.#options.onError?.(error, row);
        }
      }),
    );
    return rows.length;
  }

  /** Decides one row ({@link reconcileRow}); undefined for a chain this instance does not serve. */
  async reconcile(row: SettlementRecord): Promise<ReconcilerAction | undefined> {
    const network = networkOfChain(this.#deps.networks, row.key.chainId);
    return network ? reconcileRow(this.#deps, network.paymentReads, row, this.#options.resendFollowed) : undefined;
  }

  /** Runs a round every `intervalMs` (default 2 s) until {@link stop}. */
  start(intervalMs = 2_000, onError: (error: unknown) => void = () => {}): void {
    this.#timer = setInterval(() => void this.tick().catch(onError), intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#running?.catch(() => undefined);
  }
}
