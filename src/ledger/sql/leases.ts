import type { Address } from "viem";
import type { InstanceRecord, Lease, LeaseStore } from "../types.js";
import { checksum, lower, type Int8 } from "./columns.js";
import { SqlStore, type SqlDriver, type SqlValue } from "./driver.js";

/** A row of `relayer_leases` (migration 0001). */
interface LeaseRow {
  address: string;
  holder: string;
  epoch: Int8;
  acquired_at: Int8;
  expires_at: Int8;
}

/** A row of `ledger_instances` (migration 0001): `info` is JSON. */
interface InstanceRow {
  id: string;
  info: string;
  started_at: Int8;
  heartbeat_at: Int8;
  expires_at: Int8;
}

function toLease(row: LeaseRow): Lease {
  return {
    address: checksum(row.address),
    holder: row.holder,
    epoch: Number(row.epoch),
    acquiredAt: Number(row.acquired_at),
    expiresAt: Number(row.expires_at),
  };
}

/** The driver's words for lease time: its clock (or none) and its row lock. */
type LeaseClock = Pick<SqlDriver, "clockMs" | "forUpdate">;

/** Now, in a lease statement: the database's clock ({@link SqlDriver.clockMs}), or `?` bound by {@link nowParams}. */
function leaseNow(db: LeaseClock): string {
  return db.clockMs ?? "?";
}

/** The ledger's clock bound for each `?` {@link leaseNow} gave (`times` of them), none with the database's clock. */
function nowParams(db: LeaseClock, now: number, times = 1): SqlValue[] {
  return db.clockMs ? [] : Array.from({ length: times }, () => now);
}

/**
 * The fence of every write-ahead record: the relayer key's lease is the writer's, not lapsed (by the lease's clock:
 * the database's where instances share it), and of the generation named (when named). The row lock holds the lease
 * row (PostgreSQL) until the record commits, so a takeover waits for the record and then reads it, or the record sees
 * the new generation and is refused.
 */
export function leaseFence(db: LeaseClock, epoch: number | undefined): string {
  return `EXISTS (SELECT 1 FROM relayer_leases WHERE address = ? AND holder = ? AND expires_at > ${leaseNow(db)}${epoch === undefined ? "" : " AND epoch = ?"}${db.forUpdate})`;
}

/** The parameters of {@link leaseFence}, in its order (`now`: the ledger's clock, bound only without the database's). */
export function fenceParams(db: LeaseClock, relayer: Address, holder: string, now: number, epoch: number | undefined): SqlValue[] {
  return [lower(relayer), holder, ...nowParams(db, now), ...(epoch === undefined ? [] : [epoch])];
}

/**
 * Relayer key leases and live instances over SQL. Their times are the lease clock's: the database's where instances
 * share the ledger (PostgreSQL: {@link SqlDriver.clockMs}), the ledger's where it holds one instance (SQLite).
 */
export class SqlLeaseStore extends SqlStore implements LeaseStore {
  async acquireLease(address: Address, holder: string, ttlMs: number): Promise<Lease | undefined> {
    const now = leaseNow(this.db);
    const [row] = await this.db.all<LeaseRow>(
      `INSERT INTO relayer_leases (address, holder, epoch, acquired_at, expires_at) VALUES (?, ?, 1, ${now}, ${now} + ?)
       ON CONFLICT (address) DO UPDATE SET
         holder = excluded.holder,
         epoch = CASE WHEN relayer_leases.holder = excluded.holder THEN relayer_leases.epoch ELSE relayer_leases.epoch + 1 END,
         acquired_at = CASE WHEN relayer_leases.holder = excluded.holder THEN relayer_leases.acquired_at ELSE excluded.acquired_at END,
         expires_at = excluded.expires_at
       WHERE relayer_leases.holder = excluded.holder OR relayer_leases.expires_at <= ${now}
       RETURNING *`,
      [lower(address), holder, ...nowParams(this.db, this.now(), 2), ttlMs, ...nowParams(this.db, this.now())],
    );
    return row ? toLease(row) : undefined;
  }

  async renewLeases(holder: string, ttlMs: number): Promise<Lease[]> {
    const rows = await this.db.all<LeaseRow>(`UPDATE relayer_leases SET expires_at = ${leaseNow(this.db)} + ? WHERE holder = ? AND expires_at > 0 RETURNING *`, [
      ...nowParams(this.db, this.now()),
      ttlMs,
      holder,
    ]);
    return rows.map(toLease).sort((a, b) => a.address.localeCompare(b.address));
  }

  async releaseLease(address: Address, holder: string): Promise<void> {
    await this.db.run(`UPDATE relayer_leases SET expires_at = 0 WHERE address = ? AND holder = ?`, [lower(address), holder]);
  }

  async leases(): Promise<Lease[]> {
    return (await this.db.all<LeaseRow>(`SELECT * FROM relayer_leases ORDER BY address`)).map(toLease);
  }

  async heartbeat(id: string, ttlMs: number, info: Record<string, unknown> = {}): Promise<void> {
    const now = leaseNow(this.db);
    await this.db.run(
      `INSERT INTO ledger_instances (id, info, started_at, heartbeat_at, expires_at) VALUES (?, ?, ${now}, ${now}, ${now} + ?)
       ON CONFLICT (id) DO UPDATE SET info = excluded.info, heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at`,
      [id, JSON.stringify(info), ...nowParams(this.db, this.now(), 3), ttlMs],
    );
  }

  async instances(): Promise<InstanceRecord[]> {
    const rows = await this.db.all<InstanceRow>(`SELECT * FROM ledger_instances WHERE expires_at > ${leaseNow(this.db)} ORDER BY started_at, id`, nowParams(this.db, this.now()));
    return rows.map((row) => ({
      id: row.id,
      info: JSON.parse(row.info) as Record<string, unknown>,
      startedAt: Number(row.started_at),
      heartbeatAt: Number(row.heartbeat_at),
      expiresAt: Number(row.expires_at),
    }));
  }

  async removeInstance(id: string): Promise<void> {
    await this.db.run(`DELETE FROM ledger_instances WHERE id = ?`, [id]);
  }

  /** Deletes lapsed instances (`now`: the ledger's clock, where leases go by it). */
  async prune(now: number): Promise<void> {
    await this.db.run(`DELETE FROM ledger_instances WHERE expires_at <= ${leaseNow(this.db)}`, nowParams(this.db, now));
  }
}
