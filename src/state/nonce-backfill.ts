import type { Address, Hex, PublicClient } from "viem";
import { findDeploymentBlock } from "./deployment-block.js";
import type { NonceProgress, NonceScope, NonceStore, StoredNonce } from "./nonce-store.js";
import { NONCE_EVENTS, tokenEvent, type RawLog } from "./token-events.js";
import { KitError } from "../protocol/errors.js";

/** Parameters of {@link backfillNonces}. */
export interface BackfillParameters {
  client: PublicClient;
  scope: NonceScope;
  store: NonceStore;
  /** The first block to cover; default: the one the store remembers, else the token's deployment block (found once). */
  startBlock?: bigint;
  /** Blocks per `eth_getLogs` at most (providers cap the range); halved while the provider refuses, grown back after. */
  rangeBlocks: number;
  /** The last block to cover: the block the live follower started after. */
  target: bigint;
  /** Receives nonces as they are found (stored ones first, then each range's). */
  onNonces(nonces: readonly StoredNonce[]): void;
  /** Told of the progress after each stored range. */
  onProgress(progress: NonceProgress & { targetBlock: bigint }): void;
  /** Told of each failure before it is retried (the loop never gives up while it can make progress). */
  onError(stage: "store" | "rpc" | "start", error: unknown): void;
  signal: AbortSignal;
}

/** What the backfill could not do without the operator: it found no start block. */
export class BackfillStartError extends KitError<"backfill_start_unknown"> {
  override name = "BackfillStartError";
  constructor(message: string, options?: ErrorOptions) {
    super("backfill_start_unknown", message, options);
  }
}

const PAGE = 10_000;
const BACKOFF_MS = [250, 500, 1_000, 2_000, 5_000] as const;

/**
 * Backfills the token's used and canceled authorization nonces from the start block through `target`,
 * in ranges sized for providers' `eth_getLogs` limits. Resumable and shared: the store says how far any
 * instance got (the ledger), so a restart or a second instance loads what is stored and reads only the
 * rest. Each range is stored before the next is read. Resolves once `target` is covered (or `signal`
 * aborts); throws {@link BackfillStartError} when no start block can be found (a node without past state
 * and no start block configured).
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
  let progress = await retry("store", () => store.openNonceIndex(scope, start));

  let after: { authorizer: Address; nonce: Hex } | undefined;
  for (;;) {
    const cursor = after;
    const page = await retry("store", () => store.indexedNonces(scope, { ...(cursor ? { after: cursor } : {}), limit: PAGE }));
    if (page.length > 0) parameters.onNonces(page);
    if (page.length < PAGE) break;
    const last = page[page.length - 1]!;
    after = { authorizer: last.authorizer, nonce: last.nonce };
  }
  parameters.onProgress({ ...progress, targetBlock: parameters.target });

  let range = BigInt(Math.max(1, parameters.rangeBlocks));
  // The narrowest range refused so far: the range grows back after a success, but never to that again.
  let refused = range + 1n;
  while (progress.throughBlock < parameters.target && !signal.aborted) {
    const from = progress.throughBlock + 1n;
    const to = from + range - 1n < parameters.target ? from + range - 1n : parameters.target;
    let logs: RawLog[];
    try {
      logs = (await client.getLogs({ address: scope.token, events: NONCE_EVENTS, fromBlock: from, toBlock: to, strict: true })) as RawLog[];
    } catch (error) {
      parameters.onError("rpc", error);
      // Providers word their range and result caps in many ways: any refusal narrows the range; a
      // one-block range that still fails is a fault, waited out.
      if (range > 1n) {
        if (range < refused) refused = range;
        range = range / 2n;
      } else await pause(BACKOFF_MS[BACKOFF_MS.length - 1]!, signal);
      continue;
    }
    const nonces: StoredNonce[] = [];
    for (const log of logs) {
      const event = tokenEvent(log);
      if (event?.kind === "nonce" && log.blockNumber !== null) nonces.push({ authorizer: event.authorizer, nonce: event.nonce, blockNumber: log.blockNumber });
    }
    progress = await retry("store", () => store.recordIndexedNonces(scope, nonces, { fromBlock: from, throughBlock: to }));
    parameters.onNonces(nonces);
    parameters.onProgress({ ...progress, targetBlock: parameters.target });
    if (range * 2n < refused) range = range * 2n;
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
