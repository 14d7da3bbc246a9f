import type { Address, Hex } from "viem";
import { BlockReader } from "./block-reader.js";
import { PayerBalances } from "./payer-balances.js";
import { nonceKey, SpentNonces } from "./spent-nonces.js";
import { IndexBackfill } from "./token-index-backfill.js";
import { IndexFollower } from "./token-index-follower.js";
import { HeadWatch } from "./token-index-head.js";
import type { IndexedPayer, IndexStatus, SpentAt, TokenIndexParameters } from "./token-index-types.js";

export type { IndexedPayer, IndexLogger, IndexObserver, IndexStatus, SpentAt, TokenIndexParameters } from "./token-index-types.js";

/**
 * The token's state, indexed from its logs, for verify: balances of the payers seen, the used and
 * canceled authorization nonces, whether the token is paused, and the block all of it is true at.
 *
 * It follows the chain one block at a time (block headers linked by parent hash; the token's logs of each
 * block by its hash, each block proven by its own content, see {@link BlockReader}), asking for the head every
 * `pollingIntervalMs` while verifies come in, or told by `eth_subscribe`. A payer seen for the first time is read
 * once at the index's block and kept current from its Transfer logs. Nonces used before the index started are
 * backfilled from the start block into the store, shared by instances, each range counted only when the node
 * proved it holds its blocks ({@link backfillNonces}); until the backfill is done, a nonce the index does not
 * hold is asked of the chain.
 *
 * It follows a changed history too (a local chain reverted to a snapshot, or restarted): when the chain's head
 * is below the index's, or new blocks do not follow the index's head, it walks back by block hash over the last
 * {@link TRAIL_BLOCKS} blocks to the newest one the chain still has, forgets what came after (the nonces those
 * blocks spent, every balance), and follows the chain from there; deeper than that, it starts over. A replaced
 * block is reported to `history` (the ledger's rows are bound to the chain again) before anything more is stored.
 *
 * It answers only for a state it can vouch for: {@link payer} gives undefined (verify then reads the
 * chain) while the chain has blocks the index has not read, or when its last confirmation of the head
 * is older than asked and a fresh one fails. It is advisory: settle checks the chain before it signs.
 *
 * The parts: {@link SpentNonces} (the spent nonces within a memory bound), {@link PayerBalances}, {@link IndexBackfill},
 * {@link IndexFollower} (the blocks applied, rewinds, rebuilds) and {@link HeadWatch} (the head's freshness, the loop).
 */
export class TokenIndex {
  readonly #stop = new AbortController();
  readonly #nonces: SpentNonces;
  readonly #balances: PayerBalances;
  readonly #backfill: IndexBackfill;
  readonly #follower: IndexFollower;
  readonly #watch: HeadWatch;
  #started = false;

  constructor(parameters: TokenIndexParameters) {
    const reader = new BlockReader(parameters.client, parameters.token);
    const scope = { chainId: parameters.chainId, token: parameters.token };
    const stop = this.#stop.signal;
    this.#nonces = new SpentNonces(parameters.store, scope, parameters.maxNonces);
    this.#balances = new PayerBalances(parameters.client, parameters.token, () => this.#follower.head!.number);
    this.#backfill = new IndexBackfill(parameters, scope, this.#nonces, stop);
    this.#follower = new IndexFollower(parameters, reader, stop, { nonces: this.#nonces, balances: this.#balances, backfill: this.#backfill });
    this.#watch = new HeadWatch(parameters, reader, stop, this.#follower);
  }

