// The token state index's memory of spent nonces: held within a bound, the forgotten ones behind a filter, the live ones stored.
import { hexToBytes, type Address, type Hex } from "viem";
import type { BlockRef, NonceScope, NonceStore, StoredNonce } from "./nonce-store.js";
import { SpentFilter } from "./spent-filter.js";

/** The live record of nonces is stored at most this often (the backfill's progress after a restart). */
const PERSIST_EVERY_MS = 2_000;

/**
 * The used and canceled authorization nonces the index knows of. Held in memory up to `maxNonces`; beyond it the
 * oldest stored ones are forgotten into a {@link SpentFilter}, and a nonce the filter may hold is asked of the store.
 * The nonces the live follower finds are kept until they are stored, with the block they are stored through.
 */
export class SpentNonces {
  readonly #store: NonceStore;
  readonly #scope: NonceScope;
  readonly #maxNonces: number | undefined;
  /** Used and canceled nonces, each with the block of its log (-1: found spent by a direct read, block unknown), oldest first. */
  readonly #nonces = new Map<string, number>();
  /** The stored nonces forgotten from memory (over `maxNonces`): a nonce it may hold is asked of the store. */
  #evicted: SpentFilter | undefined;
  /** Nonces the live follower found, not yet stored; and the block they are stored through. */
  #unstored: StoredNonce[] = [];
  #storedThrough = -1n;
  #lastStoredAt = 0;

  constructor(store: NonceStore, scope: NonceScope, maxNonces: number | undefined) {
    this.#store = store;
    this.#scope = scope;
    this.#maxNonces = maxNonces;
  }

  /** Spent nonces held in memory. */
  get size(): number {
    return this.#nonces.size;
  }

  /** Spent nonces forgotten from memory over `maxNonces`. */
  get evictedCount(): number {
    return this.#evicted?.count ?? 0;
  }

  /** The block the live record is stored through. */
  get storedThrough(): bigint {
    return this.#storedThrough;
  }

  /** Whether the nonce of `key` is held spent. */
  has(key: string): boolean {
    return this.#nonces.has(key);
  }

  /** Whether the nonce of `key`, not held, may be among the forgotten ones (then the store says). */
  mayBeForgotten(key: string): boolean {
    return this.#evicted?.mayHold(key) ?? false;
  }

