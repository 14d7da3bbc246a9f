import { EventEmitter } from "node:events";
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import type { DatabaseSync, StatementSync } from "node:sqlite";
import { Worker } from "node:worker_threads";
import { MIGRATIONS, SQLITE_SCHEMA } from "./schema.js";
import { deliver, type SqlDriver, type SqlRow, type SqlTransaction, type SqlTransactionOptions, type SqlValue } from "./sql/driver.js";
import { SqlLedger, type SqlLedgerOptions } from "./sql/ledger.js";
import { LedgerError, type LedgerHealth } from "./types.js";

/** The embedded ledger's in-memory database (the local stack: its chains are ephemeral too). */
export const MEMORY = ":memory:";

const SYNCHRONOUS = "NORMAL";

/**
 * Loads `node:sqlite` without the ExperimentalWarning Node 22 prints for it (that warning only:
 * every other warning still goes through).
 */
function loadSqlite(): typeof import("node:sqlite") {
  const emitWarning = process.emitWarning;
  process.emitWarning = function (warning: string | Error, ...rest: unknown[]) {
    const text = typeof warning === "string" ? warning : warning.message;
    const type = typeof rest[0] === "string" ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    const name = typeof warning === "string" ? type : warning.name;
    if (name === "ExperimentalWarning" && /SQLite/i.test(text)) return;
    return (emitWarning as (...args: unknown[]) => void).call(process, warning, ...rest);
  } as typeof process.emitWarning;
  try {
    return createRequire(import.meta.url)("node:sqlite") as typeof import("node:sqlite");
  } finally {
    process.emitWarning = emitWarning;
  }
}

/**
 * The reader thread's program (plain JavaScript, run with `eval`: the same in the sources and in dist/): its
 * own connection on the file, read-only, answering `{id, sql, params}` with `{id, rows}` or `{id, error}`.
 * WAL lets it read while the main connection writes; a read sees every commit made before it was asked.
 */
const READER_PROGRAM = `
const { parentPort, workerData } = require("node:worker_threads");
const emitWarning = process.emitWarning;
process.emitWarning = function (warning, ...rest) {
  if (/SQLite/i.test(typeof warning === "string" ? warning : String(warning && warning.message))) return;
  return emitWarning.call(process, warning, ...rest);
};
const { DatabaseSync } = require("node:sqlite");
const db = new DatabaseSync(workerData.location, { readOnly: true });
db.exec("PRAGMA busy_timeout = 5000");
const statements = new Map();
parentPort.on("message", ({ id, sql, params }) => {
  try {
    let statement = statements.get(sql);
    if (!statement) statements.set(sql, (statement = db.prepare(sql)));
    parentPort.postMessage({ id, rows: statement.all(...params) });
  } catch (error) {
    parentPort.postMessage({ id, error: error instanceof Error ? error.message : String(error) });
  }
});
`;

/** Reads on a thread of their own (started at the first read), so a long one never holds the event loop. */
class SqliteReader {
  readonly #location: string;
  #worker: Worker | undefined;
  readonly #pending = new Map<number, { resolve: (rows: SqlRow[]) => void; reject: (error: Error) => void }>();
  #next = 0;

  constructor(location: string) {
    this.#location = location;
  }

  all(sql: string, params: readonly SqlValue[]): Promise<SqlRow[]> {
    const worker = (this.#worker ??= this.#start());
    const id = this.#next++;
    // Keeps the process alive while a read is pending, and only then.
    if (this.#pending.size === 0) worker.ref();
    return new Promise<SqlRow[]>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      worker.postMessage({ id, sql, params });
    });
  }

