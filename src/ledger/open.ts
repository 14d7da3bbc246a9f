import { openPostgresLedger } from "./postgres.js";
import { MEMORY, openSqliteLedger } from "./sqlite.js";
import type { SqlLedgerOptions } from "./sql-ledger.js";
import type { Ledger } from "./types.js";

/** Options of {@link openLedger}. */
export interface OpenLedgerOptions extends SqlLedgerOptions {
  /** `postgres://…`: the shared ledger of several instances. */
  databaseUrl?: string;
  /** Otherwise the embedded ledger: a file path, or `:memory:` (default). */
  file?: string;
  /** PostgreSQL connections of this instance; default 10. */
  poolSize?: number;
}

/** Opens the ledger the configuration names: PostgreSQL when `databaseUrl` is set, else embedded SQLite. */
export async function openLedger(options: OpenLedgerOptions = {}): Promise<Ledger> {
  const { databaseUrl, file, poolSize, ...rest } = options;
  if (databaseUrl) return openPostgresLedger({ ...rest, url: databaseUrl, ...(poolSize ? { poolSize } : {}) });
  return openSqliteLedger({ ...rest, location: file ?? MEMORY });
}
