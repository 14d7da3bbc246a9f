import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createPublicClient, http, webSocket, type Address, type PublicClient, type Transport } from "viem";
import type { Express } from "express";
import type { Store } from "express-rate-limit";
import { ChainState } from "../chain/state.js";
import { Relayer } from "../chain/relayer.js";
import { domainSeparator } from "../chain/signature.js";
import type { NetworkName } from "../protocol/networks.js";
import type { FacilitatorConfig } from "./config.js";
import { supportedAnswer } from "./dialects/index.js";
import { healthReport, inspectNetwork, readDomain } from "./health.js";
import { createApp, type OutcomeRecord } from "./http/app.js";
import { createDashboard, type Dashboard, type DashboardPlayground } from "./dashboard/index.js";
import { MemoryInFlightGuard, type InFlightGuard } from "./in-flight.js";
import { silentLogger, type Logger } from "./logger.js";
import { createMetrics, type FacilitatorMetrics } from "./metrics.js";
import type { FacilitatorContext, NetworkRuntime } from "./runtime.js";

/** Options of {@link createFacilitator} and {@link startFacilitator}. */
export interface StartFacilitatorOptions {
  /** viem transports per network, e.g. `custom(provider)` for an in-process chain; default `http(rpcUrl)`. */
  transports?: Partial<Record<NetworkName, Transport>>;
  logger?: Logger;
  inFlight?: InFlightGuard;
  rateLimitStores?: { verify?: Store; settle?: Store };
  onOutcome?: (outcome: OutcomeRecord) => void;
  onRateLimited?: (route: string) => void;
  /** Also export Node's process metrics (a standalone process; not for embedded use). */
  defaultMetrics?: boolean;
  /** The local stack's buyers and try-it panel for the dashboard (when `config.dashboard`). Never in production. */
  playground?: DashboardPlayground;
}

/** A facilitator assembled but not listening: for tests (supertest) and embedding. */
export interface Facilitator {
  app: Express;
  context: FacilitatorContext;
  relayers: Address[];
  metrics: FacilitatorMetrics;
  /** Requests per client IP and minute; 0 = no limit. */
  rateLimits: FacilitatorConfig["rateLimits"];
  /** The page at `/` and its live feed, when `config.dashboard`. */
  dashboard?: Dashboard;
}

/** A start-up check failed: the message is one line naming the network, the variable and what was found. */
export class StartupError extends Error {
  override name = "StartupError";
}

function transportFor(config: FacilitatorConfig, network: NetworkName, rpcUrl: string | undefined, injected?: Transport): Transport {
  // An in-process chain does not drop requests: a revert (JSON-RPC -32603 there) must not be retried.
  if (injected) return (parameters) => injected({ ...parameters, retryCount: 0 });
  if (!rpcUrl) throw new StartupError(`${network}: no RPC URL and no embedded chain`);
  const options = { timeout: config.rpcTimeoutMs, retryCount: 1 };
  return /^wss?:/.test(rpcUrl) ? webSocket(rpcUrl, options) : http(rpcUrl, { ...options, batch: { wait: 0 } });
}

/**
 * Assembles the facilitator: clients per network, start-up checks (chain id, token code and
 * EIP-712 domain, relayer gas), relayers, and the HTTP app. Throws {@link StartupError} at the first
 * failed check.
 */
