import type { Address, Transport } from "viem";
import type { Express } from "express";
import type { Ledger } from "../ledger/types.js";
import type { NetworkName } from "../protocol/networks.js";
import { RecoveryPool, type RecoveryPoolOptions } from "../chain/recovery-pool.js";
import type { SettlementDeps, SettlementObserver } from "../settlement/deps.js";
import { VerifyStageClock } from "./metrics/stages.js";
import { bindHistories, startIndex } from "./background-jobs.js";
import type { FacilitatorConfig } from "./config/index.js";
import { startCoordination, type Coordination } from "./coordination.js";
import { createDashboard, type Dashboard, type DashboardPlayground } from "./dashboard/index.js";
import { supportedAnswer } from "./dialects/index.js";
import { createApp, type AppOptions, type OutcomeRecord } from "./http/app.js";
import type { QuotaHolder } from "./http/edge.js";
import type { RateLimitStores } from "./http/rate-limit.js";
import { redactingLogger, silentLogger, type Logger } from "./logger.js";
import { createMetrics, type FacilitatorMetrics } from "./metrics/index.js";
import { openNetworks } from "./networks.js";
import { serviceHealth } from "./service-health.js";
import { StartupError } from "./startup-error.js";
import { hookRunner, type FacilitatorHooks } from "./hooks.js";
import { startTracing, type Tracing } from "./tracing.js";

/** Options of {@link createFacilitator} and {@link startFacilitator}. */
export interface StartFacilitatorOptions {
  /** viem transports per network, e.g. `custom(provider)` for an in-process chain; default `http(rpcUrl)`. */
  transports?: Partial<Record<NetworkName, Transport>>;
  logger?: Logger;
  /** An open settlement ledger to use (not closed with the facilitator); default: the one `config.ledger` names. */
  ledger?: Ledger;
  /**
   * One express-rate-limit `Store` per limiter (verify, settle, settlePayer, status) shared between
   * instances; default in memory, or the ledger's counters when it is shared (PostgreSQL).
   */
  rateLimitStores?: RateLimitStores;
  onOutcome?: (outcome: OutcomeRecord) => void;
  onRateLimited?: (route: string, by: QuotaHolder) => void;
  /** Also export Node's process metrics (a standalone process; not for embedded use). */
  defaultMetrics?: boolean;
  /** The local stack's buyers and try-it panel for the dashboard (when `config.dashboard`). Never in production. */
  playground?: DashboardPlayground;
  /** Wall clock (ms) of the healthcheck and metrics caches and the block age; default `Date.now`. */
  now?: () => number;
  /** The signature recovery pool's bounds and worker (tests: a worker that fails on demand); its size is `config.recoveryWorkers`. */
  recoveryPool?: Pick<RecoveryPoolOptions, "maxQueue" | "timeoutMs" | "maxBatch" | "script" | "inlineWhenIdle">;
  /** Also told what settlement tells the metrics (a chain read that failed, a receipt's wait, …). */
  observer?: Partial<SettlementObserver>;
  /**
   * Lifecycle hooks around verify and settle (allowlists, audit logs, custom limits): each awaited before the
   * answer, bounded in time; a before-hook may refuse the payment ({@link FacilitatorHooks}, docs/facilitator.md).
   */
  hooks?: FacilitatorHooks;
  /** The local stack's switch over the quota ({@link AppOptions.closedFor}: "busy"). Never in production. */
  closedFor?: AppOptions["closedFor"];
}

/** A facilitator assembled but not listening: for tests (supertest) and embedding. */
export interface Facilitator {
  app: Express;
  /** Settlement's one dependencies object: the networks, the ledger, the settings, the logger. */
  context: SettlementDeps<Logger>;
  relayers: Address[];
  metrics: FacilitatorMetrics;
  /** Requests per minute per client IP (or API key, or payer); 0 = no limit. */
  rateLimits: FacilitatorConfig["rateLimits"];
  /** The page at `/` and its live feed, when `config.dashboard`. */
  dashboard?: Dashboard;
  /** The ledger, key leases, settlement sender and reconciler of this instance. */
  coordination: Coordination;
  /** The tracing SDK this instance started or joined (`config.tracing`); absent with tracing off. */
  tracing?: Tracing;
  /** Lets settles in flight finish (up to `graceMs`), releases the relayer key leases, closes the ledger. */
  close(graceMs?: number): Promise<void>;
}

