import { isAddressEqual, parseEventLogs, type Hex } from "viem";
import { tokenAbi } from "../../chain/token-abi.js";
import { canonicalNetwork, type NetworkName } from "../../protocol/networks.js";
import type { ApiKeyConfig, NetworkConfig } from "../config/index.js";
import type { HealthReport } from "../health.js";
import type { OutcomeRecord } from "../http/app.js";
import type { NetworkRuntime } from "../../settlement/runtime.js";
import { MemoryFeedHistory, OutcomeFeed, type FeedHistory, type ReceiptFacts } from "./feed.js";
import { networksView } from "./networks.js";
import type { DashboardPlayground } from "./playground.js";
import { dashboardRouter, type DashboardRoutes } from "./router.js";
import type { FeedStreamEnd, FeedStreamLimits } from "./stream.js";

export { OutcomeFeed, MemoryFeedHistory, type FeedHistory, type FeedRow, type FeedListener, type ReceiptFacts } from "./feed.js";
export { sseEvent, isPublicRow, DASHBOARD_STREAM_DEFAULTS } from "./router.js";
export { FeedStream, type FeedStreamEnd, type FeedStreamLimits } from "./stream.js";
export type { NetworkView, NetworksView } from "./networks.js";
export * from "./playground.js";

/** Options of {@link createDashboard}. */
export interface CreateDashboardOptions {
  configs: readonly NetworkConfig[];
  runtimes: ReadonlyMap<NetworkName, NetworkRuntime>;
  /** The facilitator's shared, cached healthcheck: the page's network view reads the chain through it. */
  health: () => Promise<HealthReport>;
  playground?: DashboardPlayground;
  /** Where past rows are kept; default the last 500 in memory, at most `historyBytes` of them. */
  history?: FeedHistory;
  /** The default history's byte budget (`DASHBOARD_HISTORY_BYTES`). */
  historyBytes?: number;
  /** Most streams open at once (`DASHBOARD_MAX_STREAMS`). */
  maxStreams?: number;
  /** Each stream's bounds (`DASHBOARD_STREAM_STALL_SECONDS`, `DASHBOARD_STREAM_MAX_SECONDS`). */
  streamLimits?: Partial<FeedStreamLimits>;
  /** Streams opened, refused and ended (metrics). */
  onStream?: (event: "opened" | "refused" | FeedStreamEnd) => void;
  /** The facilitator's API keys: with any, only a request carrying one sees rows other than settlements. */
  apiKeys?: readonly ApiKeyConfig[];
  /** `ALLOWED_HOSTS`: names the local stack's page answers besides the loopback names. */
  allowedHosts?: readonly string[];
}

/** The page that watches payments happen: its routes, its feed, and `record` to hand it each outcome. */
export interface Dashboard extends DashboardRoutes {
  feed: OutcomeFeed;
  record(outcome: OutcomeRecord): void;
}

/** Assembles the dashboard over the facilitator's networks (`DASHBOARD=true`; on in the local stack). */
export function createDashboard(options: CreateDashboardOptions): Dashboard {
  const feed = new OutcomeFeed({
    history: options.history ?? new MemoryFeedHistory(undefined, options.historyBytes),
    receipt: (network, txHash) => readReceipt(options.runtimes, network, txHash),
  });
  const routes = dashboardRouter({
    feed,
    networks: () => networksView(options.configs, options.health, options.playground?.rpcUrls),
    playground: options.playground,
    ...(options.apiKeys ? { apiKeys: options.apiKeys } : {}),
    ...(options.maxStreams !== undefined ? { maxStreams: options.maxStreams } : {}),
    ...(options.streamLimits ? { streamLimits: options.streamLimits } : {}),
    ...(options.onStream ? { onStream: options.onStream } : {}),
    ...(options.allowedHosts ? { allowedHosts: options.allowedHosts } : {}),
  });
  return {
    ...routes,
    feed,
    // A request refused before any payment check is no payment's outcome: counted in metrics, not shown.
    record(outcome) {
      if (!outcome.edge) feed.record(outcome);
    },
  };
}

/** Block, gas used and the token transfer's recipient of a transaction, from its receipt. */
async function readReceipt(runtimes: ReadonlyMap<NetworkName, NetworkRuntime>, network: string, hash: Hex): Promise<ReceiptFacts | undefined> {
  const name = canonicalNetwork(network);
  const runtime = name ? runtimes.get(name) : undefined;
  if (!runtime) return undefined;
  const receipt = await runtime.client.getTransactionReceipt({ hash });
  const transfer = parseEventLogs({ abi: tokenAbi, eventName: "Transfer", logs: receipt.logs }).find((log) =>
    isAddressEqual(log.address, runtime.config.token),
  );
  return { block: Number(receipt.blockNumber), gasUsed: receipt.gasUsed, ...(transfer ? { payee: transfer.args.to } : {}) };
}
