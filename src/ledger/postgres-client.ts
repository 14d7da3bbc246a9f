import pg from "pg";
import { Kysely, PostgresDialect, sql } from "kysely";
import { Migrator, type Migration as KyselyMigration } from "kysely/migration";
import { MIGRATIONS, POSTGRES_SCHEMA } from "./schema.js";
import { LedgerError } from "./types.js";

// The PostgreSQL ledger's connections (guarded against unheard 'error' events) and its migrations; the driver is in postgres.ts.

export const MIGRATION_TABLE = "x402_ledger_migrations";

/** A PostgreSQL URL without its credentials, for logs and health. */
export function redactDatabaseUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.hostname}${parsed.port ? `:${parsed.port}` : ""}${parsed.pathname}`;
  } catch {
    return "postgres://(unparsable URL)";
  }
}

export function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A pg client with an 'error' listener from its construction on. node-postgres emits 'error' on a client
 * whose connection dies (57P01 when the server shuts down, then "Connection terminated unexpectedly"); with
 * no listener at that moment Node throws it, and the process exits. pg-pool listens only while a client is
 * idle: a client it hands to a `pool.connect()` waiter has no listener until the waiter's code runs, a
 * microtask later, while the rest of the socket chunk (a server's FATAL right after its last answer) is
 * parsed at once; a client handed over as it finishes connecting is in the same gap; Kysely's migrator
 * never listens on the client it holds. Nothing needs doing with the error here: the queries in flight
 * reject with it, the client is no longer queryable, and the pool drops it when it is released.
 */
export class GuardedClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    this.on("error", () => {});
  }
}

/** A pool whose clients are {@link GuardedClient}s, and whose own 'error' (an idle client's) is handled. */
export function guardedPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool({ Client: GuardedClient, ...config });
  // An idle client's error (the server restarted): the pool has already dropped it; the next query reconnects.
  pool.on("error", () => {});
  return pool;
}

/**
 * Brings the schema up to date with Kysely's Migrator: each migration runs in a transaction (DDL is
 * transactional in PostgreSQL: a failed migration leaves nothing half-done) under a transaction-level
 * advisory lock, so instances that start together apply it once and the others wait, then see it done.
 * `through` stops after the migration of that name (a database as an earlier version left it: upgrade tests).
 */
export async function migratePostgres(url: string, options: { through?: string } = {}): Promise<void> {
  // Kysely attaches no 'error' listener to the client it holds for the migrations: the pool's clients guard themselves.
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: guardedPool({ connectionString: url, max: 1, connectionTimeoutMillis: 5_000 }) }) });
  try {
    const migrations: Record<string, KyselyMigration> = Object.fromEntries(
      MIGRATIONS.map((migration) => [
        migration.name,
        {
          async up(db: Kysely<unknown>) {
            for (const statement of migration.statements(POSTGRES_SCHEMA)) await sql.raw(statement).execute(db);
          },
        },
      ]),
    );
    const migrator = new Migrator({
      db,
      provider: { getMigrations: async () => migrations },
      migrationTableName: MIGRATION_TABLE,
      migrationLockTableName: `${MIGRATION_TABLE}_lock`,
    });
    const { error, results } = options.through === undefined ? await migrator.migrateToLatest() : await migrator.migrateTo(options.through);
    if (error) {
      const failed = results?.find((r) => r.status === "Error")?.migrationName;
      throw new LedgerError("unavailable", `DATABASE_URL: migrating ${redactDatabaseUrl(url)} failed${failed ? ` at ${failed}` : ""}: ${message(error)}`, {
        cause: error,
      });
    }
  } finally {
    await db.destroy();
  }
}
