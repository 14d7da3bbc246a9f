// The token state index's backfill: the nonces spent before the live follower started, from the start block into the store.
import type { IndexedBlock } from "./block-reader.js";
import { backfillNonces, BackfillStartError } from "./nonce-backfill.js";
import type { NonceScope } from "./nonce-store.js";
import { nonceKey, type SpentNonces } from "./spent-nonces.js";
import type { IndexStatus, TokenIndexParameters } from "./token-index-types.js";

/**
 * One run of {@link backfillNonces} at a time, up to the block the live follower started at: the nonces it finds are
 * held in `nonces`; once it is done, a nonce the index does not hold is unspent ({@link complete}).
 */
export class IndexBackfill {
  readonly #p: TokenIndexParameters;
  readonly #scope: NonceScope;
  readonly #nonces: SpentNonces;
  /** The index's own stop: it ends every run. */
  readonly #indexStop: AbortSignal;
  #state: IndexStatus["backfill"] = { state: "waiting" };
  #stop = new AbortController();
  #complete = false;

  constructor(parameters: TokenIndexParameters, scope: NonceScope, nonces: SpentNonces, stop: AbortSignal) {
    this.#p = parameters;
    this.#scope = scope;
    this.#nonces = nonces;
    this.#indexStop = stop;
  }

  /** Whether the backfill covered everything before the live follower: a nonce not held is then unspent. */
  get complete(): boolean {
    return this.#complete;
  }

  /** The backfill as `/healthcheck` shows it. */
  get status(): IndexStatus["backfill"] {
    return this.#state;
  }

  /** Starts a run through block `target` (the follower's first) in the background. `current`: whether the index is still on the history it began on. */
  start(target: Pick<IndexedBlock, "number" | "hash">, current: () => boolean): void {
    this.#stop = new AbortController();
    void this.#run(target, current, AbortSignal.any([this.#indexStop, this.#stop.signal]));
  }

  /** Stops the run, if any. */
  abort(): void {
    this.#stop.abort();
  }

  /** Stops the run and forgets it was ever done (the index starts over). */
  reset(): void {
    this.#stop.abort();
    this.#complete = false;
    this.#state = { state: "waiting" };
  }

  async #run(target: Pick<IndexedBlock, "number" | "hash">, current: () => boolean, signal: AbortSignal): Promise<void> {
    const mine = () => current() && !signal.aborted;
    this.#state = { state: "running", targetBlock: Number(target.number) };
    // Answers that proved nothing, in a row: the first is worth a line at warn.
    let unproven = 0;
    try {
      await backfillNonces({
        client: this.#p.client,
        scope: this.#scope,
        store: this.#p.store,
        ...(this.#p.startBlock !== undefined ? { startBlock: this.#p.startBlock } : {}),
        rangeBlocks: this.#p.logRangeBlocks,
        target: target.number,
        targetHash: target.hash,
        ...(this.#p.tailBlocks !== undefined ? { tailBlocks: this.#p.tailBlocks } : {}),
        signal,
        onNonces: (nonces) => {
          if (mine()) nonces.forEach((n) => this.#nonces.remember(nonceKey(n.authorizer, n.nonce), Number(n.blockNumber)));
        },
        onProgress: ({ fromBlock, throughBlock, targetBlock }) => {
          unproven = 0;
          if (mine()) this.#state = { state: "running", fromBlock: Number(fromBlock), throughBlock: Number(throughBlock), targetBlock: Number(targetBlock) };
        },
        onError: (stage, error) => {
          if (stage === "unproven" && unproven++ === 0) {
            this.#p.logger.warn(
              { network: this.#p.network, err: String(error) },
              "state index: the RPC answered logs it did not prove it holds (a node behind or pruned?); asked again, and verify asks the chain meanwhile",
            );
          } else this.#p.logger.debug({ network: this.#p.network, stage, err: String(error) }, "state index: backfill step failed; retrying");
        },
      });
    } catch (error) {
      if (!mine()) return;
      const message =
        error instanceof BackfillStartError
          ? `${error.message}; set ${this.#p.startBlockVariable} to the token's deployment block (or the block to trust nonces from)`
          : String(error);
      this.#state = { ...this.#state, state: "failed", error: message };
      this.#p.logger.warn({ network: this.#p.network, problem: message }, "state index: no backfill of spent authorizations; verify asks the chain whether each one is spent");
      return;
    }
    if (!mine()) return;
    this.#complete = true;
    this.#state = { ...this.#state, state: "done" };
    this.#p.logger.info(
      { network: this.#p.network, fromBlock: this.#state.fromBlock, throughBlock: this.#state.throughBlock, spentAuthorizations: this.#nonces.size },
      "state index: backfill of spent authorizations done",
    );
  }
}