  #start(): Worker {
    const worker = new Worker(READER_PROGRAM, { eval: true, workerData: { location: this.#location } });
    worker.on("message", (message: { id: number; rows?: SqlRow[]; error?: string }) => {
      const waiter = this.#pending.get(message.id);
      this.#pending.delete(message.id);
      if (this.#pending.size === 0) worker.unref();
      if (message.error !== undefined) waiter?.reject(new LedgerError("unavailable", `ledger read failed: ${message.error}`));
      else waiter?.resolve(message.rows ?? []);
    });
    // A thread that died: every read waiting on it fails, and the next read starts another.
    worker.on("error", (error) => this.#fail(worker, error));
    worker.on("exit", (code) => this.#fail(worker, new Error(`the reader thread exited (${code})`)));
    return worker;
  }

  #fail(worker: Worker, error: Error): void {
    if (this.#worker !== worker) return;
    this.#worker = undefined;
    for (const waiter of this.#pending.values()) waiter.reject(new LedgerError("unavailable", `ledger read failed: ${error.message}`, { cause: error }));
    this.#pending.clear();
  }

  async close(): Promise<void> {
    const worker = this.#worker;
    this.#worker = undefined;
    await worker?.terminate();
  }
}

/** Runs tasks one at a time, in order. */
class Serial {
  #tail: Promise<unknown> = Promise.resolve();
  run<T>(task: () => Promise<T> | T): Promise<T> {
    const result = this.#tail.then(task);
    this.#tail = result.catch(() => undefined);
    return result;
  }
}

/**
 * What the handles on one database file in this process share: SQLite has one writer at a time and a
 * synchronous API, so an open transaction must not interleave with another handle's statements
 * (they would wait on each other in one thread); and waiters on one handle hear another's changes.
 */
interface FileShare {
  serial: Serial;
  messages: EventEmitter;
  handles: number;
}
const files = new Map<string, FileShare>();

class SqliteDriver implements SqlDriver {
  readonly backend = "sqlite" as const;
  readonly skipLocked = "";
  readonly forUpdate = "";
  readonly writableCte = false;
  readonly messages: EventEmitter;
  readonly #db: DatabaseSync;
  readonly #serial: Serial;
  readonly #statements = new Map<string, StatementSync>();
  readonly #location: string;
  readonly #release: () => void;
  /** Reads off the event loop, for a file (`:memory:` is this connection's own: it reads in place). */
  readonly #reader: SqliteReader | undefined;
  #closed = false;

  constructor(location: string) {
    const { DatabaseSync } = loadSqlite();
    this.#location = location;
    if (location === MEMORY) {
      this.messages = new EventEmitter();
      this.#serial = new Serial();
      this.#release = () => {};
    } else {
      const path = resolve(location);
      mkdirSync(dirname(path), { recursive: true });
      let share = files.get(path);
      if (!share) files.set(path, (share = { serial: new Serial(), messages: new EventEmitter(), handles: 0 }));
      share.handles++;
      this.messages = share.messages;
      this.#serial = share.serial;
      this.#release = () => {
        if (--share.handles === 0) files.delete(path);
      };
    }
    this.messages.setMaxListeners(0);
    this.#reader = location === MEMORY ? undefined : new SqliteReader(location);
    this.#db = new DatabaseSync(location);
    this.#db.exec("PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON");
    if (location !== MEMORY) {
      // WAL: readers never wait for the writer. NORMAL: a commit survives the process dying (it is in the
      // OS's hands before the call returns); only an OS crash or power cut may lose the last ones.
      this.#db.exec(`PRAGMA journal_mode = WAL; PRAGMA synchronous = ${SYNCHRONOUS}`);
    }
  }

  #prepare(sql: string): StatementSync {
    let statement = this.#statements.get(sql);
    if (!statement) this.#statements.set(sql, (statement = this.#db.prepare(sql)));
    return statement;
  }

  #all<R extends object>(sql: string, params: readonly SqlValue[]): R[] {
    return this.#prepare(sql).all(...params) as R[];
  }

  #run(sql: string, params: readonly SqlValue[]): number {
    return Number(this.#prepare(sql).run(...params).changes);
  }

  all<R extends object = SqlRow>(sql: string, params: readonly SqlValue[] = []): Promise<R[]> {
    return this.#serial.run(() => this.#all<R>(sql, params));
  }

  run(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    return this.#serial.run(() => this.#run(sql, params));
  }

  read<R extends object = SqlRow>(sql: string, params: readonly SqlValue[] = []): Promise<R[]> {
    // Queued behind this process's statements, so it sees every commit made before it was asked.
    return this.#reader ? this.#serial.run(() => undefined).then(() => this.#reader!.all(sql, params) as Promise<R[]>) : this.all<R>(sql, params);
  }

  transaction<T>(...args: [(tx: SqlTransaction) => Promise<T>] | [SqlTransactionOptions, (tx: SqlTransaction) => Promise<T>]): Promise<T> {
    // Locks need nothing more: BEGIN IMMEDIATE already makes this the only writer.
    const work = args.length === 1 ? args[0] : args[1];
    return this.#serial.run(async () => {
      const outbox: string[] = [];
      const tx: SqlTransaction = {
        all: async (sql, params = []) => this.#all(sql, params),
        run: async (sql, params = []) => this.#run(sql, params),
        notify: async (message) => void outbox.push(message),
      };
      this.#db.exec("BEGIN IMMEDIATE");
      let result: T;
      try {
        result = await work(tx);
        this.#db.exec("COMMIT");
      } catch (error) {
        if (this.#db.isTransaction) this.#db.exec("ROLLBACK");
        throw error;
      }
      for (const message of outbox) deliver(this.messages, message);
      return result;
    });
  }

  /** Applies the migrations this file lacks, in one transaction (another process opening it waits). */
  migrate(): void {
    this.#db.exec("BEGIN IMMEDIATE");
    try {
      const applied = this.#userVersion();
      if (applied > MIGRATIONS.length) {
        throw new LedgerError("config", `${this.#location}: the ledger's schema (version ${applied}) is newer than this facilitator's (${MIGRATIONS.length})`);
      }
      for (const migration of MIGRATIONS.slice(applied)) {
        for (const statement of migration.statements(SQLITE_SCHEMA)) this.#db.exec(statement);
      }
      this.#db.exec(`PRAGMA user_version = ${MIGRATIONS.length}`);
      this.#db.exec("COMMIT");
    } catch (error) {
      if (this.#db.isTransaction) this.#db.exec("ROLLBACK");
      throw error;
    }
  }

  #userVersion(): number {
    return Number((this.#db.prepare("PRAGMA user_version").get() as { user_version: number }).user_version);
  }

  health(): Promise<LedgerHealth> {
    return this.#serial.run(() => {
      const base = { backend: this.backend, location: this.#location, migrations: { applied: 0, expected: MIGRATIONS.length } };
      try {
        return { ...base, reachable: true, migrations: { ...base.migrations, applied: this.#userVersion() } };
      } catch (error) {
        return { ...base, reachable: false, error: error instanceof Error ? error.message : String(error) };
      }
    });
  }

  close(): Promise<void> {
    return this.#serial.run(async () => {
      if (this.#closed) return;
      this.#closed = true;
      await this.#reader?.close();
      this.#db.close();
      this.#release();
    });
  }
}

/** Options of {@link openSqliteLedger}. */
export interface SqliteLedgerOptions extends SqlLedgerOptions {
  /** A file path (created with its directory if absent) or {@link MEMORY}. */
  location: string;
}

/**
 * Opens the embedded ledger on Node's built-in SQLite: a file (a standalone instance: a restart
 * remembers everything) or `:memory:`. One instance per file; the schema is migrated on open.
 */
export function openSqliteLedger(options: SqliteLedgerOptions): SqlLedger {
  const driver = new SqliteDriver(options.location);
  try {
    driver.migrate();
  } catch (error) {
    void driver.close();
    throw error;
  }
  return new SqlLedger(driver, options);
}
