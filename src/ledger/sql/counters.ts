import type { CounterHit, CounterStore } from "../types.js";
import type { Int8 } from "./columns.js";
import { SqlStore } from "./driver.js";

/** Rate-limit counters over SQL. */
export class SqlCounterStore extends SqlStore implements CounterStore {
  async hit(key: string, windowMs: number): Promise<CounterHit> {
    const now = this.now();
    const [row] = await this.db.all<{ hits: number; reset_at: Int8 }>(
      `INSERT INTO rate_limit_counters (key, hits, reset_at) VALUES (?, 1, ?)
       ON CONFLICT (key) DO UPDATE SET
         hits = CASE WHEN rate_limit_counters.reset_at <= ? THEN 1 ELSE rate_limit_counters.hits + 1 END,
         reset_at = CASE WHEN rate_limit_counters.reset_at <= ? THEN excluded.reset_at ELSE rate_limit_counters.reset_at END
       RETURNING hits, reset_at`,
      [key, now + windowMs, now, now],
    );
    return { hits: row!.hits, resetAt: Number(row!.reset_at) };
  }

  async unhit(key: string): Promise<void> {
    await this.db.run(`UPDATE rate_limit_counters SET hits = hits - 1 WHERE key = ? AND hits > 0`, [key]);
  }

  async resetHits(key: string): Promise<void> {
    await this.db.run(`DELETE FROM rate_limit_counters WHERE key = ?`, [key]);
  }

  /** Deletes lapsed counters. */
  async prune(now: number): Promise<void> {
    await this.db.run(`DELETE FROM rate_limit_counters WHERE reset_at <= ?`, [now]);
  }
}
