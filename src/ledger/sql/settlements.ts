import type { Address, Hex } from "viem";
import type { SettlementFailureCode } from "../../protocol/reasons.js";
import {
  IllegalTransitionError,
  LedgerError,
  type ClaimInput,
  type ClaimResult,
  type PendingSummary,
  type SettlementCall,
  type SettlementKey,
  type SettlementRecord,
  type SettlementStatus,
  type SettlementStore,
} from "../types.js";
import { lower, num, placeholders, type Int8 } from "./columns.js";
import { SqlStore, type SqlDriver, type SqlTransaction, type SqlValue } from "./driver.js";
import { IN_FLIGHT, keyParams, loadRecord, loadRecords, toSettlement, type SettlementRow } from "./settlement-rows.js";

const FINAL: ReadonlySet<SettlementStatus> = new Set(["settled", "failed"]);

/**
 * The settlement a transaction hash names (any of its transactions, or the one that used its authorization):
 * two indexed reads (the transactions' unique hash, the rows' tx_hash), never a scan. An OR across the two
 * tables (`id IN (…) OR tx_hash = ?`) could only be answered by reading every row. Exported for the test
 * that reads its plan.
 */
export const FIND_BY_TX_HASH = `SELECT * FROM settlements WHERE id IN (
   SELECT settlement_id FROM settlement_transactions WHERE hash = ? UNION SELECT id FROM settlements WHERE tx_hash = ?
 ) ORDER BY id LIMIT 1`;

/** Runs tasks one at a time per key, in order; a key with nothing queued is forgotten. */
class KeyedSerial {
  readonly #tails = new Map<string, Promise<unknown>>();
  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const result = (this.#tails.get(key) ?? Promise.resolve()).then(task);
    const tail = result.catch(() => undefined);
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }
}

/** The settlements over SQL: claims, outcomes, hand-overs to key holders, lookups and waits. */
export class SqlSettlementStore extends SqlStore implements SettlementStore {
  readonly #pollMs: number;
  // One payer's claims serialize in the database anyway (its reservation); queued here first, they do
  // not each hold a pooled connection while they wait for the lock.
  readonly #payers = new KeyedSerial();

  constructor(driver: SqlDriver, now: () => number, pollMs: number) {
    super(driver, now);
    this.#pollMs = pollMs;
  }