/**
 * Assembles the facilitator: clients per network, start-up checks (chain id, token code and
 * EIP-712 domain, relayer gas), relayers, and the HTTP app. Throws {@link StartupError} at the first
 * failed check.
 */
export async function createFacilitator(config: FacilitatorConfig, options: StartFacilitatorOptions = {}): Promise<Facilitator> {
  // Every line passes through URL redaction: an RPC error text may carry the URL and its API key.
  const logger = redactingLogger(options.logger ?? silentLogger);
  const hooks = hookRunner(options.hooks, logger);
  const now = options.now ?? Date.now;
  const stages = config.metricsVerifyStages ? new VerifyStageClock() : undefined;
  // The verify budget reads the event loop's delay and the GC pauses beside the stages.
  const metrics = createMetrics({ defaults: (options.defaultMetrics ?? false) || stages !== undefined, cacheMs: config.metricsCacheMs, now, stages });
  const tracing = config.tracing ? await startTracing(config.tracing).catch((error: unknown) => {
    throw new StartupError(`traces (OTEL_*): ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }) : undefined;
  const tracer = tracing?.tracer;
  const { networks, rpcOf, startupInspections, closeTransports } = await openNetworks(config, metrics, logger, options.transports, tracer).catch(async (error: unknown) => {
    await tracing?.close();
    throw error;
  });
  metrics.watchRelayers(networks);
  for (const runtime of networks.values()) runtime.relayer.start();
  // Signature recovery on every core while verify is busy (verify's and settle's checks, through the settlement
  // dependencies); its workers start at the first need, so a start-up that fails below has none to stop.
  const recovery = new RecoveryPool({
    lateMs: config.recoveryLateMs,
    ...options.recoveryPool,
    ...(config.recoveryWorkers !== undefined ? { workers: config.recoveryWorkers } : {}),
    onRecovered: metrics.signaturesRecovered,
    onWorkerLost(why) {
      metrics.recoveryWorkerLost(why);
      logger.warn({ why }, "signature recovery: a worker thread was lost and is replaced; its recoveries were done on the main thread");
    },
  });
  metrics.watchRecovery(() => recovery.state);
  let coordination: Coordination;
  try {
    coordination = await startCoordination({
      config,
      networks,
      logger,
      metrics,
      observer: settlementObserver(metrics, options.observer),
      ...(options.ledger ? { ledger: options.ledger } : {}),
      ...(tracer ? { tracer } : {}),
      recovery,
      prepare: (ledger) => bindHistories(networks, ledger, metrics, logger, config.chainHistoryConfirmMs),
    });
  } catch (error) {
    await Promise.all([...networks.values()].map((runtime) => runtime.relayer.stop()));
    for (const runtime of networks.values()) runtime.history?.stop();
    closeTransports();
    await recovery.close();
    await tracing?.close();
    if (error instanceof StartupError) throw error;
    throw new StartupError(`${config.ledger.databaseUrl ? "DATABASE_URL" : "LEDGER_FILE"}: the settlement ledger cannot be opened: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  if (config.stateIndex.enabled) {
    for (const runtime of networks.values()) runtime.index = startIndex(config, runtime, coordination.ledger, metrics, logger);
  }
  const stopIndexes = () => Promise.all([...networks.values()].map((runtime) => runtime.index?.stop()));
  const context: SettlementDeps<Logger> = coordination.deps;
  const relayers = [...networks.values()][0]?.relayer.addresses ?? [];
  const supported = supportedAnswer(
    config.networks.map((n) => n.network),
    relayers,
  );
  const health = await serviceHealth({ config, networks, rpcOf, startupInspections, coordination, now });
  const dashboard = config.dashboard
    ? createDashboard({
        configs: config.networks,
        runtimes: networks,
        health,
        playground: options.playground,
        apiKeys: config.apiKeys,
        historyBytes: config.dashboardFeed.historyBytes,
        maxStreams: config.dashboardFeed.maxStreams,
        streamLimits: { stallMs: config.dashboardFeed.stallMs, maxLifetimeMs: config.dashboardFeed.maxLifetimeMs },
        onStream: metrics.dashboardStream,
        allowedHosts: config.allowedHosts,
      })
    : undefined;
  let storeFallbackLoggedAt = -Infinity;
  const app = createApp({
    context,
    supported: () => supported,
    health,
    rateLimits: config.rateLimits,
    trustProxy: config.trustProxy,
    allowedHosts: config.allowedHosts,
    bodyLimitBytes: config.bodyLimitBytes,
    apiKeys: config.apiKeys,
    rateLimitStores: options.rateLimitStores ?? coordination.rateLimitStores,
    rateLimitStoreWaitMs: config.rateLimits.storeWaitMs,
    onRateLimitStoreFallback(limiter, reason) {
      metrics.rateLimitStoreFallback(limiter, reason);
      // Once a minute at most: a frozen database must not turn every request into a log line.
      const now = Date.now();
      if (now - storeFallbackLoggedAt < 60_000) return;
      storeFallbackLoggedAt = now;
      logger.warn({ limiter, reason, waitMs: config.rateLimits.storeWaitMs }, "rate limits: the shared store is slow or failing; counting in this instance's memory meanwhile");
    },
    discovery: { ledger: coordination.ledger, bounds: config.catalog },
    statusLookup: {
      ledger: coordination.ledger,
      served: new Map(config.networks.map((n) => [n.network, { token: n.token }])),
    },
    onOutcome(record) {
      metrics.outcome(record);
      // One line per verify/settle outcome.
      logger.info(
        { requestId: record.requestId, route: record.route, dialect: record.dialect, status: record.status, network: record.network, payer: record.payer, amount: record.amount, outcome: record.outcome, txHash: record.txHash, durationMs: Math.round(record.durationMs * 10) / 10 },
        record.route,
      );
      dashboard?.record(record);
      options.onOutcome?.(record);
    },
    onRateLimited(route, by) {
      metrics.rateLimited(route, by);
      options.onRateLimited?.(route, by);
    },
    onResponse: metrics.request,
    ...(stages ? { clock: stages } : {}),
    dashboard: dashboard?.router,
    hooks,
    ...(options.closedFor ? { closedFor: options.closedFor } : {}),
  });
  return {
    app,
    context,
    relayers,
    metrics,
    rateLimits: config.rateLimits,
    ...(dashboard ? { dashboard } : {}),
    coordination,
    ...(tracing ? { tracing } : {}),
    close: async (graceMs) => {
      await stopIndexes();
      for (const runtime of networks.values()) runtime.history?.stop();
      // Settles in flight may still need their transactions replaced: the relayers stop after them.
      await coordination.close(graceMs);
      await Promise.all([...networks.values()].map((runtime) => runtime.relayer.stop()));
      await recovery.close();
      closeTransports();
      // The spans of what just finished are exported before the SDK stops.
      await tracing?.close();
    },
  };
}

/** What settlement tells: the metrics, and `also` after them. */
function settlementObserver(metrics: FacilitatorMetrics, also: Partial<SettlementObserver> = {}): Omit<SettlementObserver, "ledgerFault"> {
  return {
    confirmationWait(network, seconds) {
      metrics.confirmationWait(network, seconds);
      also.confirmationWait?.(network, seconds);
    },
    rpcError(network) {
      metrics.rpcError(network);
      also.rpcError?.(network);
    },
    revertedGas(network, gas) {
      metrics.revertedGas(network, gas);
      also.revertedGas?.(network, gas);
    },
    verifyStateSource(network, source) {
      metrics.verifyStateSource(network, source);
      also.verifyStateSource?.(network, source);
    },
  };
}
