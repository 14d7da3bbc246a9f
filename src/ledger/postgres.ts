import { EventEmitter } from "node:events";
import pg from "pg";
import { MIGRATIONS } from "./schema.js";
import { GuardedClient, guardedPool, message, migratePostgres, MIGRATION_TABLE, redactDatabaseUrl } from "./postgres-client.js";
import { deliver, type SqlDriver, type SqlRow, type SqlTransaction, type SqlTransactionOptions, type SqlValue } from "./sql/driver.js";
import { SqlLedger, type SqlLedgerOptions } from "./sql/ledger.js";
import { LedgerError, type LedgerHealth } from "./types.js";

/** The channel every instance LISTENs on: `o:<id>` (a row reached its outcome), `q:<id>` (queued for a key holder). */
const CHANNEL = "x402_ledger";
/** First key of the two-key advisory locks this ledger takes ("x402"), so they stay apart from other users'. */
const LOCK_SPACE = 0x78343032;
export { migratePostgres, redactDatabaseUrl };

const RECONNECT_MS = 1_000;
/** What PostgreSQL may take per statement (`statement_timeout`, `lock_timeout`) unless configured. */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 1_000;
/** What connecting may take unless configured. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 1_500;
/**
 * A call waits this long at most for its turn (a pooled connection while all are busy; a payer's lock held
 * by another instance's claim), or the answer time if longer. Waiting in a queue is not the database
 * failing to answer: a burst of settles queues behind the pool's few connections, and that queue drains as
 * calls finish; a database that stops answering fails every waiter at once through the calls in flight.
 */
export const QUEUE_MS = 10_000;
/** A call is given up this long after the statement time-out: the server did not even say it cancelled it (frozen, cut off). */
const ANSWER_MARGIN_MS = 500;
/** While calls fail at once, the database is asked (a fresh connection, `SELECT 1`) this often. */
const PROBE_MS = 250;
/** TCP keep-alive on every connection: a peer gone without a word (a host down, a network cut) is found within about a minute. */
const KEEPALIVE_DELAY_MS = 10_000;
/** A transaction left open by a client that stopped (paused, cut off) is ended by the server after this, releasing its locks. */
const IDLE_IN_TRANSACTION_MS = 10_000;

// `?` placeholders (shared with SQLite) become `$1, $2, …` (the statements hold no `?` in literals), and
// each statement gets a name: PostgreSQL then parses and plans it once per connection, not per call.
const prepared = new Map<string, { name: string; text: string }>();
function toPostgres(text: string): { name: string; text: string } {
  let statement = prepared.get(text);
  if (statement === undefined) {
    let n = 0;
    statement = { name: `x402_${prepared.size}`, text: text.replace(/\?/g, () => `$${++n}`) };
    prepared.set(text, statement);
  }
  return statement;
}

/** The two keys of the advisory lock named `name` (a payer's: `chainId:token:authorizer`, lower case): {@link LOCK_SPACE}, then FNV-1a of the name. */
export function advisoryLockKeys(name: string): [number, number] {
  let hash = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) hash = Math.imul(hash ^ name.charCodeAt(i), 0x01000193);
  return [LOCK_SPACE, hash | 0];
}

/** A ledger call the database did not answer within its time: the connection was cut, nothing waits on it. */
class NoAnswer extends LedgerError {
  constructor(ms: number) {
    super("unavailable", `the database did not answer within ${ms} ms`);
  }
}