  /** Starts following the chain and the backfill, in the background; returns at once. */
  start(): void {
    if (this.#started) return;
    this.#started = true;
    void this.#watch.begin();
  }

  /** Stops following; answers nothing afterwards. */
  async stop(): Promise<void> {
    this.#stop.abort();
    this.#backfill.abort();
    this.#watch.stop();
    await Promise.allSettled([this.#watch.syncing, this.#follower.storing]);
  }

  /**
   * The payer's balance and whether its `nonce` is spent, true at the index's block, when the index can vouch
   * for a head confirmed within `maxAgeMs` (0: confirmed after this call began); undefined when it cannot.
   */
  async payer(from: Address, nonce: Hex, maxAgeMs: number): Promise<IndexedPayer | undefined> {
    this.#watch.asked(maxAgeMs);
    if (!(await this.#watch.current(maxAgeMs))) return undefined;
    const head = this.#follower.head!;
    const generation = this.#follower.generation;
    const balance = await this.#balances.balance(from, head.number);
    // The index went back meanwhile: what it read belongs to a history the chain no longer has.
    if (generation !== this.#follower.generation) return undefined;
    // Asked after the balance: the index may have moved on meanwhile, and a spent nonce stays spent.
    const key = nonceKey(from, nonce);
    let used: boolean | undefined = this.#nonces.has(key) ? true : this.#backfill.complete ? false : undefined;
    // Not held, but perhaps forgotten over the memory bound: the store says.
    if (used === false && this.#nonces.mayBeForgotten(key)) {
      const found = await this.#nonces.spent(from, nonce, head.number);
      if (found === undefined || generation !== this.#follower.generation) return undefined;
      used = found !== "unspent";
    }
    return { head: { number: head.number, timestamp: head.timestamp, hash: head.hash }, balance, used };
  }

  /**
   * {@link payer}'s answer when it needs no I/O: the head confirmed within `maxAgeMs`, the payer's balance
   * held and the nonce's state known (the backfill done, or the nonce seen spent). Otherwise undefined, and
   * {@link payer} may still answer (it reads what is missing). Verify asks this first: no promise, no wait.
   */
  payerInMemory(from: Address, nonce: Hex, maxAgeMs: number): (IndexedPayer & { used: boolean }) | undefined {
    this.#watch.asked(maxAgeMs);
    const head = this.#watch.confirmedHead(maxAgeMs);
    if (!head) return undefined;
    const balance = this.#balances.held(from);
    if (balance === undefined) return undefined;
    const key = nonceKey(from, nonce);
    const used = this.#nonces.has(key) ? true : this.#backfill.complete ? false : undefined;
    // Unknown, or perhaps forgotten over the memory bound: {@link payer} asks the store.
    if (used === undefined || (!used && this.#nonces.mayBeForgotten(key))) return undefined;
    return { head: { number: head.number, timestamp: head.timestamp, hash: head.hash }, balance, used };
  }

  /** Records a nonce found spent on chain by a direct read (the backfill had not reached it). */
  rememberUsed(authorizer: Address, nonce: Hex): void {
    this.#nonces.rememberUsed(authorizer, nonce);
  }

  /**
   * Whether the authorization `(authorizer, nonce)` is spent, and the block of the token's `AuthorizationUsed` or
   * `AuthorizationCanceled` log that spent it, true at a head confirmed within `maxAgeMs` (0: after this call began).
   * Undefined whenever the index cannot vouch for it: its backfill is unfinished, it is behind the chain, or it
   * knows the nonce spent without knowing where.
   */
  async spentAt(authorizer: Address, nonce: Hex, maxAgeMs = 0): Promise<SpentAt | undefined> {
    if (!this.#backfill.complete || !(await this.#watch.current(maxAgeMs)) || !this.#backfill.complete) return undefined;
    const head = this.#follower.head!.number;
    const generation = this.#follower.generation;
    const found = await this.#nonces.spent(authorizer, nonce, head);
    if (found === undefined || generation !== this.#follower.generation) return undefined;
    if (found === "unspent") return { spent: false };
    if (found.block >= 0) return { spent: true, blockNumber: BigInt(found.block) };
    // Known spent by a direct read, its block unknown: the store's record of its log, if any.
    const stored = await this.#nonces.stored(authorizer, nonce).catch(() => undefined);
    if (generation !== this.#follower.generation) return undefined;
    return stored && stored.blockNumber <= head ? { spent: true, blockNumber: stored.blockNumber } : undefined;
  }

  /** The index as `/healthcheck` and `/metrics` show it. */
  status(): IndexStatus {
    const paused = this.#follower.paused;
    return {
      ...this.#watch.status(),
      ...(paused !== undefined ? { paused } : {}),
      payers: this.#balances.size,
      nonces: this.#nonces.size,
      evictedNonces: this.#nonces.evictedCount,
      backfill: this.#backfill.status,
    };
  }
}
