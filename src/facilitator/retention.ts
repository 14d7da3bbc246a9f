import type { SettlementStore } from "../ledger/types.js";

/** Finished settlements deleted per statement: short transactions, never a long lock. */
const BATCH = 1_000;
/** Batches per round (one round a minute): a backlog of a million rows after retention is switched on goes in under an hour. */
const BATCHES_PER_ROUND = 20;
const DAY_MS = 86_400_000;

/**
 * Retention (`LEDGER_RETENTION_DAYS`): deletes finished settlements (settled or failed) last changed more than
 * `retentionDays` before `now`, with their transactions, in batches, up to a round's worth; rows in flight are
 * never touched. Returns how many went (0 when retention is off).
 */
export async function deleteExpiredSettlements(ledger: Pick<SettlementStore, "deleteFinishedSettlements">, retentionDays: number, now: number): Promise<number> {
  if (retentionDays <= 0) return 0;
  const before = now - retentionDays * DAY_MS;
  let deleted = 0;
  for (let round = 0; round < BATCHES_PER_ROUND; round++) {
    const batch = await ledger.deleteFinishedSettlements(before, BATCH);
    deleted += batch;
    if (batch < BATCH) break;
  }
  return deleted;
}
