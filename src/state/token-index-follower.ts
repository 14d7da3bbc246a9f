// The token state index's follower: the blocks applied one at a time, going back over a changed history, starting over.
import type { Hex } from "viem";
import { tokenAbi } from "../chain/token-abi.js";
import { InconsistentChainError, type BlockReader, type IndexedBlock } from "./block-reader.js";
import type { BlockRef } from "./nonce-store.js";
import type { IndexedTransfer, PayerBalances } from "./payer-balances.js";
import type { SpentNonces } from "./spent-nonces.js";
import type { IndexBackfill } from "./token-index-backfill.js";
import type { TokenIndexParameters } from "./token-index-types.js";

/** Blocks applied per round of catch-up (headers in one batch). */
const WINDOW = 64n;
/** Hashes (and spent nonces) of this many recent blocks are kept: how far back a replaced history is walked. */
export const TRAIL_BLOCKS = 1_024;

/** A block the index applied: where it stands, the nonces it spent (their keys), whether it paused or unpaused the token. */
interface TrailBlock {
  number: bigint;
  hash: Hex;
  nonces: string[];
  pauses: boolean;
}

/** The parts of the index the follower changes as blocks come and go. */
export interface FollowedState {
  nonces: SpentNonces;
  balances: PayerBalances;
  backfill: IndexBackfill;
}

/**
 * Where the index stands on the chain and how it gets there: the head it is true at, the blocks applied one at a time
 * (their balances, spent nonces and pauses), and the last {@link TRAIL_BLOCKS} blocks' hashes. When the chain's head is
 * below the index's, or new blocks do not follow the index's head, it walks back by block hash over the trail to the
 * newest block the chain still has, forgets what came after, and follows the chain from there; deeper than that, it
 * starts over. A replaced block is reported to `history` (the ledger's rows are bound to the chain again) before
 * anything more is stored.
 */
export class IndexFollower {
  readonly #p: TokenIndexParameters;
  readonly #reader: BlockReader;
  readonly #stop: AbortSignal;
  readonly #nonces: SpentNonces;
  readonly #balances: PayerBalances;
  readonly #backfill: IndexBackfill;
  #head: IndexedBlock | undefined;
  /** The chain's head as last seen (a poll, a notification); lowered when the chain went back. */
  tip = -1n;
  #paused: boolean | undefined;
  /** The last {@link TRAIL_BLOCKS} blocks applied, oldest first, consecutive, ending at the head. */
  #trail: TrailBlock[] = [];
  /**
   * Hashes of stored blocks the index went back over without proof they were replaced (the chain's head was below
   * them: a node behind, or a revert): another block at one of these heights proves the stored history replaced.
   */
  readonly #wentBackOver = new Map<bigint, Hex>();
  /** A replaced history not yet reported to `history` (null: deeper than the trail): nothing is stored until it is. */
  #divergence: BlockRef | null | undefined;
  /** Grows at each rewind or rebuild: reads begun before (balances, stored nonces, the backfill) are dropped. */
  #generation = 0;
  /** Starting over (a history changed deeper than the trail): answers nothing until it follows the chain again. */
  #rebuilding = false;
  #storing: Promise<void> | undefined;

  constructor(parameters: TokenIndexParameters, reader: BlockReader, stop: AbortSignal, state: FollowedState) {
    this.#p = parameters;
    this.#reader = reader;
    this.#stop = stop;
    this.#nonces = state.nonces;
    this.#balances = state.balances;
    this.#backfill = state.backfill;
  }

  /** The block the index is true at (undefined until it first read the chain). */
  get head(): IndexedBlock | undefined {
    return this.#head;
  }

  /** Grows each time the index goes back or starts over: an answer read across a change is dropped. */
  get generation(): number {
    return this.#generation;
  }

  /** Starting over: the index answers nothing meanwhile. */
  get rebuilding(): boolean {
    return this.#rebuilding;
  }

  /** Whether the token is paused at the head, per its Pause / Unpause logs. */
  get paused(): boolean | undefined {
    return this.#paused;
  }

  /** A replaced history is waiting to be reported. */
  get divergencePending(): boolean {
    return this.#divergence !== undefined;
  }

  /** The store's write in flight, if any. */
  get storing(): Promise<void> | undefined {
    return this.#storing;
  }

  /** Reads whether the token is paused at block `blockNumber` (undefined when the read fails). */
  async readPaused(blockNumber: bigint): Promise<void> {
    this.#paused = await this.#pausedAt(blockNumber);
  }

