import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { keccak256, toHex, type Address, type Hex } from "viem";
import { DatabaseSync } from "node:sqlite";
import pg from "pg";
import { migratePostgres, openPostgresLedger, type PostgresLedgerOptions } from "../../src/ledger/postgres.js";
import { MIGRATIONS, SQLITE_SCHEMA } from "../../src/ledger/schema.js";
import { MEMORY, openSqliteLedger, type SqliteLedgerOptions } from "../../src/ledger/sqlite.js";
import { LedgerError, type ClaimInput, type Ledger, type SettlementKey, type SettlementRecord } from "../../src/ledger/types.js";
import { startTestPostgres, type TestPostgres, type TestPostgresOptions } from "../../src/harness/postgres.js";
import { QUIET_OBSERVER, type SettlementDeps, type SettlementSettings } from "../../src/settlement/deps.js";
import { InFlight } from "../../src/settlement/in-flight.js";
import type { SettlementLogger } from "../../src/settlement/logger.js";
import { LedgerOutbox } from "../../src/settlement/outbox.js";
import { openLedger, type OpenLedgerOptions } from "../../src/ledger/open.js";
import type { SqlLedger } from "../../src/ledger/sql/ledger.js";
import { closeAfter, once } from "./teardown.js";

// Helpers only: importing this file runs nothing.

/** `ledger` closed with the scope that opens it (test/helpers/teardown.ts); its `close` runs once. */
function closedWithScope<L extends Ledger>(ledger: L, what: string): L {
  ledger.close = closeAfter(what, once(ledger.close.bind(ledger)));
  return ledger;
}

/** The ledger `openLedger(options)` opens (default: embedded SQLite in memory), closed with the scope that opens it. */
export async function openTestLedger(options: OpenLedgerOptions = {}): Promise<Ledger> {
  return closedWithScope(await openLedger(options), "ledger");
}

/** An embedded SQLite ledger in memory, closed with the scope that opens it. */
export function openMemoryLedger(options: Omit<Parameters<typeof openSqliteLedger>[0], "location"> = {}): SqlLedger {
  return closedWithScope(openSqliteLedger({ ...options, location: MEMORY }), "in-memory ledger");
}

/** An embedded SQLite ledger (`openSqliteLedger`), closed with the scope that opens it. */
export function openSqliteTestLedger(options: SqliteLedgerOptions): SqlLedger {
  return closedWithScope(openSqliteLedger(options), `SQLite ledger ${options.location ?? MEMORY}`);
}

/** A PostgreSQL ledger (`openPostgresLedger`), closed with the scope that opens it. */
export async function openPostgresTestLedger(options: PostgresLedgerOptions): Promise<SqlLedger> {
  return closedWithScope(await openPostgresLedger(options), "PostgreSQL ledger");
}

/** The harness's embedded PostgreSQL server (`startTestPostgres`), stopped with the scope that starts it. */
export async function openTestPostgres(options: TestPostgresOptions = {}): Promise<TestPostgres> {
  const server = await startTestPostgres(options);
  closeAfter("embedded PostgreSQL server", () => server.stop());
  return server;
}

/** A SQLite file opened directly (to read or write it beside a ledger), closed with the scope that opens it. */
export function openDatabaseFile(location: string, options: { readOnly?: boolean } = {}): DatabaseSync {
  const file = new DatabaseSync(location, options);
  closeAfter(`SQLite file ${location}`, () => {
    if (file.isOpen) file.close();
  });
  return file;
}

/** A clock the tests move by hand (the ledger's leases, deadlines and windows follow it). */
export class TestClock {
  now = Date.UTC(2026, 0, 1);
  readonly read = () => this.now;
  advance(ms: number): void {
    this.now += ms;
  }
}

/** One store of one backend: `open` gives another handle (its own connection pool) on it. */
export interface LedgerStore {
  /** False for `:memory:`: every `open` returns the one handle. */
  shared: boolean;
  open(): Promise<Ledger>;
  /** Closes every handle opened and removes the store. */
  dispose(): Promise<void>;
}

