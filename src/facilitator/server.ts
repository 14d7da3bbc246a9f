import type { Server } from "node:http";
import { createPublicClient, type Address, type PublicClient, type Transport } from "viem";
import type { Express } from "express";
import { ChainState } from "../chain/state.js";
import { ChainHistory, TokenIndex } from "../state/index.js";
import { Relayer, type RelayerEvent } from "../chain/relayer/index.js";
import { isWebSocketUrl, rpcTransport, type RpcTransport } from "../chain/rpc-transport.js";
import { domainSeparator } from "../chain/signature.js";
import type { NetworkName } from "../protocol/networks.js";
import { ENV_PREFIX, type FacilitatorConfig, type NetworkConfig } from "./config.js";
import { supportedAnswer } from "./dialects/index.js";
import { boundedCheck, healthReport, inspectNetwork, lateInspection, readDomain, type LedgerInspection, type NetworkInspection, type RpcEndpointClient } from "./health.js";
import { createApp, type OutcomeRecord } from "./http/app.js";
import { createDashboard, type Dashboard, type DashboardPlayground } from "./dashboard/index.js";
import type { QuotaHolder } from "./http/edge.js";
import { connectionCounts, createListener, listenOn } from "./http/listen.js";
import { metricsEndpoint } from "./http/metrics-endpoint.js";
import type { RateLimitStores } from "./http/rate-limit.js";
import { redactingLogger, silentLogger, type Logger } from "./logger.js";
import { memoizeFor } from "./memoize.js";
import { startCoordination, type Coordination } from "./coordination.js";
import type { Ledger } from "../ledger/types.js";
import { createMetrics, type FacilitatorMetrics } from "./metrics.js";
import type { FacilitatorContext, NetworkRuntime } from "../settlement/runtime.js";
import { settlementChain } from "../settlement/chain.js";
import { StageClock } from "../settlement/stages.js";

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
}

/** A facilitator assembled but not listening: for tests (supertest) and embedding. */
export interface Facilitator {
  app: Express;
  context: FacilitatorContext<Logger>;
  relayers: Address[];
  metrics: FacilitatorMetrics;
  /** Requests per minute per client IP (or API key, or payer); 0 = no limit. */
  rateLimits: FacilitatorConfig["rateLimits"];
  /** The page at `/` and its live feed, when `config.dashboard`. */
  dashboard?: Dashboard;
  /** The ledger, key leases, settlement sender and reconciler of this instance. */
  coordination: Coordination;
  /** Lets settles in flight finish (up to `graceMs`), releases the relayer key leases, closes the ledger. */
  close(graceMs?: number): Promise<void>;
}

/** A start-up check failed: the message is one line naming the network, the variable and what was found. */
export class StartupError extends Error {
  override name = "StartupError";
}

/** A network's transport: the injected one, or its RPC URLs (several: failover). */
function transportFor(config: FacilitatorConfig, network: NetworkConfig, metrics: FacilitatorMetrics, injected?: Transport): RpcTransport {
  // An in-process chain does not drop requests: a revert (JSON-RPC -32603 there) must not be retried.
  if (injected) return { transport: (parameters) => injected({ ...parameters, retryCount: 0 }), endpoints: [], states: async () => [], snapshot: () => [], close() {} };
  if (network.rpcUrls.length === 0) throw new StartupError(`${network.network}: no RPC URL and no embedded chain`);
  return rpcTransport({
    urls: network.rpcUrls,
    timeoutMs: config.rpcTimeoutMs,
    rankIntervalMs: config.rpcRankIntervalMs,
    chainId: network.chainId,
    onPing: (endpoint, up) => metrics.rpcEndpointUp(network.network, endpoint.label, up),
  });
}

/** What the relayer did to keep a transaction moving: counted, and logged (a round that failed only at debug level). */
function relayerEvent(network: NetworkName, event: RelayerEvent, metrics: FacilitatorMetrics, logger: Logger): void {
  metrics.relayerEvent(network, event);
  const { kind, from } = event;
  switch (kind) {
    case "roundFailed":
      logger.debug({ network, relayer: from, err: String(event.error) }, "relayer: lifecycle round failed; the next one tries again");
      return;
    case "capped":
      logger.warn(
        { network, relayer: from, nonce: event.nonce, txHash: event.hash, neededWei: String(event.neededWei), capWei: String(event.capWei) },
        "relayer: transaction not mined, and no replacement under MAX_FEE_PER_GAS_GWEI; it keeps its price",
      );
      return;
    case "replaced":
      logger.info({ network, relayer: from, nonce: event.nonce, txHash: event.hash, replaces: event.replaces, feeCapWei: String(event.feeCapWei) }, "relayer: transaction replaced");
      return;
    case "gapFilled":
      logger.warn({ network, relayer: from, nonce: event.nonce, txHash: event.hash, by: event.by }, "relayer: nonce gap filled");
      return;
    default:
      logger.warn({ network, relayer: from, nonce: event.nonce, txHash: event.hash }, `relayer: transaction ${kind}`);
  }
}

