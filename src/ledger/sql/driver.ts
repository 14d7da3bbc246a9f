import type { EventEmitter } from "node:events";
import type { LedgerHealth } from "../types.js";

/** A value bound to a `?` placeholder. */
export type SqlValue = string | number | null;
/** A result row, column name → value (PostgreSQL BIGINTs arrive as strings). */
export type SqlRow = Record<string, unknown>;

/** Runs statements with `?` placeholders. */
export interface SqlExecutor {
  /**
   * The statement's rows, as `R` when the caller names the columns it selects (a store's row interface, the
   * columns' types as both drivers give them: see sql/columns.ts). The caller's word, as with a query builder:
   * nothing checks it at run time.
   */
  all<R extends object = SqlRow>(sql: string, params?: readonly SqlValue[]): Promise<R[]>;
  /** Returns the number of rows changed. */
  run(sql: string, params?: readonly SqlValue[]): Promise<number>;
}

/** An open transaction. */
export interface SqlTransaction extends SqlExecutor {
  /** Delivers `message` to every instance's listeners once the transaction commits. */
  notify(message: string): Promise<void>;
}

/** Options of {@link SqlDriver.transaction}. */
export interface SqlTransactionOptions {
  /** Serializes the transactions that name the same lock, across instances (e.g. one payer's claims). */
  lock?: string;
}

/** What a backend provides to {@link SqlLedger}: statements, transactions, notifications. */
export interface SqlDriver extends SqlExecutor {
  readonly backend: "sqlite" | "postgres";
  /** Appended to a sub-select that takes rows for work: ` FOR UPDATE SKIP LOCKED` or nothing. */
  readonly skipLocked: string;
  /** Appended to a select of a row about to change: ` FOR UPDATE` or nothing. */
  readonly forUpdate: string;
  /** Whether a WITH clause may hold UPDATE/INSERT (several changes in one atomic statement). */
  readonly writableCte: boolean;
  /**
   * The time relayer key leases and instances' heartbeats go by, as SQL (milliseconds since the epoch): the database's
   * clock where several instances share the ledger (PostgreSQL), so that no instance's own clock, however wrong, decides
   * whether another's lease lives. Absent where the ledger holds one instance (an embedded SQLite file is opened by one
   * process): there the ledger's clock is bound (`?`).
   */
  readonly clockMs?: string;
  /** Notifications from every instance sharing the database (`o:<id>`, `q:<id>`). */
  readonly messages: EventEmitter;
  transaction<T>(work: (tx: SqlTransaction) => Promise<T>): Promise<T>;
  transaction<T>(options: SqlTransactionOptions, work: (tx: SqlTransaction) => Promise<T>): Promise<T>;
  /**
   * A read that may run off the event loop (the embedded ledger's file: a reader thread of its own) and sees
   * every commit made before it was asked; absent where `all` already does (PostgreSQL).
   */
  read?<R extends object = SqlRow>(sql: string, params: readonly SqlValue[]): Promise<R[]>;
  health(): Promise<LedgerHealth>;
  close(): Promise<void>;
}

/** Lets a driver deliver `o:<id>` and `q:<id>` messages: each as its own event and as `message`. */
export function deliver(messages: EventEmitter, message: string): void {
  messages.emit(message, message);
  messages.emit("message", message);
}

/** What every store over SQL holds: the driver its statements run on, and the ledger's clock (ms since the epoch). */
export abstract class SqlStore {
  protected readonly db: SqlDriver;
  protected readonly now: () => number;

  constructor(driver: SqlDriver, now: () => number) {
    this.db = driver;
    this.now = now;
  }
}
