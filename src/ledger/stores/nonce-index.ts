import type { Address, Hex } from "viem";
import type { TokenScope } from "./scope.js";

/** An authorization nonce the token state index found used or canceled on chain. */
export interface IndexedNonce {
  authorizer: Address;
  nonce: Hex;
  /** The block of its AuthorizationUsed or AuthorizationCanceled log. */
  blockNumber: bigint;
}

/** A range of blocks whose used and canceled nonces are all given (see {@link NonceIndexStore.recordIndexedNonces}). */
export interface NonceRange {
  fromBlock: bigint;
  throughBlock: bigint;
  /** The hash of `throughBlock`: recorded as a checkpoint of the chain's history with the progress. */
  throughHash?: Hex;
}

/** How far the shared record of used and canceled authorization nonces reaches, for one token. */
export interface NonceIndexProgress {
  /** The first block covered: the token's deployment block, or the configured start. */
  fromBlock: bigint;
  /** Every AuthorizationUsed / AuthorizationCanceled log of blocks fromBlock..throughBlock is stored; fromBlock - 1 while none is. */
  throughBlock: bigint;
}

/** The token state index's shared record of used and canceled authorization nonces, and how far it reaches. */
export interface NonceIndexStore {
  /** The nonce index's progress for `scope`, if it was ever opened. */
  nonceIndexProgress(scope: TokenScope): Promise<NonceIndexProgress | undefined>;
  /**
   * Opens the nonce index of `scope` at `fromBlock`: creates its progress (fromBlock, fromBlock - 1) when there is none;
   * when the stored one starts later than `fromBlock` (an earlier start configured), starts it over at `fromBlock`
   * (throughBlock = fromBlock - 1), keeping the nonces stored (they are still true). Otherwise leaves it as it is.
   * Returns the progress. Safe when several instances open it at once.
   */
  openNonceIndex(scope: TokenScope, fromBlock: bigint): Promise<NonceIndexProgress>;
  /**
   * Stores `nonces` (one already stored is left as it is) and, in the same transaction, raises throughBlock to
   * `range.throughBlock` when the stored progress already reaches `range.fromBlock - 1` (never lowers it; a range
   * that would leave blocks between unread raises nothing, its nonces are stored all the same). The caller vouches
   * that every such log of `range` is among `nonces` or stored. Throws LedgerError "not_found" when the index was
   * never opened. With `range.throughHash`, a progress raised to `range.throughBlock` records that block as a
   * checkpoint of the chain's history in the same transaction. Returns the progress after.
   */
  recordIndexedNonces(scope: TokenScope, nonces: readonly IndexedNonce[], range: NonceRange): Promise<NonceIndexProgress>;
  /** Stored nonces of `scope` in (authorizer, nonce) order, after `after` (exclusive), at most `limit`: the pages that load the index. */
  indexedNonces(scope: TokenScope, options: { after?: { authorizer: Address; nonce: Hex }; limit: number }): Promise<IndexedNonce[]>;
  /** One stored nonce of `scope` (any case), if stored: what the index asks when it does not hold the nonce in memory. */
  indexedNonce(scope: TokenScope, authorizer: Address, nonce: Hex): Promise<IndexedNonce | undefined>;
}
