// The facilitator's background jobs per network: the chain's history bound to the ledger, the token state index.
import { isWebSocketUrl } from "../chain/rpc-transport.js";
import type { Ledger } from "../ledger/types.js";
import type { NetworkName } from "../protocol/networks.js";
import { proveSettled } from "../settlement/history-proof.js";
import type { NetworkRuntime } from "../settlement/runtime.js";
import { ChainHistory, TokenIndex } from "../state/index.js";
import { ENV_PREFIX, type FacilitatorConfig } from "./config/index.js";
import type { Logger } from "./logger.js";
import type { FacilitatorMetrics } from "./metrics/index.js";
import { StartupError } from "./startup-error.js";

/** How often each chain's history is compared with the ledger's trail of it (and a checkpoint recorded). */
const HISTORY_CHECK_MS = 10_000;

/**
 * Binds the ledger's rows of each network's chain to the chain's history before anything is served or sent: rows of
 * another history (a local chain restarted or reverted) are set aside (docs/operations.md, "The chain's identity").
 */
export async function bindHistories(
  networks: ReadonlyMap<NetworkName, NetworkRuntime>,
  ledger: Ledger,
  metrics: FacilitatorMetrics,
  logger: Logger,
  confirmAfterMs: number,
): Promise<void> {
  await Promise.all(
    [...networks.values()].map(async (runtime) => {
      const { network, chainId, token } = runtime.config;
      const history = new ChainHistory({
        network,
        client: runtime.client,
        chainId,
        token,
        store: ledger,
        logger,
        // Rows are kept, set aside and brought back by the one payment decision.
        prove: (row) => proveSettled(runtime.paymentReads, row),
        checkIntervalMs: HISTORY_CHECK_MS,
        confirmAfterMs,
        onSetAside: (counts) => {
          // The index's nonces are deleted, not set aside: they are the chain's own logs, read again.
          metrics.rowsSetAside(network, "settlement", counts.settlements);
          metrics.rowsSetAside(network, "penalty", counts.penalties);
          metrics.rowsSetAside(network, "payment_identifier", counts.paymentIdentifiers);
          metrics.rowsSetAside(network, "catalog_entry", counts.catalogEntries);
        },
      });
      runtime.history = history;
      try {
        await history.start();
      } catch (error) {
        throw new StartupError(`${network}: the ledger cannot be bound to the chain's history: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
      }
    }),
  );
}

/** The network's token state index, following the chain from now on (docs/operations.md, "The token state index"). */
export function startIndex(config: FacilitatorConfig, runtime: NetworkRuntime, ledger: Ledger, metrics: FacilitatorMetrics, logger: Logger): TokenIndex {
  const { network, chainId, token, rpcUrls } = runtime.config;
  const index = new TokenIndex({
    network,
    client: runtime.client,
    chainId,
    token,
    store: ledger,
    ...(config.stateIndex.startBlocks[network] !== undefined ? { startBlock: config.stateIndex.startBlocks[network] } : {}),
    startBlockVariable: `${ENV_PREFIX[network]}_INDEX_START_BLOCK`,
    logRangeBlocks: config.stateIndex.logRangeBlocks,
    maxNonces: config.stateIndex.maxNonces,
    pollingIntervalMs: config.pollingIntervalMs,
    // New blocks are announced over a WebSocket RPC (every URL one: failover keeps the subscription).
    subscribe: rpcUrls.length > 0 && rpcUrls.every(isWebSocketUrl),
    logger,
    observe: { followError: (kind) => metrics.indexFollowError(network, kind), historyChange: (kind) => metrics.indexHistoryChange(network, kind) },
    ...(runtime.history ? { history: runtime.history } : {}),
  });
  index.start();
  return index;
}
