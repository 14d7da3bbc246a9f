import type { Address, Hex, PublicClient } from "viem";
import { BlockReader, InconsistentChainError, type IndexedBlock } from "./block-reader.js";
import { findDeploymentBlock } from "./deployment-block.js";
import type { NonceProgress, NonceScope, NonceStore, StoredNonce } from "./nonce-store.js";
import { logRefusal, provenNonceLogs, UnprovenLogsError } from "./proven-logs.js";
import { tokenEvent, type RawLog } from "./token-events.js";
import { KitErrorOf } from "../protocol/errors.js";

/** Parameters of {@link backfillNonces}. */
export interface BackfillParameters {
  client: PublicClient;
  scope: NonceScope;
  store: NonceStore;
  /** The first block to cover; default: the one the store remembers, else the token's deployment block (found once). */
  startBlock?: bigint;
  /** Blocks per `eth_getLogs` at most (providers cap the range); narrowed while the provider refuses, grown back after. */
  rangeBlocks: number;
  /** The last block to cover: the block the live follower started at. */
  target: bigint;
  /** The hash of `target` as the follower read it: the blocks read must lead to it. */
  targetHash: Hex;
  /** The last blocks up to `target` read block by block, each proven by its own content, rather than by range (default {@link TAIL_BLOCKS}). */
  tailBlocks?: number;
  /** Receives nonces as they are found (stored ones of blocks through `target` first, then each range's). */
  onNonces(nonces: readonly StoredNonce[]): void;
  /** Told of the progress after each stored range. */
  onProgress(progress: NonceProgress & { targetBlock: bigint }): void;
  /**
   * Told of each failure before it is retried (the loop never gives up while it can make progress); `unproven`: the
   * node answered without proving what it covers (nothing of that answer is stored).
   */
  onError(stage: "store" | "rpc" | "start" | "unproven", error: unknown): void;
  signal: AbortSignal;
}

/** What the backfill could not do without the operator: it found no start block. */
export class BackfillStartError extends KitErrorOf("BackfillStartError", "backfill_start_unknown") {}

const PAGE = 10_000;
const BACKOFF_MS = [250, 500, 1_000, 2_000, 5_000] as const;
/** Headers asked per batch in the tail. */
const TAIL_WINDOW = 64n;
/**
 * The blocks nearest the index's start that the backfill reads block by block rather than by range: about two minutes
 * of Cronos blocks (0.5 s). A backend merely behind the head lacks only these, and a range's proof (a header in the
 * same batch) is sound only where one node answers a whole batch; a block's own content proves it anywhere.
 */
export const TAIL_BLOCKS = 256;

/**
 * Backfills the token's used and canceled authorization nonces from the start block through `target`: in ranges
 * sized for providers' `eth_getLogs` caps up to the last {@link TAIL_BLOCKS} blocks, each range counted only when
 * the node proved it holds the range's blocks ({@link provenNonceLogs}); then those last blocks one by one through
 * the {@link BlockReader} (the last of them `targetHash`, each block's logs proven by its own content), stored at
 * once. An answer that proves nothing is asked again later, never stored: until everything is proven the backfill
 * is not done, and the index does not answer "unused" for a nonce it does not hold.
 *
 * Resumable and shared: the store says how far any instance got (the ledger), so a restart or a second instance
 * loads what is stored through `target` and reads only the rest. Each range is stored before the next is read. Resolves once `target`
 * is covered (or `signal` aborts); throws {@link BackfillStartError} when no start block can be found (a node without
 * past state and no start block configured).
 */
export async function backfillNonces(parameters: BackfillParameters): Promise<void> {
  const { client, scope, store, signal } = parameters;
  const retry = <T>(stage: "store" | "rpc", work: () => Promise<T>) => retrying(stage, work, parameters);

  const remembered = await retry("store", () => store.nonceIndexProgress(scope));
  let fromBlock = parameters.startBlock ?? remembered?.fromBlock;
  if (fromBlock === undefined) {
    try {
      fromBlock = await findDeploymentBlock(client, scope.token, parameters.target);
    } catch (error) {
      parameters.onError("start", error);
      throw new BackfillStartError(`cannot find the token's deployment block (${error instanceof Error ? error.message : String(error)})`, { cause: error });
    }
  }
  const start = fromBlock;
  const progress = { current: await retry("store", () => store.openNonceIndex(scope, start)) };

  let after: { authorizer: Address; nonce: Hex } | undefined;
  for (;;) {
    const cursor = after;
    const page = await retry("store", () => store.indexedNonces(scope, { ...(cursor ? { after: cursor } : {}), limit: PAGE }));
    // A row of a block after the target proves nothing at the index's block: another instance's node ahead, or a history
    // the chain went back over (the live follower stored it, then the chain reverted deeper than its trail). The live
    // follower reads those blocks itself.
    const covered = page.filter((nonce) => nonce.blockNumber <= parameters.target);
    if (covered.length > 0) parameters.onNonces(covered);
    if (page.length < PAGE) break;
    const last = page[page.length - 1]!;
    after = { authorizer: last.authorizer, nonce: last.nonce };
  }
  parameters.onProgress({ ...progress.current, targetBlock: parameters.target });

  const tail = BigInt(Math.max(0, parameters.tailBlocks ?? TAIL_BLOCKS));
  const tailFrom = parameters.target - tail + 1n > start ? parameters.target - tail + 1n : start;
  await backfillRanges(parameters, progress, tailFrom - 1n);
  await backfillTail(parameters, progress);
}