  #pausedAt(blockNumber: bigint): Promise<boolean | undefined> {
    return this.#p.client.readContract({ address: this.#p.token, abi: tokenAbi, functionName: "paused", blockNumber }).catch(() => undefined);
  }

  /** The live follower starts at `first`, and the backfill covers everything before it. */
  startAt(first: IndexedBlock): void {
    this.#head = first;
    this.tip = first.number;
    this.#nonces.begin(first.number);
    this.#trail = [{ number: first.number, hash: first.hash, nonces: [], pauses: false }];
    const generation = this.#generation;
    this.#backfill.start(first, () => generation === this.#generation);
  }

  /** Applies the blocks up to `latest` (the chain's head just read), going back first if the chain did. */
  async catchUp(latest: IndexedBlock): Promise<void> {
    const seen = latest.number;
    // Below the index: a node behind, or blocks removed (a revert). Either way the index can vouch only for `seen`.
    if (seen < this.#head!.number) await this.#goBackTo(seen);
    else if (seen === this.#head!.number && latest.hash.toLowerCase() !== this.#head!.hash.toLowerCase()) await this.#goBackTo(seen - 1n, latest);
    while (this.#head!.number < seen && !this.#stop.aborted) {
      const to = this.#head!.number + WINDOW < seen ? this.#head!.number + WINDOW : seen;
      let blocks: IndexedBlock[];
      try {
        blocks = await this.#reader.blocksAfter(this.#head!, to);
      } catch (error) {
        // New blocks do not follow the head: the chain replaced it (asked again, in case the RPC stumbled).
        if (!(error instanceof InconsistentChainError && error.parentMismatch)) throw error;
        const now = await this.#reader.header(this.#head!.number);
        if (now.hash.toLowerCase() === this.#head!.hash.toLowerCase()) throw error;
        await this.#goBackTo(this.#head!.number - 1n, now);
        continue;
      }
      const replaced = blocks.find((block) => {
        const went = this.#wentBackOver.get(block.number);
        return went !== undefined && went.toLowerCase() !== block.hash.toLowerCase();
      });
      // A stored block the index went back over comes again as another: the stored history was replaced from it on.
      if (replaced) this.#diverged({ number: replaced.number - 1n, hash: this.#hashAt(replaced.number - 1n, blocks)! });
      for (const block of blocks) this.#apply(block);
    }
  }

  /** The hash of block `number` as the index has it: in its trail, or among `blocks` about to be applied. */
  #hashAt(number: bigint, blocks: readonly IndexedBlock[] = []): Hex | undefined {
    const first = this.#trail[0];
    const fromTrail = first && number >= first.number ? this.#trail[Number(number - first.number)]?.hash : undefined;
    return fromTrail ?? blocks.find((block) => block.number === number)?.hash;
  }

  /**
   * Goes back to the newest block at or below `from` that the chain still has as the index read it (walking back by
   * hash over the trail), or starts over when there is none in the trail. `replacement`: the chain's block at
   * `from + 1`, another than the index's (a proof the history was replaced, not only cut short).
   */
  async #goBackTo(from: bigint, replacement?: IndexedBlock): Promise<void> {
    let proven = replacement !== undefined;
    const bottom = this.#trail[0]?.number ?? from + 1n;
    for (let top = from; top >= bottom; top -= WINDOW) {
      const low = top - WINDOW + 1n > bottom ? top - WINDOW + 1n : bottom;
      const numbers: bigint[] = [];
      for (let n = top; n >= low; n--) numbers.push(n);
      const headers = await Promise.all(numbers.map((n) => this.#reader.header(n)));
      for (const header of headers) {
        if (header.hash.toLowerCase() === this.#hashAt(header.number)?.toLowerCase()) return this.#rewind(header, proven);
        proven = true;
      }
    }
    await this.#rebuild();
  }

  /** Forgets every block after `common` (a block of the trail the chain still has) and follows the chain from it. */
  async #rewind(common: IndexedBlock, proven: boolean): Promise<void> {
    const at = Number(common.number - this.#trail[0]!.number);
    const removed = this.#trail.splice(at + 1);
    if (removed.length === 0) return;
    for (const block of removed) {
      this.#nonces.forgetBlock(block.nonces, block.number);
      if (!proven && block.number <= this.#nonces.storedThrough) this.#wentBackOver.set(block.number, block.hash);
    }
    this.#generation++;
    // Held balances go back by the transfers of the blocks forgotten (all of them known: else they are read again).
    this.#balances.rewind(common.number, removed.length);
    this.#nonces.dropUnstoredAfter(common.number);
    this.#head = { ...common, events: [] };
    if (removed.some((block) => block.pauses)) this.#paused = await this.#pausedAt(common.number);
    if (proven) this.#diverged({ number: common.number, hash: common.hash });
    this.#p.observe?.historyChange?.("rewind");
    // A node behind a load balancer does this often: only a replaced history is worth a line at warn.
    const log = proven ? this.#p.logger.warn.bind(this.#p.logger) : this.#p.logger.debug.bind(this.#p.logger);
    log(
      { network: this.#p.network, block: Number(common.number), forgotten: removed.length, replaced: proven },
      proven
        ? "state index: the chain replaced blocks the index had read (a snapshot reverted?); it follows the chain from the newest block both have"
        : "state index: the chain's head is below the index's (a node behind, or a snapshot reverted); it follows the chain from there",
    );
  }

  /** Starts over from the chain's head (a history changed deeper than the trail, e.g. a restarted chain). */
  async #rebuild(): Promise<void> {
    this.#rebuilding = true;
    this.#generation++;
    this.#backfill.reset();
    this.#nonces.clear();
    this.#balances.clear();
    this.#wentBackOver.clear();
    this.#divergence = null;
    this.#p.observe?.historyChange?.("rebuild");
    this.#p.logger.warn({ network: this.#p.network }, "state index: the chain's history changed deeper than the index can walk back (a restarted chain?); it starts over");
    await this.restart();
  }

  /** The rest of a {@link rebuild}, until it succeeds (each sync tries again while {@link rebuilding}). */
  async restart(): Promise<void> {
    // The ledger's nonces and progress of the other history go first: the backfill loads what it holds.
    await this.#report();
    const first = await this.#reader.header();
    this.#paused = await this.#pausedAt(first.number);
    this.startAt(first);
    this.#rebuilding = false;
  }

  /** A replaced history to report before anything more is stored (the deepest common block wins). */
  #diverged(common: BlockRef): void {
    if (this.#divergence === null) return;
    if (this.#divergence === undefined || common.number < this.#divergence.number) this.#divergence = common;
    this.#nonces.lowerStoredThrough(common.number);
    for (const number of this.#wentBackOver.keys()) if (number > common.number) this.#wentBackOver.delete(number);
  }

  /** Reports a replaced history to `history` (the ledger is bound to the chain again); throws when it could not. */
  async #report(): Promise<void> {
    const divergence = this.#divergence;
    if (divergence === undefined) return;
    await this.#p.history?.diverged(divergence ?? undefined);
    if (this.#divergence === divergence) this.#divergence = undefined;
  }

  #apply(block: IndexedBlock): void {
    const transfers: IndexedTransfer[] = [];
    const spent: string[] = [];
    let pauses = false;
    for (const event of block.events) {
      if (event.kind === "transfer") transfers.push(event);
      else if (event.kind === "nonce") spent.push(this.#nonces.found(event.authorizer, event.nonce, block.number));
      else {
        this.#paused = event.paused;
        pauses = true;
      }
    }
    this.#balances.apply(block.number, transfers);
    this.#trail.push({ number: block.number, hash: block.hash, nonces: spent, pauses });
    if (this.#trail.length > TRAIL_BLOCKS) this.#trail.shift();
    this.#wentBackOver.delete(block.number);
    this.#head = { ...block, events: [] };
  }

  /**
   * Stores the live follower's nonces and progress (with the head's hash, a checkpoint of the chain's history), once
   * the backfill has covered everything before it, and once a replaced history is reported.
   */
  async persist(): Promise<void> {
    if (this.#storing || !this.#head) return;
    if (this.#divergence !== undefined) {
      this.#storing = this.#report()
        .catch((error: unknown) => this.#p.logger.debug({ network: this.#p.network, err: String(error) }, "state index: reporting a replaced history failed; retrying"))
        .finally(() => {
          this.#storing = undefined;
        });
      await this.#storing;
      if (this.#divergence !== undefined) return;
    }
    if (!this.#backfill.complete) return;
    const generation = this.#generation;
    const stored = this.#nonces.store(this.#head, () => generation === this.#generation);
    if (!stored) return;
    this.#storing = stored
      .catch((error: unknown) => this.#p.logger.debug({ network: this.#p.network, err: String(error) }, "state index: storing nonces failed; retrying"))
      .finally(() => {
        this.#storing = undefined;
      });
    await this.#storing;
  }
}