  async #lockedRow(tx: SqlTransaction, id: number): Promise<SettlementRow> {
    const [row] = await tx.all<SettlementRow>(`SELECT * FROM settlements WHERE id = ?${this.db.forUpdate}`, [id]);
    if (!row) throw new LedgerError("not_found", `settlement ${id} does not exist`);
    return row;
  }

  claim(input: ClaimInput): Promise<ClaimResult> {
    const key = keyParams(input.key);
    const payer = `${key[0]}:${key[1]}:${key[2]}`;
    return this.#payers.run(payer, () => this.#claim(input, key, payer));
  }

  #claim(input: ClaimInput, key: SqlValue[], payer: string): Promise<ClaimResult> {
    const now = this.now();
    // Under the payer's lock (taken with BEGIN): only claims change a payer's rows to claimed, so the rows
    // read here stay as read, and a failed one is claimed again only if it is still failed.
    return this.db.transaction({ lock: payer }, async (tx) => {
      // The authorization's row, and the payer's rows in flight or mined after the block the balance was read
      // at (that balance does not show them yet), in one read.
      const payerRows = await tx.all<SettlementRow>(
        `SELECT * FROM settlements WHERE chain_id = ? AND token = ? AND authorizer = ?
           AND (nonce = ? OR status IN ${IN_FLIGHT} OR (status = 'settled' AND block_number > ?))`,
        [...key, input.balanceBlock === undefined ? null : Number(input.balanceBlock)],
      );
      const existing = payerRows.find((row) => row.nonce === key[3]);
      if (existing && existing.status !== "failed") return { outcome: "exists", record: (await loadRecord(tx, existing))! };
      if (input.balance !== undefined) {
        const counted = payerRows.filter((row) => row !== existing && (row.status === "claimed" || row.status === "sent" || row.status === "settled"));
        const inFlight = counted.reduce((sum, row) => sum + BigInt(row.value), 0n);
        if (inFlight + input.value > input.balance) return { outcome: "overBalance", inFlight };
      }
      const ownerExpiresAt = input.owner === null ? null : now + input.ownerTtlMs;
      const deadlineAt = now + input.deadlineMs;
      const nextCheckAt = ownerExpiresAt === null ? deadlineAt : Math.min(ownerExpiresAt, deadlineAt);
      const fields: SqlValue[] = [
        input.network,
        lower(input.payee),
        input.value.toString(),
        input.validBefore.toString(),
        input.owner,
        ownerExpiresAt,
        deadlineAt,
        input.call ? lower(input.call.to) : null,
        input.call?.data ?? null,
        input.call?.gas.toString() ?? null,
        nextCheckAt,
        now,
      ];
      let rows: SettlementRow[];
      if (existing) {
        // A failed row claimed again (its authorization is still unused): its transactions stay as history.
        rows = await tx.all<SettlementRow>(
          `UPDATE settlements SET status = 'claimed', network = ?, payee = ?, value = ?, valid_before = ?, owner = ?,
             owner_expires_at = ?, deadline_at = ?, call_to = ?, call_data = ?, call_gas = ?, next_check_at = ?, updated_at = ?,
             tx_hash = NULL, relayer = NULL, relayer_nonce = NULL, block_number = NULL, block_timestamp = NULL, error = NULL, error_code = NULL,
             attempts = attempts + 1
           WHERE id = ? AND status = 'failed' RETURNING *`,
          [...fields, Number(existing.id)],
        );
      } else {
        rows = await tx.all<SettlementRow>(
          `INSERT INTO settlements (network, payee, value, valid_before, owner, owner_expires_at, deadline_at, call_to, call_data,
             call_gas, next_check_at, updated_at, created_at, status, chain_id, token, authorizer, nonce)
           VALUES (${placeholders(fields.length + 1)}, 'claimed', ?, ?, ?, ?)
           ON CONFLICT (chain_id, token, authorizer, nonce) DO NOTHING RETURNING *`,
          [...fields, now, ...key],
        );
      }
      const row = rows[0];
      if (!row) {
        const [current] = await tx.all<SettlementRow>(`SELECT * FROM settlements WHERE chain_id = ? AND token = ? AND authorizer = ? AND nonce = ?`, key);
        return { outcome: "exists", record: (await loadRecord(tx, current))! };
      }
      if (input.owner === null && input.call) await tx.notify(`q:${row.id}`);
      // A new row has no transactions yet; a failed one claimed again keeps its history.
      return { outcome: "claimed", record: existing ? (await loadRecord(tx, row))! : toSettlement(row, []) };
    });
  }

  takeQueued(input: { owner: string; chainIds: readonly number[]; limit: number; ownerTtlMs: number }): Promise<SettlementRecord[]> {
    if (input.chainIds.length === 0 || input.limit <= 0) return Promise.resolve([]);
    const now = this.now();
    return this.db.transaction(async (tx) => {
      const rows = await tx.all<SettlementRow>(
        `UPDATE settlements SET owner = ?, owner_expires_at = ?, next_check_at = ?, updated_at = ?
         WHERE id IN (
           SELECT id FROM settlements
           WHERE status = 'claimed' AND owner IS NULL AND call_to IS NOT NULL AND deadline_at > ?
             AND chain_id IN (${placeholders(input.chainIds.length)})
           ORDER BY created_at LIMIT ?${this.db.skipLocked}
         ) RETURNING *`,
        [input.owner, now + input.ownerTtlMs, now + input.ownerTtlMs, now, now, ...input.chainIds, input.limit],
      );
      return loadRecords(tx, rows.sort((a, b) => Number(a.id) - Number(b.id)));
    });
  }

  markSettled(id: number, input: { txHash: Hex; blockNumber: bigint; blockTimestamp: bigint }): Promise<SettlementRecord> {
    const now = this.now();
    const hash = lower(input.txHash);
    return this.db.transaction(async (tx) => {
      const [updated] = await tx.all<SettlementRow>(
        `UPDATE settlements SET status = 'settled', tx_hash = ?, block_number = ?, block_timestamp = ?, error = NULL, error_code = NULL,
           next_check_at = NULL, updated_at = ? WHERE id = ? AND status IN ${IN_FLIGHT} RETURNING *`,
        [hash, input.blockNumber.toString(), input.blockTimestamp.toString(), now, id],
      );
      if (!updated) {
        const row = await this.#lockedRow(tx, id);
        const status = row.status;
        if (status === "settled" && row.tx_hash === hash) return (await loadRecord(tx, row))!;
        throw new IllegalTransitionError(status, "settled", id);
      }
      await tx.run(`UPDATE settlement_transactions SET state = 'mined', updated_at = ? WHERE hash = ? AND settlement_id = ?`, [now, hash, id]);
      // Its other versions at the same nonce (replacements, or the one it replaced) can never be mined now.
      await tx.run(
        `UPDATE settlement_transactions SET state = 'replaced', updated_at = ?
         WHERE settlement_id = ? AND hash <> ? AND state IN ('signed', 'accepted')
           AND (relayer, relayer_nonce) IN (SELECT relayer, relayer_nonce FROM settlement_transactions WHERE hash = ? AND settlement_id = ?)`,
        [now, id, hash, hash, id],
      );
      await tx.notify(`o:${id}`);
      return (await loadRecord(tx, updated))!;
    });
  }

  markFailed(id: number, input: { code: SettlementFailureCode; owner?: string | null; txHash?: Hex }): Promise<SettlementRecord | undefined> {
    const now = this.now();
    return this.db.transaction(async (tx) => {
      const row = await this.#lockedRow(tx, id);
      const status = row.status;
      if (status === "failed") return loadRecord(tx, row);
      if (status === "settled") throw new IllegalTransitionError(status, "failed", id);
      if (input.owner !== undefined && (row.owner ?? null) !== input.owner) return undefined;
      const [updated] = await tx.all<SettlementRow>(
        `UPDATE settlements SET status = 'failed', error_code = ?, error = NULL, tx_hash = COALESCE(?, tx_hash), next_check_at = NULL, updated_at = ? WHERE id = ? RETURNING *`,
        [input.code, input.txHash ? lower(input.txHash) : null, now, id],
      );
      await tx.notify(`o:${id}`);
      return loadRecord(tx, updated);
    });
  }

  withdraw(id: number, input: { code: SettlementFailureCode; owner: string | null }): Promise<SettlementRecord | undefined> {
    const now = this.now();
    return this.db.transaction(async (tx) => {
      const [row] = await tx.all<SettlementRow>(
        `UPDATE settlements SET status = 'failed', error_code = ?, error = NULL, next_check_at = NULL, updated_at = ?
         WHERE id = ? AND status = 'claimed' AND owner IS NOT DISTINCT FROM ? RETURNING *`,
        [input.code, now, id, input.owner],
      );
      if (!row) return undefined;
      await tx.notify(`o:${id}`);
      return loadRecord(tx, row);
    });
  }

  withdrawOwned(input: { owner: string; code: SettlementFailureCode; keep: readonly number[] }): Promise<number[]> {
    const now = this.now();
    const keep = input.keep.length > 0 ? ` AND id NOT IN (${input.keep.map(() => "?").join(", ")})` : "";
    return this.db.transaction(async (tx) => {
      const rows = await tx.all<Pick<SettlementRow, "id">>(
        `UPDATE settlements SET status = 'failed', error_code = ?, error = NULL, next_check_at = NULL, updated_at = ?
         WHERE status = 'claimed' AND owner = ?${keep} RETURNING id`,
        [input.code, now, input.owner, ...input.keep],
      );
      const ids = rows.map((row) => Number(row.id));
      for (const id of ids) await tx.notify(`o:${id}`);
      return ids;
    });
  }

  requeue(id: number, owner: string, call?: SettlementCall): Promise<boolean> {
    const now = this.now();
    return this.db.transaction(async (tx) => {
      const changed = await tx.run(
        `UPDATE settlements SET owner = NULL, owner_expires_at = NULL, next_check_at = deadline_at, updated_at = ?,
           call_to = COALESCE(?, call_to), call_data = COALESCE(?, call_data), call_gas = COALESCE(?, call_gas)
         WHERE id = ? AND owner = ? AND status = 'claimed'`,
        [now, call ? lower(call.to) : null, call?.data ?? null, call?.gas.toString() ?? null, id, owner],
      );
      if (changed > 0) await tx.notify(`q:${id}`);
      return changed > 0;
    });
  }

  async get(key: SettlementKey): Promise<SettlementRecord | undefined> {
    const [row] = await this.db.all<SettlementRow>(`SELECT * FROM settlements WHERE chain_id = ? AND token = ? AND authorizer = ? AND nonce = ?`, keyParams(key));
    return loadRecord(this.db, row);
  }

  async getById(id: number): Promise<SettlementRecord | undefined> {
    const [row] = await this.db.all<SettlementRow>(`SELECT * FROM settlements WHERE id = ?`, [id]);
    return loadRecord(this.db, row);
  }

  async findByTxHash(hash: Hex): Promise<SettlementRecord | undefined> {
    const h = lower(hash);
    const [row] = await this.db.all<SettlementRow>(FIND_BY_TX_HASH, [h, h]);
    return loadRecord(this.db, row);
  }

  async findByAuthorization(chainId: number, authorizer: Address, nonce: Hex): Promise<SettlementRecord[]> {
    const rows = await this.db.all<SettlementRow>(`SELECT * FROM settlements WHERE chain_id = ? AND authorizer = ? AND nonce = ? ORDER BY id`, [
      chainId,
      lower(authorizer),
      lower(nonce),
    ]);
    return loadRecords(this.db, rows);
  }

  async listPending(options: { chainIds?: readonly number[]; limit?: number } = {}): Promise<SettlementRecord[]> {
    const chains = options.chainIds;
    const rows = await this.db.all<SettlementRow>(
      `SELECT * FROM settlements WHERE status IN ${IN_FLIGHT}${chains ? ` AND chain_id IN (${placeholders(chains.length)})` : ""}
       ORDER BY created_at, id LIMIT ?`,
      [...(chains ?? []), options.limit ?? 1_000],
    );
    return loadRecords(this.db, rows);
  }

  async pendingSummary(): Promise<PendingSummary> {
    const [row] = await this.db.all<{ count: Int8; oldest: Int8 | null }>(`SELECT COUNT(*) AS count, MIN(created_at) AS oldest FROM settlements WHERE status IN ${IN_FLIGHT}`);
    const oldest = num(row?.oldest);
    return { count: Number(row?.count ?? 0), ...(oldest !== undefined ? { oldestCreatedAt: oldest } : {}) };
  }

  takeDue(input: { chainIds: readonly number[]; limit: number; recheckMs: number }): Promise<SettlementRecord[]> {
    if (input.chainIds.length === 0 || input.limit <= 0) return Promise.resolve([]);
    const now = this.now();
    return this.db.transaction(async (tx) => {
      const rows = await tx.all<SettlementRow>(
        `UPDATE settlements SET next_check_at = ?
         WHERE id IN (
           SELECT id FROM settlements
           WHERE status IN ${IN_FLIGHT} AND next_check_at <= ? AND chain_id IN (${placeholders(input.chainIds.length)})
           ORDER BY next_check_at LIMIT ?${this.db.skipLocked}
         ) RETURNING *`,
        [now + input.recheckMs, now, ...input.chainIds, input.limit],
      );
      return loadRecords(tx, rows.sort((a, b) => Number(a.id) - Number(b.id)));
    });
  }

  async deferCheck(id: number, untilMs: number): Promise<void> {
    await this.db.run(`UPDATE settlements SET next_check_at = ? WHERE id = ? AND status IN ${IN_FLIGHT}`, [untilMs, id]);
  }

  async waitForOutcome(id: number, timeoutMs: number, signal?: AbortSignal): Promise<SettlementRecord | undefined> {
    const messages = this.db.messages;
    const event = `o:${id}`;
    let wake: () => void = () => {};
    const listener = () => wake();
    messages.on(event, listener);
    const deadline = performance.now() + timeoutMs;
    try {
      for (;;) {
        const record = await this.getById(id);
        const left = deadline - performance.now();
        if (!record || FINAL.has(record.status) || left <= 0 || signal?.aborted) return record;
        // Sleep until a notification, the next poll, the deadline or an abort, whichever comes first.
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, Math.min(this.#pollMs, left));
          function done() {
            clearTimeout(timer);
            signal?.removeEventListener("abort", done);
            resolve();
          }
          wake = done;
          signal?.addEventListener("abort", done, { once: true });
        });
      }
    } finally {
      messages.off(event, listener);
    }
  }

  onQueued(listener: () => void): () => void {
    const handler = (message: string) => {
      if (message.startsWith("q:")) listener();
    };
    this.db.messages.on("message", handler);
    return () => this.db.messages.off("message", handler);
  }

  deleteFinishedSettlements(before: number, limit: number): Promise<number> {
    if (limit <= 0) return Promise.resolve(0);
    return this.db.transaction(async (tx) => {
      // The partial index of finished rows by age: the oldest first, never a row in flight.
      const rows = await tx.all<Pick<SettlementRow, "id">>(`SELECT id FROM settlements WHERE status IN ('settled', 'failed') AND updated_at < ? ORDER BY updated_at, id LIMIT ?`, [before, limit]);
      if (rows.length === 0) return 0;
      const ids = rows.map((row) => Number(row.id));
      await tx.run(`DELETE FROM settlement_transactions WHERE settlement_id IN (${placeholders(ids.length)})`, ids);
      return tx.run(`DELETE FROM settlements WHERE id IN (${placeholders(ids.length)}) AND status IN ('settled', 'failed')`, ids);
    });
  }
}