export async function createFacilitator(config: FacilitatorConfig, options: StartFacilitatorOptions = {}): Promise<Facilitator> {
  const logger = options.logger ?? silentLogger;
  const networks = new Map<NetworkName, NetworkRuntime>();
  const clients = new Map<NetworkName, PublicClient>();
  for (const network of config.networks) {
    const transport = transportFor(config, network.network, network.rpcUrl, options.transports?.[network.network]);
    const client = createPublicClient({ transport, pollingInterval: config.pollingIntervalMs, cacheTime: 0 }) as PublicClient;
    clients.set(network.network, client);
  }
  // Checks run in parallel; the first problem found stops start-up.
  await Promise.all(
    config.networks.map(async (network) => {
      const client = clients.get(network.network)!;
      const relayer = new Relayer({ client, chainId: network.chainId, privateKeys: config.relayerKeys });
      const inspection = await inspectNetwork({
        client,
        config: network,
        relayers: relayer.addresses,
        relayerMinBalanceWei: config.relayerMinBalanceWei,
        maxBlockAgeSeconds: 0,
      });
      const first = inspection.problems[0];
      if (first) throw new StartupError(`${network.network}: ${first.variable}: ${first.message}`);
      const domain = await readDomain(client, network.token);
      networks.set(network.network, {
        config: network,
        client,
        relayer,
        state: new ChainState(client, network.token),
        separator: domainSeparator({ ...domain, chainId: network.chainId, verifyingContract: network.token }),
      });
    }),
  );

  const metrics = createMetrics({ defaults: options.defaultMetrics ?? false });
  metrics.watchRelayers(networks);
  const context: FacilitatorContext = {
    networks,
    settleMarginSeconds: config.settleMarginSeconds,
    headCacheMs: config.headCacheMs,
    confirmations: config.confirmations,
    settleTimeoutMs: config.settleTimeoutMs,
    pollingIntervalMs: config.pollingIntervalMs,
    logLookbackBlocks: config.logLookbackBlocks,
    inFlight: options.inFlight ?? new MemoryInFlightGuard(),
    logger,
    observe: { confirmationWait: metrics.confirmationWait, rpcError: metrics.rpcError },
  };
  const relayers = [...networks.values()][0]?.relayer.addresses ?? [];
  const supported = supportedAnswer(
    config.networks.map((n) => n.network),
    relayers,
  );
  const health = memoize(config.healthCacheMs, () =>
    healthReport(
      [...networks.values()].map((runtime) => () =>
        inspectNetwork({
          client: runtime.client,
          config: runtime.config,
          relayers: runtime.relayer.addresses,
          relayerMinBalanceWei: config.relayerMinBalanceWei,
          maxBlockAgeSeconds: config.healthMaxBlockAgeSeconds,
        }),
      ),
    ),
  );
  const dashboard = config.dashboard
    ? createDashboard({ configs: config.networks, runtimes: networks, health, playground: options.playground })
    : undefined;
  const app = createApp({
    context,
    supported: () => supported,
    health,
    rateLimits: config.rateLimits,
    trustProxy: config.trustProxy,
    bodyLimitBytes: config.bodyLimitBytes,
    rateLimitStores: options.rateLimitStores,
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
    onRateLimited(route) {
      metrics.rateLimited(route);
      options.onRateLimited?.(route);
    },
    onResponse: metrics.request,
    metrics: config.metrics ? metrics.registry : undefined,
    dashboard: dashboard?.router,
  });
  return { app, context, relayers, metrics, rateLimits: config.rateLimits, ...(dashboard ? { dashboard } : {}) };
}

/**
 * Shares one run of `task` between callers for `ttlMs` after it started (and while it runs), so an
 * unauthenticated endpoint that reads the chain cannot be turned into a flood of RPC requests.
 */
function memoize<T>(ttlMs: number, task: () => Promise<T>): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | undefined;
  return () => {
    const now = Date.now();
    if (!last || now - last.at >= ttlMs) {
      const value = task();
      last = { at: now, value };
      value.catch(() => (last = undefined));
    }
    return last.value;
  };
}

/** A listening facilitator. */
export interface RunningFacilitator {
  url: string;
  relayers: Address[];
  facilitator: Facilitator;
  /** Stops taking requests, lets settles in flight finish (bounded by `graceMs`), closes connections. */
  close(graceMs?: number): Promise<void>;
}

/** Assembles the facilitator and listens on `config.host:config.port` (port 0 = any free port). */
export async function startFacilitator(config: FacilitatorConfig, options: StartFacilitatorOptions = {}): Promise<RunningFacilitator> {
  const facilitator = await createFacilitator(config, options);
  const server: Server = createServer(facilitator.app);
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "EADDRINUSE") {
        reject(new StartupError(`PORT: ${config.host}:${config.port} is already in use; choose another port (PORT=… or --port …)`));
      } else reject(error);
    });
    server.listen(config.port, config.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = config.host.includes(":") ? `[${config.host}]` : config.host;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}`,
    relayers: facilitator.relayers,
    facilitator,
    close(graceMs = 30_000) {
      closing ??= new Promise<void>((resolve) => {
        // Open dashboard streams never go idle: end them, or closing would wait out the grace.
        facilitator.dashboard?.close();
        const timer = setTimeout(() => server.closeAllConnections(), graceMs);
        // Keep-alive connections go idle as their last request (a settle in flight) is answered: close them then.
        const sweep = setInterval(() => server.closeIdleConnections(), 100);
        server.close(() => {
          clearTimeout(timer);
          clearInterval(sweep);
          resolve();
        });
        server.closeIdleConnections();
      });
      return closing;
    },
  };
}
