/** The database as `/healthcheck` reports it. */
export interface LedgerHealth {
  backend: "sqlite" | "postgres";
  /** Where: a file path, `:memory:`, or the PostgreSQL URL without credentials. */
  location: string;
  reachable: boolean;
  migrations: { applied: number; expected: number };
  error?: string;
}

/** The database under the stores: which backend, its upkeep, its health, and closing it. */
export interface LedgerLifecycle {
  readonly backend: "sqlite" | "postgres";
  /** Deletes lapsed counters and instances, penalties that ended a day ago or more (by this clock), and gap fillers recorded a week ago or more. */
  prune(): Promise<void>;

  health(): Promise<LedgerHealth>;
  close(): Promise<void>;
}
