import type { Logger } from "./logger.js";

/** Options of {@link LedgerWatch}. */
export interface LedgerWatchOptions {
  /** Whether the ledger answers now. */
  probe: () => Promise<boolean>;
  /** Runs once the ledger answers again (the outbox, the abandoned claims); false: try again later. */
  recover: () => Promise<boolean>;
  logger: Logger;
  /** How often to look while the ledger is down; default 500 ms. */
  intervalMs?: number;
  /** Told when the ledger goes down (true) and comes back (false). */
  onChange?: (down: boolean) => void;
}

/**
 * Follows the ledger's database through an outage: the background work that fails (lease renewals,
 * reconciler rounds, outcome writes) reports it here instead of logging every attempt; the watch
 * says so once in the log, probes until the database answers, runs the recovery, and says it is back.
 */
export class LedgerWatch {
  readonly #o: LedgerWatchOptions;
  #down = false;
  #since = 0;
  #timer: NodeJS.Timeout | undefined;
  #checking: Promise<void> | undefined;
  #stopped = false;

  constructor(options: LedgerWatchOptions) {
    this.#o = options;
  }

  /** Whether the ledger is known to be unreachable now. */
  get down(): boolean {
    return this.#down;
  }

  /** A ledger call failed: look whether the database is down (once, however many report it). */
  report(source: string, error: unknown): void {
    if (this.#down || this.#checking || this.#stopped) return;
    this.#checking = (async () => {
      if (await this.#o.probe().catch(() => false)) return;
      this.#down = true;
      this.#since = Date.now();
      this.#o.onChange?.(true);
      this.#o.logger.error({ source, err: String(error) }, "ledger unreachable: settles that were not sent answer 503, outcomes of sent ones are kept to be written when it is back");
      this.#timer = setInterval(() => void this.#tryRecover(), this.#o.intervalMs ?? 500);
      this.#timer.unref();
    })().finally(() => (this.#checking = undefined));
  }

  async #tryRecover(): Promise<void> {
    if (this.#checking) return;
    this.#checking = (async () => {
      if (!(await this.#o.probe().catch(() => false))) return;
      if (!(await this.#o.recover().catch(() => false))) return;
      clearInterval(this.#timer);
      this.#down = false;
      this.#o.onChange?.(false);
      this.#o.logger.info({ downMs: Date.now() - this.#since }, "ledger reachable again");
    })().finally(() => (this.#checking = undefined));
    await this.#checking;
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
  }
}