/** A backend the contract suite runs against. */
export interface LedgerBackend {
  name: string;
  /** Whether its stores outlive their handles (a file, a database; not `:memory:`), known before any store exists. */
  reopenable: boolean;
  /**
   * What relayer key leases and heartbeats go by: the ledger's clock (the {@link TestClock}: one instance holds an
   * embedded file), or the database's (PostgreSQL, shared by instances: a test cannot move it).
   */
  leaseClock: "ledger" | "database";
  /** Once per suite (e.g. starts PostgreSQL). */
  setUp(): Promise<void>;
  tearDown(): Promise<void>;
  /** A new empty store. */
  store(clock: TestClock): Promise<LedgerStore>;
}

function tracking(open: () => Promise<Ledger>, cleanup: () => void = () => {}): Pick<LedgerStore, "open" | "dispose"> {
  const handles: Ledger[] = [];
  return {
    async open() {
      const ledger = await open();
      handles.push(ledger);
      return ledger;
    },
    async dispose() {
      await Promise.all(handles.map((ledger) => ledger.close()));
      cleanup();
    },
  };
}

export const sqliteFileBackend = (): LedgerBackend => ({
  name: "embedded SQLite file",
  reopenable: true,
  leaseClock: "ledger",
  async setUp() {},
  async tearDown() {},
  async store(clock) {
    const dir = mkdtempSync(join(tmpdir(), "x402-ledger-"));
    const location = join(dir, "ledger.db");
    return {
      shared: true,
      ...tracking(
        async () => openSqliteLedger({ location, clock: clock.read, pollMs: 20 }),
        () => rmSync(dir, { recursive: true, force: true }),
      ),
    };
  },
});

export const sqliteMemoryBackend = (): LedgerBackend => ({
  name: "embedded SQLite :memory:",
  reopenable: false,
  leaseClock: "ledger",
  async setUp() {},
  async tearDown() {},
  async store(clock) {
    let ledger: Ledger | undefined;
    return {
      shared: false,
      ...tracking(async () => (ledger ??= openSqliteLedger({ location: MEMORY, clock: clock.read, pollMs: 20 }))),
      async dispose() {
        await ledger?.close();
      },
    };
  },
});

export const postgresBackend = (): LedgerBackend => {
  let server: TestPostgres | undefined;
  return {
    name: "PostgreSQL",
    reopenable: true,
    leaseClock: "database",
    async setUp() {
      server = await openTestPostgres();
    },
    async tearDown() {
      await server?.stop();
    },
    async store(clock) {
      const url = await server!.createDatabase();
      const handles = tracking(async () => openPostgresLedger({ url, clock: clock.read, pollMs: 20, poolSize: 5 }));
      // Each test's database goes with it: the server's files stay small, and stopping it stays quick.
      return { shared: true, open: handles.open, dispose: async () => (await handles.dispose(), await server!.dropDatabase(url)) };
    },
  };
};

export const TOKEN: Address = "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0";
export const PAYEE: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
export const PAYER: Address = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
export const RELAYER: Address = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720";

/** A distinct authorization nonce per label. */
export const nonceOf = (label: string | number): Hex => keccak256(toHex(`nonce:${label}`));

/** A claim of one authorization with sensible defaults. */
export function claimInput(overrides: Partial<ClaimInput> & { label?: string | number } = {}): ClaimInput {
  const { label = 1, ...rest } = overrides;
  return {
    key: { chainId: 338, token: TOKEN, authorizer: PAYER, nonce: nonceOf(label) },
    network: "cronos-testnet",
    payee: PAYEE,
    value: 1_000_000n,
    validBefore: 2_000_000_000n,
    call: { to: TOKEN, data: "0xe3ee160e", gas: 90_000n },
    owner: "instance-a",
    ownerTtlMs: 30_000,
    deadlineMs: 120_000,
    ...rest,
  };
}

/**
 * A settled row as the settle path leaves it: claimed by instance-a, its transaction `txHash` recorded under the relayer
 * key's lease, then mined in `blockNumber` (the chain's transaction, or one it does not hold: the test's to say).
 */
export async function settledRecord(
  ledger: Ledger,
  row: { key: SettlementKey; payee: Address; value: bigint; txHash: Hex; blockNumber: bigint; blockTimestamp: bigint },
): Promise<SettlementRecord> {
  const { key, payee, value, txHash, blockNumber, blockTimestamp } = row;
  const claimed = await ledger.claim({ key, network: "cronos-testnet", payee, value, validBefore: 9_999_999_999n, owner: "instance-a", ownerTtlMs: 60_000, deadlineMs: 60_000 });
  if (claimed.outcome !== "claimed") throw new Error(claimed.outcome);
  await ledger.acquireLease(RELAYER, "instance-a", 60_000);
  await ledger.recordBroadcast({ id: claimed.record.id, owner: "instance-a", hash: txHash, raw: "0x01", relayer: RELAYER, relayerNonce: 1, checkAfterMs: 60_000 });
  return ledger.markSettled(claimed.record.id, { txHash, blockNumber, blockTimestamp });
}

