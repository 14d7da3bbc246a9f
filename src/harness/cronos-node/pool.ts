import type { Address, Hex } from "viem";
import { MEMPOOL_CACHE_SIZE } from "./texts.js";

/** A transaction the node admitted to its pool: what its pending views and its replacement rule need. */
export interface Admitted {
  hash: Hex;
  /** Lower-case. */
  sender: Address;
  nonce: bigint;
  /** Effective tip / 10^6 at admission (the priority-nonce mempool keeps the priority it was inserted with). */
  priority: bigint;
  /** The signed bytes: sent again if a replacement that dropped it from EDR's pool is refused by EDR. */
  raw: Hex;
}

/**
 * The node's record of its pool, in arrival order (CometBFT's list: what `UnconfirmedTxs` pages through).
 * EDR holds the transactions themselves and mines them; a record whose nonce the chain has passed was mined
 * and is pruned when met. Bounded by the caller (the pool's size, `MEMPOOL_SIZE`).
 */
export class PoolRecord {
  readonly #byHash = new Map<Hex, Admitted>();
  readonly #bySlot = new Map<string, Admitted>();

  get size(): number {
    return this.#byHash.size;
  }

  /** Records `tx` last in arrival order (a replacement too: it arrives now). */
  add(tx: Admitted): void {
    this.#byHash.set(tx.hash, tx);
    this.#bySlot.set(slot(tx.sender, tx.nonce), tx);
  }

  /** Forgets `hash`; true when it was recorded. */
  remove(hash: Hex): boolean {
    const tx = this.#byHash.get(hash);
    if (!tx) return false;
    this.#byHash.delete(hash);
    if (this.#bySlot.get(slot(tx.sender, tx.nonce)) === tx) this.#bySlot.delete(slot(tx.sender, tx.nonce));
    return true;
  }

  /** The transaction recorded at `sender`'s `nonce`. */
  at(sender: Address, nonce: bigint): Admitted | undefined {
    return this.#bySlot.get(slot(sender, nonce));
  }

  has(hash: Hex): boolean {
    return this.#byHash.has(hash);
  }

  /** Every record, in arrival order (a copy: the caller may remove while it walks). */
  list(): Admitted[] {
    return [...this.#byHash.values()];
  }

  clear(): void {
    this.#byHash.clear();
    this.#bySlot.clear();
  }

  /**
   * Prunes the mined records (nonce under the sender's committed nonce, read once per sender) while walking
   * in arrival order, and returns the first `limit` still pending (every one when `limit` is absent).
   */
  async pending(committed: (sender: Address) => Promise<bigint>, limit = Infinity): Promise<Admitted[]> {
    const nonces = new Map<Address, bigint>();
    const found: Admitted[] = [];
    for (const tx of this.list()) {
      if (found.length >= limit) break;
      let next = nonces.get(tx.sender);
      if (next === undefined) {
        next = await committed(tx.sender);
        nonces.set(tx.sender, next);
      }
      if (tx.nonce < next) this.remove(tx.hash);
      else found.push(tx);
    }
    return found;
  }
}

function slot(sender: Address, nonce: bigint): string {
  return `${sender}:${nonce}`;
}

/**
 * CometBFT's cache of transaction hashes (least recently seen dropped first, {@link MEMPOOL_CACHE_SIZE}):
 * a hash in it is answered `tx already in mempool`, mined or not. A transaction the node refused is not kept.
 */
export class SeenCache {
  readonly #hashes = new Set<Hex>();
  readonly #limit: number;

  constructor(limit = MEMPOOL_CACHE_SIZE) {
    this.#limit = limit;
  }

  has(hash: Hex): boolean {
    return this.#hashes.has(hash);
  }

  add(hash: Hex): void {
    this.#hashes.delete(hash);
    this.#hashes.add(hash);
    if (this.#hashes.size > this.#limit) this.#hashes.delete(this.#hashes.values().next().value as Hex);
  }

  clear(): void {
    this.#hashes.clear();
  }
}
