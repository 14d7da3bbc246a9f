// The token state index's backfill: the nonces spent before the live follower started, from the start block into the store.
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

  /** Starts a run through block `target` in the background. `current`: whether the index is still on the history it began on. */
  start(target: bigint, current: () => boolean): void {
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

  async #run(target: bigint, current: () => boolean, signal: AbortSignal): Promise<void> {
    const mine = () => current() && !signal.aborted;
    this.#state = { state: "running", targetBlock: Number(target) };
    try {
      await backfillNonces({
        client: this.#p.client,
        scope: this.#scope,
        store: this.#p.store,
        ...(this.#p.startBlock !== undefined ? { startBlock: this.#p.startBlock } : {}),
        rangeBlocks: this.#p.logRangeBlocks,
        target,
        signal,
        onNonces: (nonces) => {
          if (mine()) nonces.forEach((n) => this.#nonces.remember(nonceKey(n.authorizer, n.nonce), Number(n.blockNumber)));
        },
        onProgress: ({ fromBlock, throughBlock, targetBlock }) => {
          if (mine()) this.#state = { state: "running", fromBlock: Number(fromBlock), throughBlock: Number(throughBlock), targetBlock: Number(targetBlock) };
        },
        onError: (stage, error) => this.#p.logger.debug({ network: this.#p.network, stage, err: String(error) }, "state index: backfill step failed; retrying"),
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
