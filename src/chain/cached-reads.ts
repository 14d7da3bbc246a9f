import { encodeFunctionData, keccak256, type Address, type Hex, type PublicClient } from "viem";
import { isOutOfGas, isRevert } from "./revert.js";
import { erc1271Abi, ERC1271_MAGIC_VALUE, tokenAbi } from "./token-abi.js";

const MAGIC_WORD = ERC1271_MAGIC_VALUE.padEnd(66, "0");

/** The chain's latest block: its number (and hash) key every cached read, its timestamp is the clock. */
export interface Head {
  number: bigint;
  /** Unix seconds. */
  timestamp: bigint;
  /** The block's hash, when known: a block replaced at the same height (a local chain reverted) is then read afresh. */
  hash?: Hex;
}

/**
 * Read-only chain state for verify, cached per block. Concurrent callers share one in-flight
 * `latest` block request; reads are pinned to that block and cached until the head moves, so a
 * burst of verifies in one block costs one head read plus one `authorizationState` read each
 * (batched by the transport). A used nonce stays used in one history, so that answer is cached for as
 * long as the block it was read at is still the chain's (one header read per new head checks it): a
 * local chain reverted to a snapshot, or restarted, empties the cache instead of answering from it.
 */
export class ChainState {
  readonly #client: PublicClient;
  readonly #token: Address;
  #headRequest: Promise<Head> | undefined;
  #lastHead: { at: number; head: Promise<Head> } | undefined;
  #cacheBlock = -1n;
  #cacheHash: Hex | undefined;
  #code = new Map<Address, Promise<Hex | undefined>>();
  /** The code hashes of `#code` that have answered (for {@link knownCodeHash}). */
  #codeKnown = new Map<Address, Hex | undefined>();
  #balance = new Map<Address, Promise<bigint>>();
  #unused = new Map<string, Promise<boolean>>();
  // Bounded: forgetting an old entry only costs one chain read if that authorization comes back.
  readonly #used = new Set<string>();
  static readonly USED_CACHE_LIMIT = 100_000;
  /** A block of the history the used authorizations were read in: they are answered at a head descending from it only. */
  #usedAnchor: { number: bigint; hash: Hex } | undefined;
  /** Whether the anchor is still the chain's, as asked for one head (concurrent callers at that head share it). */
  #vouching: { hash: Hex; holds: Promise<boolean> } | undefined;

  constructor(client: PublicClient, token: Address) {
    this.#client = client;
    this.#token = token;
  }

  /**
   * The latest block. With `maxAgeMs` 0: from a request in flight or a new one. Otherwise a head read
   * at most `maxAgeMs` ago may be reused, which spares the node one request per verify under load.
   */
  head(maxAgeMs = 0): Promise<Head> {
    if (maxAgeMs > 0 && this.#lastHead && performance.now() - this.#lastHead.at <= maxAgeMs) return this.#lastHead.head;
    if (!this.#headRequest) {
      const at = performance.now();
      const request = this.#client
        .getBlock({ blockTag: "latest" })
        .then((block) => ({ number: block.number, timestamp: block.timestamp, hash: block.hash }));
      this.#headRequest = request;
      const clear = () => {
        if (this.#headRequest === request) this.#headRequest = undefined;
      };
      request.then(() => {
        this.#lastHead = { at, head: request };
        clear();
      }, clear);
    }
    return this.#headRequest;
  }

  #at(head: Head): void {
    if (head.number < this.#cacheBlock) return; // an older head from a slow request: keep the newer cache
    if (this.#isCacheBlock(head)) return;
    this.#cacheBlock = head.number;
    this.#cacheHash = head.hash;
    this.#code = new Map();
    this.#codeKnown = new Map();
    this.#balance = new Map();
    this.#unused = new Map();
  }

  /** Whether `head` is the block the caches hold: the same block, or a head that does not say which (shared with the block at its height). */
  #isCacheBlock(head: Head): boolean {
    return head.number === this.#cacheBlock && (head.hash === undefined || this.#cacheHash === undefined || head.hash === this.#cacheHash);
  }

  #cached<K, V>(head: Head, map: () => Map<K, Promise<V>>, key: K, read: () => Promise<V>): Promise<V> {
    this.#at(head);
    if (!this.#isCacheBlock(head)) return read();
    const cache = map();
    let value = cache.get(key);
    if (!value) {
      value = read();
      cache.set(key, value);
      value.catch(() => cache.delete(key));
    }
    return value;
  }

  /**
   * The keccak-256 hash of the code at `address` (a contract wallet, or an EIP-7702 account), or
   * undefined when it holds none. Pinned to `head` (and cached for its block) when given, else read
   * at the latest block: one request, for an answer that needs nothing else from the chain.
   */
  codeHash(address: Address, head?: Head): Promise<Hex | undefined> {
    const read = async () => {
      const code = await this.#client.getCode(head ? { address, blockNumber: head.number } : { address });
      const hash = code === undefined || code === "0x" ? undefined : keccak256(code);
      // Known from now on for this block (unless the cache moved on to a later one meanwhile).
      if (head && this.#isCacheBlock(head)) this.#codeKnown.set(address, hash);
      return hash;
    };
    return head ? this.#cached(head, () => this.#code, address, read) : read();
  }

  /**
   * The code hash of `address` at `head` when a {@link codeHash} read at that block has answered already
   * (undefined: no code); `null` when not known without a read.
   */
  knownCodeHash(address: Address, head: Head): Hex | undefined | null {
    if (!this.#isCacheBlock(head) || !this.#codeKnown.has(address)) return null;
    return this.#codeKnown.get(address);
  }

  /** The token balance of `address` at `head`. */
  balanceOf(address: Address, head: Head): Promise<bigint> {
    return this.#cached(head, () => this.#balance, address, () =>
      this.#client.readContract({ address: this.#token, abi: tokenAbi, functionName: "balanceOf", args: [address], blockNumber: head.number }),
    );
  }

  /** Whether the authorization `(authorizer, nonce)` is used or canceled at `head`. */
  async authorizationUsed(authorizer: Address, nonce: Hex, head: Head): Promise<boolean> {
    const key = `${authorizer.toLowerCase()}:${nonce.toLowerCase()}`;
    const holds = await this.#usedHoldAt(head);
    if (holds && this.#used.has(key)) return true;
    const used = await this.#cached(head, () => this.#unused, key, () =>
      this.#client.readContract({
        address: this.#token,
        abi: tokenAbi,
        functionName: "authorizationState",
        args: [authorizer, nonce],
        blockNumber: head.number,
      }),
    );
    if (used && holds) this.#rememberUsed(key);
    return used;
  }

  /**
   * Whether the used authorizations may be answered at `head`: its block descends from the one they were read in.
   * Moves that block up to `head` when it does; empties the set when the chain replaced that block (a revert, a
   * restart). A head below it (a node behind, or a revert) is not answered from the set, nor added to it.
   */
  #usedHoldAt(head: Head): Promise<boolean> | boolean {
    const hash = head.hash;
    if (hash === undefined) return false;
    const anchor = this.#usedAnchor;
    if (!anchor) {
      this.#usedAnchor = { number: head.number, hash };
      return true;
    }
    if (anchor.hash === hash) return true;
    if (head.number < anchor.number) return false;
    if (this.#vouching?.hash !== hash) {
      const holds = this.#client.getBlock({ blockNumber: anchor.number }).then(
        (block) => {
          if (this.#usedAnchor !== anchor) return this.#usedAnchor?.hash === hash;
          if (block.hash === anchor.hash) {
            this.#usedAnchor = { number: head.number, hash };
            return true;
          }
          // The chain replaced the block the set was read in: none of it can be vouched for now.
          this.#used.clear();
          this.#usedAnchor = { number: head.number, hash };
          return true;
        },
        () => false,
      );
      this.#vouching = { hash, holds };
    }
    return this.#vouching.holds;
  }