/**
 * With several RPC URLs, runs the start-up checks on each: one that answers wrongly (another chain
 * id, no token, another domain) stops start-up, naming it; one that does not answer is logged and
 * left to the ranking while another passes every check.
 */
async function checkEndpoints(
  config: FacilitatorConfig,
  network: NetworkConfig,
  endpoints: readonly RpcEndpointClient[],
  relayers: readonly Address[],
  logger: Logger,
): Promise<NetworkInspection> {
  const inspections = await Promise.all(
    endpoints.map((endpoint) =>
      inspectNetwork({
        client: endpoint.client,
        config: network,
        relayers,
        relayerMinBalanceWei: config.relayerMinBalanceWei,
        maxBlockAgeSeconds: 0,
        rpcTimeoutMs: config.rpcTimeoutMs,
        rpc: `the RPC at ${endpoint.label}`,
      }),
    ),
  );
  const answered = inspections.filter((inspection) => inspection.chainId !== undefined);
  for (const inspection of answered) {
    const first = inspection.problems[0];
    if (first) throw new StartupError(`${network.network}: ${first.variable}: ${first.message}`);
  }
  const silent = inspections.filter((inspection) => inspection.chainId === undefined).map((inspection) => inspection.problems[0]!);
  if (answered.length === 0) {
    throw new StartupError(`${network.network}: ${silent[0]!.variable}: no RPC answers: ${silent.map((p) => p.message).join("; ")}`);
  }
  for (const problem of silent) logger.warn({ network: network.network, problem: problem.message }, "an RPC URL does not answer at start-up; the others serve");
  return answered[0]!;
}

/**
 * Assembles the facilitator: clients per network, start-up checks (chain id, token code and
 * EIP-712 domain, relayer gas), relayers, and the HTTP app. Throws {@link StartupError} at the first
 * failed check.
 */
