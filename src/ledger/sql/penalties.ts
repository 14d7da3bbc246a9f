import type { Hex } from "viem";
import type { Penalty, PenaltyStore, PenaltySubject, TokenScope } from "../types.js";
import { checksum, lower, type Int8 } from "./columns.js";
import { SqlStore } from "./driver.js";

/** A row of `revert_penalties` (migration 0001): `until_at` in chain time (Unix seconds). */
interface PenaltyRow {
  chain_id: number;
  token: string;
  kind: Penalty["kind"];
  subject: string;
  until_at: Int8;
  tx_hash: Hex | null;
  created_at: Int8;
}

function toPenalty(row: PenaltyRow): Penalty {
  return {
    chainId: row.chain_id,
    token: checksum(row.token),
    kind: row.kind,
    subject: row.subject,
    until: BigInt(row.until_at),
    ...(row.tx_hash != null ? { txHash: row.tx_hash } : {}),
  };
}

/** Revert penalties over SQL. */
export class SqlPenaltyStore extends SqlStore implements PenaltyStore {
  async penalize(penalty: Penalty): Promise<void> {
    await this.db.run(
      `INSERT INTO revert_penalties (chain_id, token, kind, subject, until_at, tx_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (chain_id, token, kind, subject) DO UPDATE SET
         tx_hash = CASE WHEN excluded.until_at > revert_penalties.until_at THEN excluded.tx_hash ELSE revert_penalties.tx_hash END,
         until_at = CASE WHEN excluded.until_at > revert_penalties.until_at THEN excluded.until_at ELSE revert_penalties.until_at END`,
      [
        penalty.chainId,
        lower(penalty.token),
        penalty.kind,
        lower(penalty.subject),
        Number(penalty.until),
        penalty.txHash ? lower(penalty.txHash) : null,
        this.now(),
      ],
    );
  }

  async activePenalty(scope: TokenScope, subjects: readonly PenaltySubject[], now: bigint): Promise<Penalty | undefined> {
    if (subjects.length === 0) return undefined;
    const [row] = await this.db.all<PenaltyRow>(
      `SELECT * FROM revert_penalties WHERE chain_id = ? AND token = ? AND until_at > ?
         AND (${subjects.map(() => "(kind = ? AND subject = ?)").join(" OR ")})
       ORDER BY until_at DESC LIMIT 1`,
      [scope.chainId, lower(scope.token), Number(now), ...subjects.flatMap((s) => [s.kind, lower(s.subject)])],
    );
    return row ? toPenalty(row) : undefined;
  }

  /** Deletes penalties that ended a day ago or more. */
  async prune(now: number): Promise<void> {
    await this.db.run(`DELETE FROM revert_penalties WHERE until_at <= ?`, [Math.floor(now / 1000) - 86_400]);
  }
}
