/**
 * A Bloom filter over the keys of spent nonces the index no longer holds in memory: "certainly not among them" (no
 * ledger read) or "maybe" (ask the ledger). Its size is fixed at construction, so it bounds memory whatever comes in:
 * the more keys it holds beyond what it was sized for, the more often it says "maybe" (each a ledger read), never
 * "not among them" for a key it holds. The hashes are keyed with a random seed per process: nonces are chosen by the
 * payers, and must not be chosen to collide.
 */
export class SpentFilter {
  readonly #bits: Uint32Array;
  readonly #size: number;
  readonly #hashes: number;
  readonly #seeds: [number, number];
  #count = 0;

  /** `bits`: the filter's size (rounded up to 32); `hashes`: bits set per key. */
  constructor(bits: number, hashes: number) {
    this.#bits = new Uint32Array(Math.max(1, Math.ceil(bits / 32)));
    this.#size = this.#bits.length * 32;
    this.#hashes = hashes;
    const seeds = crypto.getRandomValues(new Uint32Array(2));
    this.#seeds = [seeds[0]!, seeds[1]! | 1];
  }

  /** Keys added so far. */
  get count(): number {
    return this.#count;
  }

  /** Bytes it holds. */
  get bytes(): number {
    return this.#bits.byteLength;
  }

  add(key: string): void {
    const [h1, h2] = this.#hash(key);
    for (let i = 0; i < this.#hashes; i++) {
      const bit = (h1 + Math.imul(i, h2)) >>> 0;
      const at = bit % this.#size;
      this.#bits[at >>> 5]! |= 1 << (at & 31);
    }
    this.#count++;
  }

  /** False: `key` was never added. True: it may have been. */
  mayHold(key: string): boolean {
    if (this.#count === 0) return false;
    const [h1, h2] = this.#hash(key);
    for (let i = 0; i < this.#hashes; i++) {
      const at = ((h1 + Math.imul(i, h2)) >>> 0) % this.#size;
      if ((this.#bits[at >>> 5]! & (1 << (at & 31))) === 0) return false;
    }
    return true;
  }

  /** Two seeded FNV-1a hashes of the key's characters (double hashing gives the rest). */
  #hash(key: string): [number, number] {
    let a = 0x811c9dc5 ^ this.#seeds[0];
    let b = 0x811c9dc5 ^ this.#seeds[1];
    for (let i = 0; i < key.length; i++) {
      const c = key.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x01000193);
    }
    return [a >>> 0, (b | 1) >>> 0];
  }
}