  /** Records a nonce found spent on chain by a direct read (the backfill had not reached it). */
  rememberUsed(authorizer: Address, nonce: Hex): void {
    const key = nonceKey(authorizer, nonce);
    if (!this.#nonces.has(key)) this.remember(key, -1);
  }

  /** A nonce the live follower found spent in block `blockNumber`: held, and kept until stored. Returns its key. */
  found(authorizer: Address, nonce: Hex, blockNumber: bigint): string {
    const key = nonceKey(authorizer, nonce);
    this.remember(key, Number(blockNumber));
    this.#unstored.push({ authorizer, nonce, blockNumber });
    return key;
  }

  /**
   * Where a spent nonce was spent, at `head`: held in memory, or (forgotten over `maxNonces`) in the store; "unspent"
   * when neither has it (and the index's memory is complete); undefined when the store cannot be asked.
   */
  async spent(authorizer: Address, nonce: Hex, head: bigint): Promise<{ block: number } | "unspent" | undefined> {
    const key = nonceKey(authorizer, nonce);
    const held = this.#nonces.get(key);
    if (held !== undefined) return { block: held };
    if (!this.#evicted?.mayHold(key)) return "unspent";
    let stored: StoredNonce | undefined;
    try {
      stored = await this.#store.indexedNonce(this.#scope, authorizer, nonce);
    } catch {
      return undefined;
    }
    // A nonce stored beyond the index's head (another instance ahead, or a history the index went back over) is not spent here yet.
    return stored && stored.blockNumber <= head ? { block: Number(stored.blockNumber) } : "unspent";
  }

  /** The store's record of a spent nonce's log. */
  stored(authorizer: Address, nonce: Hex): Promise<StoredNonce | undefined> {
    return this.#store.indexedNonce(this.#scope, authorizer, nonce);
  }

  /** Holds a spent nonce; over `maxNonces`, forgets the oldest ones the store already holds (see {@link SpentFilter}). */
  remember(key: string, block: number): void {
    this.#nonces.set(key, block);
    const max = this.#maxNonces ?? Infinity;
    if (this.#nonces.size <= max) return;
    // The filter's size: 64 bits per nonce held (a tenth of what each costs held), 4 bits set per nonce: about 1 in
    // 100,000 says "maybe" falsely with as many forgotten as held, 1 in 20 with ten times as many.
    this.#evicted ??= new SpentFilter(64 * max, 4);
    // Down to a sixteenth below the bound at once: one pass over the oldest entries per many nonces, not one each.
    const target = max - Math.max(1, Math.floor(max / 16));
    const stored = Number(this.#storedThrough);
    for (const [oldest, at] of this.#nonces) {
      if (this.#nonces.size <= target) break;
      // A nonce the live follower found and has not stored yet stays until it is stored.
      if (at > stored) break;
      this.#nonces.delete(oldest);
      this.#evicted.add(oldest);
    }
  }

  /** The live follower starts after `blockNumber`: everything up to it is the backfill's to store. */
  begin(blockNumber: bigint): void {
    this.#storedThrough = blockNumber;
  }

  /** A block the index went back over: the nonces it spent (`keys`) are no longer held spent. */
  forgetBlock(keys: readonly string[], blockNumber: bigint): void {
    for (const key of keys) if (this.#nonces.get(key) === Number(blockNumber)) this.#nonces.delete(key);
  }

  /** The index went back to `common`: the live nonces found after it are not stored. */
  dropUnstoredAfter(common: bigint): void {
    this.#unstored = this.#unstored.filter((nonce) => nonce.blockNumber <= common);
  }

  /** The stored record reaches no further than `blockNumber` (a history replaced after it). */
  lowerStoredThrough(blockNumber: bigint): void {
    if (blockNumber < this.#storedThrough) this.#storedThrough = blockNumber;
  }

  /** Forgets everything held (the index starts over); the stored record's reach is set again by {@link begin}. */
  clear(): void {
    this.#nonces.clear();
    this.#evicted = undefined;
    this.#unstored = [];
  }

  /**
   * Stores the live nonces and the progress through `head` (with its hash, a checkpoint of the chain's history); undefined
   * when there is nothing to store yet. `current`: whether the index is still on the history the call began on (else
   * the outcome is dropped). Rejects, keeping the nonces for the next call, when the store fails.
   */
  store(head: BlockRef, current: () => boolean): Promise<void> | undefined {
    const through = head.number;
    if (through <= this.#storedThrough && this.#unstored.length === 0) return undefined;
    if (this.#unstored.length === 0 && performance.now() - this.#lastStoredAt < PERSIST_EVERY_MS) return undefined;
    const nonces = this.#unstored;
    this.#unstored = [];
    return this.#store.recordIndexedNonces(this.#scope, nonces, { fromBlock: this.#storedThrough + 1n, throughBlock: through, throughHash: head.hash }).then(
      () => {
        if (current()) this.#storedThrough = through;
        this.#lastStoredAt = performance.now();
      },
      (error: unknown) => {
        if (current()) this.#unstored = nonces.concat(this.#unstored);
        throw error;
      },
    );
  }
}

/** A nonce's key in the index: the authorizer's 20 bytes and the nonce's 32, as one binary string (52 characters). */
export function nonceKey(authorizer: Address, nonce: Hex): string {
  // latin1 maps each byte to the character of its code, as String.fromCharCode of the bytes does (the
  // general form, kept for anything but a 20-byte address and a 32-byte nonce).
  const bytes = Buffer.from(`${authorizer.slice(2)}${nonce.slice(2)}`, "hex");
  if (bytes.length !== 52 || authorizer.length !== 42 || nonce.length !== 66) return String.fromCharCode(...hexToBytes(authorizer), ...hexToBytes(nonce));
  return bytes.toString("latin1");
}
