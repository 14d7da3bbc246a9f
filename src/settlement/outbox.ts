import { IllegalTransitionError } from "../ledger/types.js";
import type { SettlementLogger as Logger } from "./logger.js";

/** One ledger write that could not be made: what it records, and the write itself. */
interface PendingWrite {
  what: string;
  write: () => Promise<unknown>;
}

/** Options of {@link LedgerOutbox}. */
export interface LedgerOutboxOptions {
  logger: Logger;
  /** Writes kept at most; beyond it the oldest is dropped (the reconciler finds its row from the chain). Default 10,000. */
  capacity?: number;
}

/**
 * Ledger writes that failed while the database was unreachable, in the order they were made: an
 * outcome already answered (a settlement mined, a transaction reverted) is written as soon as the
 * database is back. Bounded and in memory: what it loses (a full box, a crash) is what the reconciler
 * recovers anyway from the rows' recorded transactions and the chain, only later.
 */
export class LedgerOutbox {
  readonly #pending: PendingWrite[] = [];
  readonly #logger: Logger;
  readonly #capacity: number;
  #draining: Promise<boolean> | undefined;

  constructor(options: LedgerOutboxOptions) {
    this.#logger = options.logger;
    this.#capacity = options.capacity ?? 10_000;
  }

  get size(): number {
    return this.#pending.length;
  }

  /** Keeps `write` for the next {@link drain}. */
  add(what: string, write: () => Promise<unknown>): void {
    if (this.#pending.length >= this.#capacity) {
      const dropped = this.#pending.shift()!;
      this.#logger.error({ dropped: dropped.what, capacity: this.#capacity }, "ledger outbox full: oldest write dropped (the reconciler will record it from the chain)");
    }
    this.#pending.push({ what, write });
  }

  /** Runs `write` now; if the ledger refuses it, keeps it for the next {@link drain}. */
  async writeOrKeep(what: string, write: () => Promise<unknown>): Promise<void> {
    try {
      await write();
    } catch (error) {
      this.#logger.warn({ what, err: String(error) }, "ledger write deferred to the outbox");
      this.add(what, write);
    }
  }

  /**
   * Writes what is kept, oldest first; stops at the first failure. A write the ledger refuses for the
   * row's state (the reconciler decided it from the chain meanwhile) is dropped, not retried: it would
   * hold back everything after it. Resolves true when the box is empty.
   */
  drain(): Promise<boolean> {
    this.#draining ??= (async () => {
      let written = 0;
      while (this.#pending.length > 0) {
        const next = this.#pending[0]!;
        try {
          await next.write();
        } catch (error) {
          if (error instanceof IllegalTransitionError) {
            this.#logger.warn({ what: next.what, err: String(error) }, "ledger outbox: write refused by the row's state (decided meanwhile), dropped");
            this.#pending.shift();
            continue;
          }
          this.#logger.warn({ what: next.what, left: this.#pending.length, err: String(error) }, "ledger outbox: write failed, kept for the next try");
          return false;
        }
        this.#pending.shift();
        written++;
      }
      if (written > 0) this.#logger.info({ written }, "ledger outbox drained");
      return true;
    })().finally(() => (this.#draining = undefined));
    return this.#draining;
  }
}