/** The stored progress, as the steps of one backfill move it. */
interface Progress {
  current: NonceProgress;
}

/** The nonces the token's `AuthorizationUsed` and `AuthorizationCanceled` logs spent. */
function noncesOf(logs: readonly RawLog[]): StoredNonce[] {
  const nonces: StoredNonce[] = [];
  for (const log of logs) {
    const event = tokenEvent(log);
    if (event?.kind === "nonce" && log.blockNumber !== null) nonces.push({ authorizer: event.authorizer, nonce: event.nonce, blockNumber: log.blockNumber });
  }
  return nonces;
}

/** Stores `nonces` as every nonce spent in `from`..`through`, and tells of them and of the progress. */
async function record(parameters: BackfillParameters, progress: Progress, nonces: StoredNonce[], from: bigint, through: bigint, throughHash?: Hex): Promise<void> {
  const range = { fromBlock: from, throughBlock: through, ...(throughHash ? { throughHash } : {}) };
  progress.current = await retrying("store", () => parameters.store.recordIndexedNonces(parameters.scope, nonces, range), parameters);
  parameters.onNonces(nonces);
  parameters.onProgress({ ...progress.current, targetBlock: parameters.target });
}

/** The ranges of logs through block `through`, each proven before it is stored; a refused range is narrowed. */
async function backfillRanges(parameters: BackfillParameters, progress: Progress, through: bigint): Promise<void> {
  const { client, scope, signal } = parameters;
  let range = BigInt(Math.max(1, parameters.rangeBlocks));
  // The narrowest range refused so far: the range grows back after a success, but never to that again.
  let refused = range + 1n;
  let failures = 0;
  while (progress.current.throughBlock < through && !signal.aborted) {
    const from = progress.current.throughBlock + 1n;
    const to = from + range - 1n < through ? from + range - 1n : through;
    let logs: RawLog[];
    try {
      logs = await provenNonceLogs(client, scope.token, from, to, to === parameters.target ? parameters.targetHash : undefined);
    } catch (error) {
      failures++;
      if (error instanceof UnprovenLogsError || error instanceof InconsistentChainError) {
        // The node could not show it holds the range (behind, pruned, or another history): asked again later, as is.
        parameters.onError("unproven", error);
        await pause(BACKOFF_MS[Math.min(failures - 1, BACKOFF_MS.length - 1)]!, signal);
        continue;
      }
      parameters.onError("rpc", error);
      const refusal = logRefusal(error);
      if (refusal.kind === "behind") await pause(BACKOFF_MS[Math.min(failures - 1, BACKOFF_MS.length - 1)]!, signal);
      else if (refusal.kind === "distance" && refusal.blocks >= 1n && refusal.blocks < range) {
        // The node's own cap, in its words: straight to it.
        range = refusal.blocks;
        if (range + 1n < refused) refused = range + 1n;
      } else if (range > 1n) {
        if (range < refused) refused = range;
        range = range / 2n;
      } else await pause(BACKOFF_MS[BACKOFF_MS.length - 1]!, signal);
      continue;
    }
    failures = 0;
    await record(parameters, progress, noncesOf(logs), from, to);
    if (range * 2n < refused) range = range * 2n;
  }
}

/** The last blocks through `target`, read block by block and each proven by its content, stored once they all are. */
async function backfillTail(parameters: BackfillParameters, progress: Progress): Promise<void> {
  const { client, scope, signal, target } = parameters;
  const reader = new BlockReader(client, scope.token);
  for (let failures = 0; progress.current.throughBlock < target && !signal.aborted; failures++) {
    const from = progress.current.throughBlock + 1n;
    try {
      const nonces: StoredNonce[] = [];
      let last: IndexedBlock | undefined;
      for (let at = from; at <= target; at += TAIL_WINDOW) {
        const to = at + TAIL_WINDOW - 1n < target ? at + TAIL_WINDOW - 1n : target;
        for (const block of await reader.blocksIn(at, to)) {
          for (const event of block.events) if (event.kind === "nonce") nonces.push({ authorizer: event.authorizer, nonce: event.nonce, blockNumber: block.number });
          last = block;
        }
      }
      // The block the index started at, as it read it: the blocks read are of its history (a replaced one starts the index over).
      if (last?.hash.toLowerCase() !== parameters.targetHash.toLowerCase()) {
        throw new InconsistentChainError(`block ${target} came back as ${last?.hash}, not the ${parameters.targetHash} the index started at`);
      }
      await record(parameters, progress, nonces, from, target, parameters.targetHash);
    } catch (error) {
      if (signal.aborted) return;
      parameters.onError(error instanceof InconsistentChainError ? "unproven" : "rpc", error);
      await pause(BACKOFF_MS[Math.min(failures, BACKOFF_MS.length - 1)]!, signal);
    }
  }
}

/** Runs `work` until it succeeds, waiting longer after each failure (up to 5 s); stops waiting when `signal` aborts. */
export async function retrying<T>(
  stage: "store" | "rpc",
  work: () => Promise<T>,
  { signal, onError }: { signal: AbortSignal; onError(stage: "store" | "rpc", error: unknown): void },
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (signal.aborted) throw error;
      onError(stage, error);
      await pause(BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)]!, signal);
    }
  }
}

/** Waits `ms` (never keeping the process alive), or less when `signal` aborts. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    timer.unref();
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
