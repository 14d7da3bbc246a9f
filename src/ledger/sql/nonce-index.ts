import { getAddress, type Address, type Hex } from "viem";
import { LedgerError, type IndexedNonce, type NonceIndexProgress, type NonceIndexStore, type NonceRange, type TokenScope } from "../types.js";
import { writeCheckpoint } from "./chain-history.js";
import { checksum, lower, type Int8 } from "./columns.js";
import { SqlStore, type SqlValue } from "./driver.js";

/** A row of `indexed_nonces` (migration 0005). */
interface IndexedNonceRow {
  chain_id: number;
  token: string;
  authorizer: string;
  nonce: Hex;
  block_number: Int8;
}

/** The range of a `nonce_index_progress` row (migration 0005). */
interface ProgressRow {
  from_block: Int8;
  through_block: Int8;
}

function toProgress(row: ProgressRow): NonceIndexProgress {
  return { fromBlock: BigInt(row.from_block), throughBlock: BigInt(row.through_block) };
}

/**
 * Most rows in one INSERT of indexed nonces (5 parameters each: far under SQLite's limit of bound parameters).
 * A power of two: a batch goes in chunks of it and then of the powers of two below it, so that only a handful of
 * statement shapes exist (both drivers keep every distinct statement they prepare, for good).
 */
const NONCE_ROWS = 512;

function* nonceChunks<T>(rows: readonly T[]): Generator<readonly T[]> {
  let at = 0;
  for (let size = NONCE_ROWS; size > 0; size >>= 1) {
    for (; rows.length - at >= size; at += size) yield rows.slice(at, at + size);
  }
}

/** The token state index's nonces and progress over SQL. */
export class SqlNonceIndexStore extends SqlStore implements NonceIndexStore {
  async nonceIndexProgress(scope: TokenScope): Promise<NonceIndexProgress | undefined> {
    const [row] = await this.db.all<ProgressRow>(`SELECT from_block, through_block FROM nonce_index_progress WHERE chain_id = ? AND token = ?`, [
      scope.chainId,
      lower(scope.token),
    ]);
    return row ? toProgress(row) : undefined;
  }

  async openNonceIndex(scope: TokenScope, fromBlock: bigint): Promise<NonceIndexProgress> {
    // One statement, so that instances opening it at once agree; an earlier start starts the covered range over.
    const earlier = `excluded.from_block < nonce_index_progress.from_block`;
    const [row] = await this.db.all<ProgressRow>(
      `INSERT INTO nonce_index_progress (chain_id, token, from_block, through_block, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (chain_id, token) DO UPDATE SET
         through_block = CASE WHEN ${earlier} THEN excluded.through_block ELSE nonce_index_progress.through_block END,
         updated_at = CASE WHEN ${earlier} THEN excluded.updated_at ELSE nonce_index_progress.updated_at END,
         from_block = CASE WHEN ${earlier} THEN excluded.from_block ELSE nonce_index_progress.from_block END
       RETURNING from_block, through_block`,
      [scope.chainId, lower(scope.token), Number(fromBlock), Number(fromBlock - 1n), this.now()],
    );
    return toProgress(row!);
  }

  recordIndexedNonces(scope: TokenScope, nonces: readonly IndexedNonce[], range: NonceRange): Promise<NonceIndexProgress> {
    const token = lower(scope.token);
    // A nonce given twice (in another case, or from log ranges that overlap) is one row: the first one given.
    const rows = new Map<string, SqlValue[]>();
    for (const indexed of nonces) {
      const authorizer = lower(indexed.authorizer);
      const nonce = lower(indexed.nonce);
      const key = `${authorizer}:${nonce}`;
      if (!rows.has(key)) rows.set(key, [scope.chainId, token, authorizer, nonce, Number(indexed.blockNumber)]);
    }
    const now = this.now();
    return this.db.transaction(async (tx) => {
      // The progress row first: its lock (PostgreSQL) makes one token's recorders take turns, so that their inserts
      // of the same nonces in other orders cannot deadlock.
      const [row] = await tx.all<ProgressRow>(
        // Raised only over a range that joins the stored one: no block between is left unread.
        `UPDATE nonce_index_progress SET through_block = CASE WHEN through_block < ? AND through_block >= ? THEN ? ELSE through_block END, updated_at = ?
         WHERE chain_id = ? AND token = ? RETURNING from_block, through_block`,
        [Number(range.throughBlock), Number(range.fromBlock) - 1, Number(range.throughBlock), now, scope.chainId, token],
      );
      if (!row) throw new LedgerError("not_found", `the nonce index of token ${scope.token} on chain ${scope.chainId} was never opened`);
      for (const chunk of nonceChunks([...rows.values()])) {
        await tx.run(
          `INSERT INTO indexed_nonces (chain_id, token, authorizer, nonce, block_number) VALUES ${chunk.map(() => "(?, ?, ?, ?, ?)").join(", ")}
           ON CONFLICT (chain_id, token, authorizer, nonce) DO NOTHING`,
          chunk.flat(),
        );
      }
      const progress = toProgress(row);
      if (range.throughHash && progress.throughBlock === range.throughBlock) await writeCheckpoint(tx, scope.chainId, { number: range.throughBlock, hash: range.throughHash }, this.now());
      return progress;
    });
  }

  async indexedNonces(scope: TokenScope, options: { after?: { authorizer: Address; nonce: Hex }; limit: number }): Promise<IndexedNonce[]> {
    if (options.limit <= 0) return [];
    const { after } = options;
    const rows = await this.db.all<Pick<IndexedNonceRow, "authorizer" | "nonce" | "block_number">>(
      `SELECT authorizer, nonce, block_number FROM indexed_nonces
       WHERE chain_id = ? AND token = ?${after ? ` AND (authorizer, nonce) > (?, ?)` : ""}
       ORDER BY authorizer, nonce LIMIT ?`,
      [scope.chainId, lower(scope.token), ...(after ? [lower(after.authorizer), lower(after.nonce)] : []), options.limit],
    );
    // Rows come by authorizer: each is checksummed once, and a page of thousands of payers does not crowd the shared cache out.
    let last: { stored: string; address: Address } | undefined;
    return rows.map((row) => {
      const stored = row.authorizer;
      if (last?.stored !== stored) last = { stored, address: getAddress(stored) };
      return { authorizer: last.address, nonce: row.nonce, blockNumber: BigInt(row.block_number) };
    });
  }

  async indexedNonce(scope: TokenScope, authorizer: Address, nonce: Hex): Promise<IndexedNonce | undefined> {
    const [row] = await this.db.all<Pick<IndexedNonceRow, "block_number">>(`SELECT block_number FROM indexed_nonces WHERE chain_id = ? AND token = ? AND authorizer = ? AND nonce = ?`, [
      scope.chainId,
      lower(scope.token),
      lower(authorizer),
      lower(nonce),
    ]);
    return row ? { authorizer: checksum(lower(authorizer)), nonce: lower(nonce) as Hex, blockNumber: BigInt(row.block_number) } : undefined;
  }
}
