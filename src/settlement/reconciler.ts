import type { Address } from "viem";
import type { BroadcastStore, PenaltyStore, SettlementRecord, SettlementStore } from "../ledger/types.js";
import type { SettlementChain } from "./chain.js";
import type { SettlementLogger } from "./logger.js";
import { LedgerOutbox } from "./outbox.js";
import { reconcileRow, type ReconcilerAction, type RowCheckDeps } from "./reconcile-row.js";

export { UndecidedPaymentError, type ReconcilerAction } from "./reconcile-row.js";

/** Options of {@link Reconciler}. */
export interface ReconcilerOptions {
  ledger: Pick<SettlementStore, "takeDue" | "markSettled" | "markFailed" | "requeue" | "withdraw"> & Pick<BroadcastStore, "markTransaction"> & Pick<PenaltyStore, "penalize">;
  /** The chains this instance serves; rows of other chains are left to instances that serve them. */
  chains: readonly SettlementChain[];
  /** A payer whose payment failed by its own doing (a revert, a cancel, a substitute) is refused this long, in chain seconds; default 0 (never). */
  revertPenaltySeconds?: number;
  /** Rows per round; default 20. */
  batch?: number;
  /** A row still pending is looked at again after this long; default 5 s. */
  recheckMs?: number;
  /** Milliseconds since the epoch; default `Date.now`. */
  clock?: () => number;
  /** Whether this instance may broadcast from relayer key `relayer` now (holds its lease); default yes. A row of another's key is left to its holder. */
  mayBroadcast?: (relayer: Address) => boolean;
  /** Where a decision's writes wait while the ledger is unreachable (the settlement service's); default one of its own. */
  outbox?: LedgerOutbox;
  logger?: SettlementLogger;
  onAction?: (action: ReconcilerAction, record: SettlementRecord) => void;
  onError?: (error: unknown, record: SettlementRecord) => void;
}

const SILENT: SettlementLogger = { info() {}, warn() {}, error() {}, debug() {} };

/**
 * Finishes settlements whose owner is gone or late. Every instance runs one; `takeDue` hands each due
 * row to one instance per round, so they share the work without doing it twice; each row is checked by
 * {@link reconcileRow}.
 */
export class Reconciler {
  readonly #options: ReconcilerOptions;
  readonly #chains: Map<number, SettlementChain>;
  readonly #deps: RowCheckDeps;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<number> | undefined;

  constructor(options: ReconcilerOptions) {
    this.#options = options;
    this.#chains = new Map(options.chains.map((chain) => [chain.chainId, chain]));
    const logger = options.logger ?? SILENT;
    this.#deps = {
      ledger: options.ledger,
      outbox: options.outbox ?? new LedgerOutbox({ logger }),
      logger,
      revertPenaltySeconds: options.revertPenaltySeconds ?? 0,
      mayBroadcast: options.mayBroadcast ?? (() => true),
      now: options.clock ?? Date.now,
    };
  }

  /** One round over the due rows; resolves with how many were looked at. */
  tick(): Promise<number> {
    this.#running ??= this.#round().finally(() => (this.#running = undefined));
    return this.#running;
  }

  async #round(): Promise<number> {
    const rows = await this.#options.ledger.takeDue({
      chainIds: [...this.#chains.keys()],
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
    const chain = this.#chains.get(row.key.chainId);
    return chain ? reconcileRow(this.#deps, chain, row) : undefined;
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
