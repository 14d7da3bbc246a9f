import type { PostgresLedgerOptions } from "./postgres.js";
import type { SqlLedgerOptions } from "./sql/ledger.js";
import type { Ledger } from "./types.js";

/** Options of {@link openLedger}. */
export interface OpenLedgerOptions extends SqlLedgerOptions {
  /** `postgres://…`: the shared ledger of several instances. */
  databaseUrl?: string;
  /** Otherwise the embedded ledger: a file path, or `:memory:` (default). */
  file?: string;
  /** PostgreSQL connections of this instance; default 10. */
  poolSize?: number;
  /** PostgreSQL: what a statement may take (see {@link PostgresLedgerOptions}). */
  statementTimeoutMs?: number;
  /** PostgreSQL: what connecting, or waiting for a pooled connection, may take. */
  connectTimeoutMs?: number;
}

/**
 * Opens the ledger the configuration names: PostgreSQL when `databaseUrl` is set, else embedded SQLite.
 * Each driver (`pg` and kysely, or Node 22's `node:sqlite`) is loaded only here, so importing the kit
 * (a seller's or a buyer's code, on Node 20 too) loads none of them.
 */
export async function openLedger(options: OpenLedgerOptions = {}): Promise<Ledger> {
  const { databaseUrl, file, poolSize, statementTimeoutMs, connectTimeoutMs, ...rest } = options;
  if (databaseUrl) {
    const { openPostgresLedger } = await import("./postgres.js");
    return openPostgresLedger({ ...rest, url: databaseUrl, ...(poolSize ? { poolSize } : {}), ...(statementTimeoutMs ? { statementTimeoutMs } : {}), ...(connectTimeoutMs ? { connectTimeoutMs } : {}) });
  }
  const { MEMORY, openSqliteLedger } = await import("./sqlite.js");
  return openSqliteLedger({ ...rest, location: file ?? MEMORY });
}
