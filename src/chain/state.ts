import type { Address, Hex, PublicClient } from "viem";
import { erc1271Abi, ERC1271_MAGIC_VALUE, tokenAbi } from "./token-abi.js";

/** The chain's latest block: its number is the key of every cached read, its timestamp the clock. */
export interface Head {
  number: bigint;
  /** Unix seconds. */
  timestamp: bigint;
}

/**
 * Read-only chain state for verify, cached per block. Concurrent callers share one in-flight
 * `latest` block request; reads are pinned to that block and cached until the head moves, so a
 * burst of verifies in one block costs one head read plus one `authorizationState` read each
 * (batched by the transport). A used nonce stays used, so that answer is cached for good.
 */
export class ChainState {
  readonly #client: PublicClient;
  readonly #token: Address;
  #headRequest: Promise<Head> | undefined;
  #lastHead: { at: number; head: Promise<Head> } | undefined;
  #cacheBlock = -1n;
  #code = new Map<Address, Promise<boolean>>();
  #balance = new Map<Address, Promise<bigint>>();
  #unused = new Map<string, Promise<boolean>>();
  // Bounded: forgetting an old entry only costs one chain read if that authorization comes back.
  readonly #used = new Set<string>();
  static readonly USED_CACHE_LIMIT = 100_000;

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
        .then((block) => ({ number: block.number, timestamp: block.timestamp }));
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
    if (head.number === this.#cacheBlock) return;
    if (head.number < this.#cacheBlock) return; // an older head from a slow request: keep the newer cache
    this.#cacheBlock = head.number;
    this.#code = new Map();
    this.#balance = new Map();
    this.#unused = new Map();
  }

  #cached<K, V>(head: Head, map: () => Map<K, Promise<V>>, key: K, read: () => Promise<V>): Promise<V> {
    this.#at(head);
    if (head.number !== this.#cacheBlock) return read();
    const cache = map();
    let value = cache.get(key);
    if (!value) {
      value = read();
      cache.set(key, value);
      value.catch(() => cache.delete(key));
    }
    return value;
  }

  /** Whether `address` holds code (a contract wallet, or an EIP-7702 account) at `head`. */
  hasCode(address: Address, head: Head): Promise<boolean> {
    return this.#cached(head, () => this.#code, address, async () => {
      const code = await this.#client.getCode({ address, blockNumber: head.number });
      return code !== undefined && code !== "0x";
    });
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
    if (this.#used.has(key)) return true;
    const used = await this.#cached(head, () => this.#unused, key, () =>
      this.#client.readContract({
        address: this.#token,
        abi: tokenAbi,
        functionName: "authorizationState",
        args: [authorizer, nonce],
        blockNumber: head.number,
      }),
    );
    if (used) this.#rememberUsed(key);
    return used;
  }

  /** Records an authorization this process saw used (its settle transaction was mined). */
  markUsed(authorizer: Address, nonce: Hex): void {
    this.#rememberUsed(`${authorizer.toLowerCase()}:${nonce.toLowerCase()}`);
  }

  #rememberUsed(key: string): void {
    this.#used.add(key);
    if (this.#used.size > ChainState.USED_CACHE_LIMIT) {
      // A Set iterates in insertion order: drop the oldest.
      this.#used.delete(this.#used.values().next().value!);
    }
  }

  /** ERC-1271: whether the wallet at `wallet` accepts `signature` over `digest`, as the token asks it. */
  async isValidErc1271(wallet: Address, digest: Hex, signature: Hex, head: Head): Promise<boolean> {
    try {
      const result = await this.#client.readContract({
        address: wallet,
        abi: erc1271Abi,
        functionName: "isValidSignature",
        args: [digest, signature],
        blockNumber: head.number,
      });
      return result.toLowerCase() === ERC1271_MAGIC_VALUE;
    } catch (error) {
      // A revert means "not valid" to the token too; a transport failure is a fault.
      if (isRevert(error)) return false;
      throw error;
    }
  }
}

/** Whether a viem error is an on-chain revert (as opposed to a transport or RPC fault). */
export function isRevert(error: unknown): boolean {
  let found = false;
  if (error && typeof error === "object" && "walk" in error && typeof error.walk === "function") {
    error.walk((e: unknown) => {
      const name = (e as { name?: string }).name;
      if (name === "ContractFunctionRevertedError" || name === "ExecutionRevertedError" || name === "ContractFunctionZeroDataError") {
        found = true;
      }
      return false;
    });
  }
  return found;
}