/** A fake signed transaction for the write-ahead record: its hash is what the ledger keys on. */
export function signedTx(label: string | number): { hash: Hex; raw: Hex } {
  const raw = toHex(`raw-transaction:${label}`);
  return { hash: keccak256(raw), raw };
}

/** A ledger a test can take down: while `down`, every call rejects as a database that does not answer. */
export interface SwitchableLedger {
  ledger: Ledger;
  down: boolean;
}

/**
 * Wraps `inner` so that a test can make it unreachable (what a PostgreSQL restart looks like to the
 * facilitator) without a database server: calls reject with a `LedgerError`, and `health` reports it
 * unreachable. Subscriptions and `close` pass through.
 */
export function switchableLedger(inner: Ledger): SwitchableLedger {
  const state: SwitchableLedger = { ledger: inner, down: false };
  const passThrough = new Set<PropertyKey>(["close", "onQueued", "backend"]);
  state.ledger = new Proxy(inner, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== "function" || passThrough.has(property)) return typeof value === "function" ? value.bind(target) : value;
      return (...args: unknown[]) => {
        if (!state.down) return (value as (...a: unknown[]) => unknown).apply(target, args);
        if (property === "health") return target.health().then((health) => ({ ...health, reachable: false, error: "connect ECONNREFUSED (test: the ledger is down)" }));
        return Promise.reject(new LedgerError("unavailable", "connect ECONNREFUSED (test: the ledger is down)"));
      };
    },
  });
  return state;
}

/** An embedded ledger file at `location` as a version before `MIGRATIONS[before]` left it, holding the rows `statements` write. */
export function sqliteLedgerBefore(location: string, before: number, statements: readonly string[]): void {
  const old = new DatabaseSync(location);
  try {
    for (const migration of MIGRATIONS.slice(0, before)) for (const statement of migration.statements(SQLITE_SCHEMA)) old.exec(statement);
    old.exec(`PRAGMA user_version = ${before}`);
    for (const statement of statements) old.exec(statement);
  } finally {
    old.close();
  }
}

/** A new database on `server` as a version before `MIGRATIONS[before]` left it, holding the rows `statements` write: its URL. */
export async function postgresLedgerBefore(server: TestPostgres, before: number, statements: readonly string[]): Promise<string> {
  const url = await server.createDatabase();
  await migratePostgres(url, { through: MIGRATIONS[before - 1]!.name });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const statement of statements) await client.query(statement);
  } finally {
    await client.end();
  }
  return url;
}

/** Settlement's settings as the facilitator's defaults give them (settle time-out 120 s, no revert penalty). */
export function settlementSettings(overrides: Partial<SettlementSettings> = {}): SettlementSettings {
  return {
    settleMarginSeconds: 6,
    headCacheMs: 0,
    confirmations: 1,
    settleTimeoutMs: 120_000,
    pollingIntervalMs: 100,
    relayerSafety: { maxSettleGas: 250_000n, erc1271GasLimit: 150_000n, revertPenaltySeconds: 0 },
    ownerTtlMs: 30_000,
    reconcileAfterMs: 10_000,
    queuePollMs: 1_000,
    ...overrides,
  };
}

const SILENT: SettlementLogger = { info() {}, warn() {}, error() {}, debug() {} };

/**
 * Settlement's one dependencies object over `ledger`, as a test builds the part it needs: no networks, no key held,
 * a silent logger and a quiet observer unless given, an outbox and work tracker of its own, the system clock.
 */
export function settlementDeps(ledger: Ledger, overrides: Partial<SettlementDeps> = {}): SettlementDeps {
  const logger = overrides.logger ?? SILENT;
  return {
    networks: new Map(),
    ledger,
    logger,
    settings: settlementSettings(),
    observer: QUIET_OBSERVER,
    instanceId: "test-instance",
    keys: { held: () => [], holds: () => false },
    outbox: new LedgerOutbox({ logger }),
    inFlight: new InFlight(),
    now: Date.now,
    ...overrides,
  };
}
