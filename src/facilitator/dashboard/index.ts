import { isAddressEqual, parseEventLogs, type Hex } from "viem";
import { tokenAbi } from "../../chain/token-abi.js";
import { canonicalNetwork, type NetworkName } from "../../protocol/networks.js";
import type { ApiKeyConfig, NetworkConfig } from "../config/index.js";
import type { HealthReport } from "../health.js";
import type { OutcomeRecord } from "../http/app.js";
import type { NetworkRuntime } from "../../settlement/runtime.js";
import { MemoryFeedHistory, OutcomeFeed, type FeedHistory, type ReceiptFacts } from "./feed.js";
import { MinuteHistory } from "./minutes.js";
import { networksView, type NetworksView } from "./networks.js";
import type { DashboardPlayground } from "./playground.js";
import { dashboardRouter, type DashboardRoutes } from "./router.js";
import type { FeedStreamEnd, FeedStreamLimits } from "./stream.js";

export { OutcomeFeed, MemoryFeedHistory, type FeedHistory, type FeedRow, type FeedListener, type ReceiptFacts } from "./feed.js";
export { sseEvent, isPublicRow, DASHBOARD_STREAM_DEFAULTS } from "./router.js";
export { FeedStream, type FeedStreamEnd, type FeedStreamLimits } from "./stream.js";
export type { NetworkView, NetworksView } from "./networks.js";
export { MinuteHistory, CHART_MINUTES, OUTCOME_CLASSES, type ChartsView, type NetworkSeries, type RouteSeries, type OutcomeClass, type MinuteHistoryOptions } from "./minutes.js";
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
  /** Wall clock (ms) of the charts' minutes; default `Date.now`. */
  now?: () => number;
}

/** The relayers' balance is read for the charts (through the shared healthcheck) at most this often while payments are answered. */
export const BALANCE_SAMPLE_MS = 30_000;

/** The page that watches payments happen: its routes, its feed, and `record` to hand it each outcome. */
export interface Dashboard extends DashboardRoutes {
  feed: OutcomeFeed;
  /** The last hour per minute, which the page's charts draw (`GET /dashboard/api/charts`). */
  charts: MinuteHistory;
  record(outcome: OutcomeRecord): void;
}

/** Assembles the dashboard over the facilitator's networks (`DASHBOARD=true`; on in the local stack). */
export function createDashboard(options: CreateDashboardOptions): Dashboard {
  const now = options.now ?? Date.now;
  const charts = new MinuteHistory({ networks: options.configs.map((config) => config.network), now });
  const feed = new OutcomeFeed({
    history: options.history ?? new MemoryFeedHistory(undefined, options.historyBytes),
    receipt: async (network, txHash) => {
      const facts = await readReceipt(options.runtimes, network, txHash);
      // Gas spent is the relayers': a transaction someone else sent (the one that used an authorization first) cost them nothing.
      if (facts?.spent) charts.transaction(network, txHash, facts.gasUsed, facts.spent.effectiveGasPrice);
      return facts;
    },
  });
  // Each read of the networks (the page asks every 5 s) is also a reading of the relayers' balance.
  let sampledAt = -Infinity;
  const networks = async (): Promise<NetworksView> => {
    sampledAt = now();
    const view = await networksView(options.configs, options.health, options.playground?.rpcUrls);
    for (const network of view.networks) {
      const known = network.relayers.filter((relayer) => relayer.balanceWei !== undefined);
      if (known.length > 0) charts.balance(network.network, known.reduce((sum, relayer) => sum + BigInt(relayer.balanceWei!), 0n));
    }
    return view;
  };
  const routes = dashboardRouter({
    feed,
    networks,
    charts: (scope) => charts.view(scope),
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
    charts,
    // A request refused before any payment check is no payment's outcome: counted in metrics, not shown.
    record(outcome) {
      if (outcome.edge) return;
      feed.record(outcome);
      charts.outcome(outcome);
      // With nobody watching the page, payments still keep the balance line going (the healthcheck is shared and cached).
      if (now() - sampledAt >= BALANCE_SAMPLE_MS) void networks().catch(() => undefined);
    },
  };
}

/** Block, gas used and the token transfer's recipient of a transaction, from its receipt; and its price when a relayer of ours paid it. */
async function readReceipt(runtimes: ReadonlyMap<NetworkName, NetworkRuntime>, network: string, hash: Hex): Promise<(ReceiptFacts & { spent?: { effectiveGasPrice: bigint } }) | undefined> {
  const name = canonicalNetwork(network);
  const runtime = name ? runtimes.get(name) : undefined;
  if (!runtime) return undefined;
  const receipt = await runtime.client.getTransactionReceipt({ hash });
  const transfer = parseEventLogs({ abi: tokenAbi, eventName: "Transfer", logs: receipt.logs }).find((log) =>
    isAddressEqual(log.address, runtime.config.token),
  );
  const ours = runtime.relayer.addresses.some((address) => isAddressEqual(address, receipt.from));
  return {
    block: Number(receipt.blockNumber),
    gasUsed: receipt.gasUsed,
    ...(transfer ? { payee: transfer.args.to } : {}),
    ...(ours ? { spent: { effectiveGasPrice: receipt.effectiveGasPrice } } : {}),
  };
}