  /**
   * For settle: the latest head and the payer's code, nonce state and balance, all asked at once (one
   * batch: one round trip to a remote RPC, where pinning the reads to the head's number would need the
   * head first). The reads ask for `latest`, so a block mined between the batch's items leaves them at
   * most one block apart, never older than the head they come with; settle's simulation before signing
   * is what a payment then rests on. Of what it reads, the head replaces verify's cached one and a used
   * authorization is remembered; the rest is not cached.
   */
  async latestPayerState(authorizer: Address, nonce: Hex): Promise<{ head: Head; codeHash: Hex | undefined; used: boolean; balance: bigint }> {
    const key = `${authorizer.toLowerCase()}:${nonce.toLowerCase()}`;
    // Asked of the chain even when remembered: whether the memory holds at this head is known only with it.
    const [block, code, used, balance] = await Promise.all([
      this.#client.getBlock({ blockTag: "latest" }),
      this.#client.getCode({ address: authorizer }),
      this.#client.readContract({ address: this.#token, abi: tokenAbi, functionName: "authorizationState", args: [authorizer, nonce] }),
      this.#client.readContract({ address: this.#token, abi: tokenAbi, functionName: "balanceOf", args: [authorizer] }),
    ]);
    const head = { number: block.number, timestamp: block.timestamp, hash: block.hash };
    if (used && (await this.#usedHoldAt(head))) this.#rememberUsed(key);
    // Verify's cached head moves on to it (unless verify already reads at a later block).
    if (head.number >= this.#cacheBlock) this.#lastHead = { at: performance.now(), head: Promise.resolve(head) };
    return { head, codeHash: code === undefined || code === "0x" ? undefined : keccak256(code), used, balance };
  }

  /**
   * Told of an authorization this process saw used (its settle transaction was mined). Nothing is remembered from
   * it: without the hash of the block that mined it, it could not be forgotten when that block is reverted away (a
   * local chain's snapshot); the next verify reads it (one read, then remembered with the block it was read at).
   */
  markUsed(_authorizer: Address, _nonce: Hex): void {}

  #rememberUsed(key: string): void {
    this.#used.add(key);
    if (this.#used.size > ChainState.USED_CACHE_LIMIT) {
      // A Set iterates in insertion order: drop the oldest.
      this.#used.delete(this.#used.values().next().value!);
    }
  }

  /**
   * ERC-1271: whether the wallet at `wallet` accepts `signature` over `digest`, as the token asks it.
   * The `eth_call` carries `gasLimit`: a wallet that needs more is refused like one that says no, so a
   * wallet's code cannot make verify (or the node) burn gas at will.
   */
  async isValidErc1271(wallet: Address, digest: Hex, signature: Hex, head: Head, gasLimit: bigint): Promise<boolean> {
    try {
      const { data } = await this.#client.call({
        to: wallet,
        data: encodeFunctionData({ abi: erc1271Abi, functionName: "isValidSignature", args: [digest, signature] }),
        blockNumber: head.number,
        gas: gasLimit,
      });
      // The token compares the whole first word of the answer with the magic value (bytes4, left-aligned).
      return data !== undefined && data.slice(0, 66).toLowerCase() === MAGIC_WORD;
    } catch (error) {
      // A revert or running out of the budget means "not valid"; a transport failure is a fault.
      if (isRevert(error) || isOutOfGas(error)) return false;
      throw error;
    }
  }
}