class PostgresDriver implements SqlDriver {
  readonly backend = "postgres" as const;
  readonly skipLocked = " FOR UPDATE SKIP LOCKED";
  readonly forUpdate = " FOR UPDATE";
  readonly clockMs = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)";
  readonly writableCte = true;
  readonly messages = new EventEmitter();
  readonly #url: string;
  readonly #pool: pg.Pool;
  /** A call is given up when the database has not answered a connect or a statement for this long. */
  readonly #answerMs: number;
  /** A call's wait for its turn (a pooled connection, a payer's lock) is given up after this long. */
  readonly #queueMs: number;
  readonly #poolSize: number;
  readonly #connectMs: number;
  readonly #clientConfig: pg.ClientConfig;
  #listener: pg.Client | undefined;
  #reconnect: NodeJS.Timeout | undefined;
  #closed = false;
  /** Since when calls fail at once: the database did not answer one in time; a probe closes it when it answers. */
  #outageSince: number | undefined;
  #probe: NodeJS.Timeout | undefined;
  /** Calls waiting for a pooled connection: failed at once when the database stops answering. */
  readonly #waiting = new Set<(error: Error) => void>();

  constructor(url: string, options: PostgresLedgerOptions) {
    this.#url = url;
    this.messages.setMaxListeners(0);
    const statementMs = options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
    this.#answerMs = statementMs + ANSWER_MARGIN_MS;
    this.#queueMs = Math.max(QUEUE_MS, this.#answerMs);
    this.#poolSize = options.poolSize ?? 10;
    const connectMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.#connectMs = connectMs;
    this.#clientConfig = {
      connectionString: url,
      connectionTimeoutMillis: connectMs,
      // The server cancels a statement (or a lock wait) that takes longer: an answer, not a cut connection.
      statement_timeout: statementMs,
      lock_timeout: statementMs,
      idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_MS,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
    };
    // The pool's own connectionTimeoutMillis would also bound the wait in its queue (a burst, not a fault):
    // the pool has none, its clients keep theirs for connecting, and #call bounds the queue.
    this.#pool = guardedPool({
      ...this.#clientConfig,
      connectionTimeoutMillis: 0,
      Client: class extends GuardedClient {
        constructor(config?: pg.ClientConfig) {
          super({ ...config, connectionTimeoutMillis: connectMs });
        }
      },
      max: this.#poolSize,
      idleTimeoutMillis: 30_000,
    });
  }

  async all<R extends object = SqlRow>(text: string, params: readonly SqlValue[] = []): Promise<R[]> {
    return this.#call(async (client) => (await client.query({ ...toPostgres(text), values: params as SqlValue[] })).rows as R[]);
  }

  async run(text: string, params: readonly SqlValue[] = []): Promise<number> {
    return this.#call(async (client) => (await client.query({ ...toPostgres(text), values: params as SqlValue[] })).rowCount ?? 0);
  }

  async transaction<T>(...args: [(tx: SqlTransaction) => Promise<T>] | [SqlTransactionOptions, (tx: SqlTransaction) => Promise<T>]): Promise<T> {
    const [options, work] = args.length === 1 ? [{}, args[0]] : args;
    return this.#call(async (client, wait) => {
      const query = (text: string, params: readonly SqlValue[] = []) => client.query({ ...toPostgres(text), values: params as SqlValue[] });
      const tx: SqlTransaction = {
        all: async <R extends object>(text: string, params?: readonly SqlValue[]) => (await query(text, params)).rows as R[],
        run: async (text, params) => (await query(text, params)).rowCount ?? 0,
        // Delivered by PostgreSQL to every listener (this instance's too) when the transaction commits.
        notify: async (text) => void (await query(`SELECT pg_notify('${CHANNEL}', ?)`, [text])),
      };
      if (options.lock === undefined) await client.query("BEGIN");
      else {
        // One round trip: the lock's keys are numbers computed here, so the statements go as one simple query.
        // The lock is waited for as a turn in a queue (another instance's claim of the payer holds it), not
        // as a statement: up to the queue time, then the statement time again for the rest.
        const ms = this.#queueMs;
        const statementMs = this.#answerMs - ANSWER_MARGIN_MS;
        await wait(ms, () =>
          client.query(
            `BEGIN; SET LOCAL statement_timeout = ${ms}; SET LOCAL lock_timeout = ${ms}; ` +
              `SELECT pg_advisory_xact_lock(${advisoryLockKeys(options.lock!).join(", ")}); ` +
              `SET LOCAL statement_timeout = ${statementMs}; SET LOCAL lock_timeout = ${statementMs}`,
          ),
        );
      }
      try {
        const result = await work(tx);
        await client.query("COMMIT");
        return result;
      } catch (error) {
        // Not after a cut connection (#call destroys it; the server rolls back what it did not commit).
        if (!(error instanceof NoAnswer)) await client.query("ROLLBACK").catch(() => undefined);
        throw error;
      }
    });
  }

  /**
   * Runs `work` on a pooled connection. Connecting and then each step of `work` must be answered within
   * the answer time; a step `work` marks as a wait for its turn (`wait`) gets the queue time instead, and
   * so does waiting for a pooled connection while all are busy: a burst queues, it is not an outage. A
   * call the database does not answer in time fails with {@link NoAnswer}: its connection is reset (so a
   * frozen server, once it runs again, finds nothing of it to execute), and until the database answers a
   * probe every call fails at once (the ones waiting for a connection too), instead of each waiting out its
   * own time. A turn not come within the queue time fails with a plain "unavailable" and trips nothing.
   */
  async #call<T>(work: (client: pg.PoolClient, wait: <W>(ms: number, step: () => Promise<W>) => Promise<W>) => Promise<T>): Promise<T> {
    if (this.#outageSince !== undefined) throw new NoAnswer(this.#answerMs);
    let client: pg.PoolClient | undefined;
    let given = false;
    let failed = false;
    let timer: NodeJS.Timeout | undefined;
    let reject!: (error: Error) => void;
    const stop = new Promise<never>((_, fail) => (reject = fail));
    stop.catch(() => undefined);
    const giveUp = (error: Error) => {
      given = true;
      reject(error);
    };
    // Given up `ms` from now. Once connected, after the loop's poll phase (setImmediate): an answer that
    // arrived while this process was not running (a loaded host) is read before silence is concluded.
    const arm = (ms: number, error: () => Error) => {
      clearTimeout(timer);
      timer = setTimeout(() => (client ? setImmediate(() => giveUp(error())) : giveUp(error())), ms);
    };
    const noAnswer = () => new NoAnswer(this.#answerMs);
    const wait = async <W>(ms: number, step: () => Promise<W>): Promise<W> => {
      arm(ms + ANSWER_MARGIN_MS, noAnswer);
      try {
        return await step();
      } finally {
        arm(this.#answerMs, noAnswer);
      }
    };
    const onError = () => void (failed = true);
    try {
      this.#waiting.add(giveUp);
      // All connections busy: this call waits its turn in the pool's queue (it is served as one is released).
      const queued = this.#pool.idleCount === 0 && this.#pool.totalCount >= this.#poolSize;
      if (queued) arm(this.#queueMs, () => new LedgerError("unavailable", `no database connection free within ${this.#queueMs} ms`));
      // Connecting (a new pooled connection, or an idle one handed over): LEDGER_CONNECT_TIMEOUT_MS, at least the answer time.
      else arm(Math.max(this.#connectMs, this.#answerMs), noAnswer);
      const connecting = this.#pool.connect();
      // A connection that arrives after the call gave up goes back to the pool unused.
      connecting.then((late) => void (given && late !== client && late.release()), () => undefined);
      client = await Promise.race([connecting, stop]);
      this.#waiting.delete(giveUp);
      arm(this.#answerMs, noAnswer);
      // An error while checked out (the server shut down, 57P01): the query in flight rejects as well.
      client.on("error", onError);
      return await Promise.race([work(client, wait), stop]);
    } catch (error) {
      failed = true;
      if (error instanceof NoAnswer && this.#outageSince === undefined) this.#noAnswer();
      throw error instanceof LedgerError || !given ? error : noAnswer();
    } finally {
      clearTimeout(timer);
      this.#waiting.delete(giveUp);
      if (client) {
        client.removeListener("error", onError);
        // Reset, not ended: a server that stopped reading discards what it has not read of ours.
        if (given) (client as unknown as { connection?: { stream?: { resetAndDestroy?(): void; destroy(): void } } }).connection?.stream?.resetAndDestroy?.();
        // A connection whose call failed may be broken (mid-transaction, cut): destroyed rather than pooled.
        client.release(failed || given ? true : undefined);
      }
    }
  }

  /** A call was not answered in time: calls fail at once (waiting ones too) until a probe is answered. */
  #noAnswer(): void {
    this.#outageSince = Date.now();
    for (const giveUp of [...this.#waiting]) giveUp(new NoAnswer(this.#answerMs));
    this.#waiting.clear();
    const probe = async () => {
      if (this.#closed) return;
      const client = new GuardedClient({ ...this.#clientConfig, connectionTimeoutMillis: this.#answerMs, query_timeout: this.#answerMs });
      try {
        await client.connect();
        await client.query("SELECT 1");
        this.#outageSince = undefined;
        await client.end().catch(() => undefined);
        return;
      } catch {
        (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
      }
      this.#probe = setTimeout(() => void probe(), PROBE_MS);
      this.#probe.unref();
    };
    this.#probe = setTimeout(() => void probe(), PROBE_MS);
    this.#probe.unref();
  }

  /** Applies missing migrations; safe when several instances start at once (see {@link migratePostgres}). */
  async migrate(): Promise<void> {
    await migratePostgres(this.#url);
  }

  /** LISTENs for other instances' notifications; reconnects after a lost connection (waits poll meanwhile). */
  async listen(): Promise<void> {
    const client = new GuardedClient({ connectionString: this.#url, keepAlive: true, keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS });
    const lost = () => {
      if (this.#closed || this.#listener !== client) return;
      this.#listener = undefined;
      void client.end().catch(() => undefined);
      // Every second until the server answers again (each failed attempt schedules the next).
      clearTimeout(this.#reconnect);
      this.#reconnect = setTimeout(() => void this.listen().catch(() => undefined), RECONNECT_MS);
      this.#reconnect.unref();
    };
    this.#listener = client;
    client.on("error", lost);
    client.on("end", lost);
    client.on("notification", (notification) => {
      if (notification.channel === CHANNEL && notification.payload) deliver(this.messages, notification.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (error) {
      lost();
      throw error;
    }
    // Anything queued, or decided, while we were not listening is picked up now.
    deliver(this.messages, "q:*");
  }

  async health(): Promise<LedgerHealth> {
    const base = { backend: this.backend, location: redactDatabaseUrl(this.#url), migrations: { applied: 0, expected: MIGRATIONS.length } };
    if (this.#outageSince !== undefined) return { ...base, reachable: false, error: `no answer within ${this.#answerMs} ms (since ${new Date(this.#outageSince).toISOString()})` };
    try {
      const [row] = await this.all(`SELECT COUNT(*) AS applied FROM ${MIGRATION_TABLE}`);
      return { ...base, reachable: true, migrations: { ...base.migrations, applied: Number(row?.applied ?? 0) } };
    } catch (error) {
      return { ...base, reachable: false, error: message(error) };
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#reconnect);
    clearTimeout(this.#probe);
    const listener = this.#listener;
    this.#listener = undefined;
    await listener?.end().catch(() => undefined);
    await this.#pool.end();
  }
}

/** Options of {@link openPostgresLedger}. */
export interface PostgresLedgerOptions extends SqlLedgerOptions {
  /** `postgres://user:password@host:port/database`. */
  url: string;
  /** Connections in this instance's pool; default 10. */
  poolSize?: number;
  /** Connecting, or waiting for a pooled connection, may take this long; default {@link DEFAULT_CONNECT_TIMEOUT_MS}. */
  connectTimeoutMs?: number;
  /**
   * PostgreSQL cancels a statement (or a lock wait) taking longer; a call it does not answer within this
   * plus 500 ms fails, and calls then fail at once until the database answers again. Default
   * {@link DEFAULT_STATEMENT_TIMEOUT_MS}.
   */
  statementTimeoutMs?: number;
}

/** Opens the ledger on PostgreSQL: migrates the schema, starts listening for other instances. */
export async function openPostgresLedger(options: PostgresLedgerOptions): Promise<SqlLedger> {
  const driver = new PostgresDriver(options.url, options);
  try {
    await driver.migrate();
    await driver.listen();
  } catch (error) {
    await driver.close().catch(() => undefined);
    if (error instanceof LedgerError) throw error;
    throw new LedgerError("unavailable", `DATABASE_URL: cannot use ${redactDatabaseUrl(options.url)}: ${message(error)}`, { cause: error });
  }
  return new SqlLedger(driver, options);
}