export async function createFacilitator(config: FacilitatorConfig, options: StartFacilitatorOptions = {}): Promise<Facilitator> {
  // Every line passes through URL redaction: an RPC error text may carry the URL and its API key.
  const logger = redactingLogger(options.logger ?? silentLogger);
  const now = options.now ?? Date.now;
  const networks = new Map<NetworkName, NetworkRuntime>();
  const clients = new Map<NetworkName, PublicClient>();
  const stages = config.metricsVerifyStages ? new StageClock() : undefined;
  // The verify budget reads the event loop's delay and the GC pauses beside the stages.
  const metrics = createMetrics({ defaults: (options.defaultMetrics ?? false) || stages !== undefined, cacheMs: config.metricsCacheMs, now, stages });
  // Each RPC URL on its own (several per network: failover), for the checks of each.
  const endpoints = new Map<NetworkName, RpcEndpointClient[]>();
  const transports: RpcTransport[] = [];
  const rpcOf = new Map<NetworkName, RpcTransport>();
  // Each network's start-up checks: what the healthcheck shows until its own first checks finish.
  const startupInspections = new Map<NetworkName, NetworkInspection>();
  const closeTransports = () => transports.forEach((transport) => transport.close());
  for (const network of config.networks) {
    const rpc = transportFor(config, network, metrics, options.transports?.[network.network]);
    transports.push(rpc);
    rpcOf.set(network.network, rpc);
    const client = createPublicClient({ transport: rpc.transport, pollingInterval: config.pollingIntervalMs, cacheTime: 0 }) as PublicClient;
    clients.set(network.network, client);
    endpoints.set(
      network.network,
      rpc.endpoints.map((endpoint) => ({ label: endpoint.label, client: createPublicClient({ transport: endpoint.transport, cacheTime: 0 }) as PublicClient })),
    );
  }
  // Checks run in parallel; the first problem found stops start-up.
  await Promise.all(
    config.networks.map(async (network) => {
      const client = clients.get(network.network)!;
      const relayer = new Relayer({
        client,
        chainId: network.chainId,
        privateKeys: config.relayerKeys,
        maxFeePerGasWei: config.lifecycle.maxFeePerGasWei,
        replaceAfterSeconds: config.lifecycle.replaceAfterSeconds,
        pollingIntervalMs: config.pollingIntervalMs,
        onEvent: (event) => relayerEvent(network.network, event, metrics, logger),
        // Its keys send only under the ledger's leases (coordination gives and takes them back).
        leased: true,
      });
      const several = endpoints.get(network.network)!;
      if (several.length > 1) {
        startupInspections.set(network.network, await checkEndpoints(config, network, several, relayer.addresses, logger));
      } else {
        const inspection = await inspectNetwork({
          client,
          config: network,
          relayers: relayer.addresses,
          relayerMinBalanceWei: config.relayerMinBalanceWei,
          maxBlockAgeSeconds: 0,
          rpcTimeoutMs: config.rpcTimeoutMs,
        });
        const first = inspection.problems[0];
        if (first) throw new StartupError(`${network.network}: ${first.variable}: ${first.message}`);
        startupInspections.set(network.network, inspection);
      }
      const domain = await readDomain(client, network.token);
      networks.set(network.network, {
        config: network,
        client,
        relayer,
        state: new ChainState(client, network.token),
        payments: settlementChain({
          client,
          chainId: network.chainId,
          logLookbackBlocks: config.logLookbackBlocks,
          // The index knows the block of every spend since the token's deployment (when it can vouch for it).
          index: () => networks.get(network.network)?.index,
        }),
        separator: domainSeparator({ ...domain, chainId: network.chainId, verifyingContract: network.token }),
      });
    }),
  ).catch((error: unknown) => {
    closeTransports();
    throw error;
  });

  metrics.watchRelayers(networks);
  for (const runtime of networks.values()) runtime.relayer.start();
  let coordination: Coordination;
  try {
    coordination = await startCoordination({
      config,
      networks,
      logger,
      metrics,
      observe: () => context.observe,
      ...(options.ledger ? { ledger: options.ledger } : {}),
      prepare: (ledger) => bindHistories(networks, ledger, metrics, logger),
    });
  } catch (error) {
    await Promise.all([...networks.values()].map((runtime) => runtime.relayer.stop()));
    for (const runtime of networks.values()) runtime.history?.stop();
    closeTransports();
    if (error instanceof StartupError) throw error;
    throw new StartupError(`${config.ledger.databaseUrl ? "DATABASE_URL" : "LEDGER_FILE"}: the settlement ledger cannot be opened: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  if (config.stateIndex.enabled) {
    for (const runtime of networks.values()) runtime.index = startIndex(config, runtime, coordination.ledger, metrics, logger);
  }
  const stopIndexes = () => Promise.all([...networks.values()].map((runtime) => runtime.index?.stop()));
  const context: FacilitatorContext<Logger> = {
    networks,
    settleMarginSeconds: config.settleMarginSeconds,
    headCacheMs: config.headCacheMs,
    confirmations: config.confirmations,
    settleTimeoutMs: config.settleTimeoutMs,
    pollingIntervalMs: config.pollingIntervalMs,
    relayerSafety: config.relayerSafety,
    ledger: coordination.ledger,
    settlements: coordination.settlements,
    logger,
    ...(stages ? { stages } : {}),
    observe: { confirmationWait: metrics.confirmationWait, rpcError: metrics.rpcError, revertedGas: metrics.revertedGas, verifyStateSource: metrics.verifyStateSource },
  };
  const relayers = [...networks.values()][0]?.relayer.addresses ?? [];
  const supported = supportedAnswer(
    config.networks.map((n) => n.network),
    relayers,
  );
  // Each part of the healthcheck answers within HEALTH_TIMEOUT_MS: a network whose RPC hangs, or a
  // database that does not answer, is reported from its last answer (slow) rather than waited for.
  const networkChecks = [...networks.values()].map((runtime) => {
    const rpc = rpcOf.get(runtime.config.network)!;
    return boundedCheck(
      () =>
        inspectNetwork({
          client: runtime.client,
          config: runtime.config,
          relayers: runtime.relayer.addresses,
          relayerMinBalanceWei: config.relayerMinBalanceWei,
          maxBlockAgeSeconds: config.healthMaxBlockAgeSeconds,
          rpcTimeoutMs: config.rpcTimeoutMs,
          nowMs: now(),
          rpcStates: rpc.states,
          ...(runtime.index ? { index: runtime.index } : {}),
        }),
      config.healthTimeoutMs,
      (last, waitedMs) => lateInspection(runtime.config, runtime.relayer.addresses, last, waitedMs, rpc.snapshot()),
      startupInspections.get(runtime.config.network),
    );
  });
  const ledgerCheck = boundedCheck(
    coordination.inspect,
    config.healthTimeoutMs,
    (last, waitedMs): LedgerInspection => ({
      ...(last?.value ?? { backend: coordination.ledger.backend, location: "", reachable: false, migrations: { applied: 0, expected: 0 }, shared: coordination.ledger.backend === "postgres", leases: [] }),
      state: "slow",
      error: `no answer within ${waitedMs} ms`,
    }),
    await coordination.inspect().catch(() => undefined),
  );
  const health = memoizeFor(config.healthCacheMs, () => healthReport(networkChecks, ledgerCheck), now);
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
    dashboard: dashboard?.router,
  });
  return {
    app,
    context,
    relayers,
    metrics,
    rateLimits: config.rateLimits,
    ...(dashboard ? { dashboard } : {}),
    coordination,
    close: async (graceMs) => {
      await stopIndexes();
      for (const runtime of networks.values()) runtime.history?.stop();
      // Settles in flight may still need their transactions replaced: the relayers stop after them.
      await coordination.close(graceMs);
      await Promise.all([...networks.values()].map((runtime) => runtime.relayer.stop()));
      closeTransports();
    },
  };
}

/** How often each chain's history is compared with the ledger's trail of it (and a checkpoint recorded). */
const HISTORY_CHECK_MS = 10_000;

/**
 * Binds the ledger's rows of each network's chain to the chain's history before anything is served or sent: rows of
 * another history (a local chain restarted or reverted) are set aside (docs/operations.md, "The chain's identity").
 */
async function bindHistories(networks: ReadonlyMap<NetworkName, NetworkRuntime>, ledger: Ledger, metrics: FacilitatorMetrics, logger: Logger): Promise<void> {
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
        checkIntervalMs: HISTORY_CHECK_MS,
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
function startIndex(config: FacilitatorConfig, runtime: NetworkRuntime, ledger: Ledger, metrics: FacilitatorMetrics, logger: Logger): TokenIndex {
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

/** A listening facilitator. */
export interface RunningFacilitator {
  url: string;
  /** Where Prometheus metrics are served (`…/metrics`, its own listener); absent with METRICS=false. */
  metricsUrl?: string;
  relayers: Address[];
  facilitator: Facilitator;
  /** Stops taking requests, lets settles in flight finish (bounded by `graceMs`), closes connections. */
  close(graceMs?: number): Promise<void>;
}

/**
 * Assembles the facilitator and listens on `config.host:config.port` (port 0 = any free port), and
 * unless `config.metrics` is off serves `/metrics` on `config.metricsHost:config.metricsPort`.
 */
export async function startFacilitator(config: FacilitatorConfig, options: StartFacilitatorOptions = {}): Promise<RunningFacilitator> {
  const facilitator = await createFacilitator(config, options);
  const { logger } = facilitator.context;
  const listener = (name: string, handler: Parameters<typeof createListener>[0]) =>
    createListener(handler, {
      name,
      limits: config.http,
      logger,
      // The connections of a proxy named in TRUST_PROXY carry many clients: no per-client cap for them. A
      // hop count names no proxy (Express trusts every address at hop 0 then): it exempts nobody.
      isTrustedProxy: Array.isArray(config.trustProxy)
        ? (address) => (facilitator.app.get("trust proxy fn") as (address: string, hop: number) => boolean)(address, 0)
        : () => false,
      onDropped: (reason) => facilitator.metrics.connectionDropped(name, reason),
      onIdleClosed: () => facilitator.metrics.idleConnectionClosed(name),
      onWaiting: (event) => facilitator.metrics.connectionWaiting(name, event),
    });
  const servers: Server[] = [];
  const bind = async (server: Server, host: string, port: number, variable: string, hint: string) => {
    try {
      const url = await listenOn(server, host, port);
      servers.push(server);
      return url;
    } catch (error) {
      await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
      await facilitator.close(0);
      if ((error as NodeJS.ErrnoException).code === "EADDRINUSE") {
        throw new StartupError(`${variable}: ${host}:${port} is already in use; choose another port (${hint})`);
      }
      throw error;
    }
  };
  const server = listener("service", facilitator.app);
  facilitator.metrics.watchConnections("service", () => connectionCounts(server));
  const url = await bind(server, config.host, config.port, "PORT", "PORT=… or --port …");
  const metricsUrl = config.metrics
    ? await bind(listener("metrics", metricsEndpoint(facilitator.metrics.registry, logger)), config.metricsHost, config.metricsPort, "METRICS_PORT", "METRICS_PORT=…, or METRICS=false")
    : undefined;
  let closing: Promise<void> | undefined;
  return {
    url,
    ...(metricsUrl ? { metricsUrl: `${metricsUrl}/metrics` } : {}),
    relayers: facilitator.relayers,
    facilitator,
    close(graceMs = 30_000) {
      // Open dashboard streams never go idle: end them, or closing would wait out the grace.
      facilitator.dashboard?.close();
      closing ??= Promise.all(
        servers.map(
          (each) =>
            new Promise<void>((resolve) => {
              const timer = setTimeout(() => each.closeAllConnections(), graceMs);
              // Keep-alive connections go idle as their last request (a settle in flight) is answered: close them then.
              const sweep = setInterval(() => each.closeIdleConnections(), 100);
              each.close(() => {
                clearTimeout(timer);
                clearInterval(sweep);
                resolve();
              });
              each.closeIdleConnections();
            }),
        ),
      )
        // Then release the relayer key leases (others take the keys at once) and close the ledger.
        .then(() => facilitator.close(graceMs));
      return closing;
    },
  };
}
