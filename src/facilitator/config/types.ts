// The facilitator's configuration as the rest of the kit reads it: what loadConfig returns.
import type { Hex } from "viem";
import type { NetworkName } from "../../protocol/networks.js";
import type { NetworkConfig } from "../../settlement/runtime.js";
import type { TracingSettings } from "../tracing.js";

export type { NetworkConfig } from "../../settlement/runtime.js";

/** The facilitator's whole configuration, parsed once at start-up. */
export interface FacilitatorConfig {
  host: string;
  port: number;
  networks: NetworkConfig[];
  /** Relayer private keys (used in turn). Never logged or returned. */
  relayerKeys: Hex[];
  confirmations: number;
  settleTimeoutMs: number;
  /** verify refuses an authorization that expires within this many seconds of the chain's clock. */
  settleMarginSeconds: number;
  /** verify may reuse a chain head read this many ms ago (0 = read it for every verify). */
  headCacheMs: number;
  rpcTimeoutMs: number;
  /** With several RPC URLs, each is pinged this often; one that failed lately is tried after the others. */
  rpcRankIntervalMs: number;
  /** How often receipts and blocks are polled. */
  pollingIntervalMs: number;
  rateLimits: RateLimitsConfig;
  /** Express `trust proxy`: false (socket address only), a hop count, or proxy addresses/subnets; never `true`. */
  trustProxy: false | number | string[];
  /**
   * `ALLOWED_HOSTS`: host names (lower case, no port) a request's `Host` may name besides the loopback
   * names; with any, every route refuses other hosts (421). Empty = no check (the local stack's dashboard
   * and playground still answer loopback names only).
   */
  allowedHosts: string[];
  bodyLimitBytes: number;
  /** Healthcheck fails when the latest block is older than this; 0 switches the check off. */
  healthMaxBlockAgeSeconds: number;
  /** A healthcheck answer is reused for this long (it costs several RPC reads per network); 0 = never. */
  healthCacheMs: number;
  /** The healthcheck answers within this long: a check still running then is reported from its last answer (slow), not waited for. */
  healthTimeoutMs: number;
  /** Healthcheck and start-up fail when a relayer holds less native gas than this (wei). */
  relayerMinBalanceWei: bigint;
  /** How far back (blocks) settle looks for the transaction that used an authorization. */
  logLookbackBlocks: number;
  /** A change of a chain's history (or its undoing) is believed when the chain still shows it this long after it first did. */
  chainHistoryConfirmMs: number;
  logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  /** Serve Prometheus metrics at `/metrics` on a listener of their own (`metricsHost:metricsPort`). */
  metrics: boolean;
  /** Serve the page that watches payments happen at `/` (`DASHBOARD=true`; off by default, on in the local stack). */
  dashboard: boolean;
  /** The dashboard's live feed: its streams and its history (docs/operations.md, "Dashboard"). */
  dashboardFeed: DashboardFeedConfig;
  /** What a settlement may cost the relayer (see docs/operations.md, "Threat model: what the relayer pays"). */
  relayerSafety: RelayerSafetyConfig;
  // --- The HTTP edge ---
  metricsHost: string;
  metricsPort: number;
  /** Relayer gauges (RPC reads) are read at most once per this many ms, however often `/metrics` is scraped. */
  metricsCacheMs: number;
  /**
   * `METRICS_VERIFY_STAGES`: time each verify's stages on the main thread's CPU clock and export the totals
   * (with Node's process metrics) on `/metrics`, for `npm run bench:verify`; off by default (nothing is timed then).
   */
  metricsVerifyStages: boolean;
  /**
   * Traces (OTEL_* variables: docs/operations.md, "Traces"): where spans are exported and which are kept;
   * absent when tracing is off (the default), and then nothing of OpenTelemetry's SDK is loaded.
   */
  tracing?: TracingSettings;
  /** Bounds on slow clients, for the service and the metrics listener. */
  http: HttpLimitsConfig;
  /** Seller API keys (hashes only); empty = no authentication, per-IP limits. */
  apiKeys: ApiKeyConfig[];
  /** The settlement ledger (docs/operations.md, "The settlement ledger, and several instances"). */
  ledger: LedgerConfig;
  /** A transaction's life: replacement of stuck ones, the fee cap (docs/operations.md, "A settlement is never stranded"). */
  lifecycle: LifecycleConfig;
  /** The token state index verify answers from (docs/operations.md, "The token state index"). */
  stateIndex: StateIndexConfig;
  /** The discovery catalog's bounds (docs/operations.md, "The discovery catalog"). */
  catalog: CatalogConfig;
}

/** The discovery catalog's bounds: past them, the entries with the fewest distinct payers, least recently paid, go. */
export interface CatalogConfig {
  /** `CATALOG_MAX_ENTRIES`: entries in all. */
  maxEntries: number;
  /** `CATALOG_MAX_ENTRIES_PER_SELLER`: entries of one payTo, at most `maxEntries`. */
  maxEntriesPerSeller: number;
}

/** Bounds of the dashboard's live feed. */
export interface DashboardFeedConfig {
  /** `DASHBOARD_MAX_STREAMS`: event streams open at once; more are answered 503. */
  maxStreams: number;
  /** `DASHBOARD_STREAM_STALL_SECONDS` in ms: a stream whose client takes nothing for this long is closed (it reconnects with Last-Event-ID). */
  stallMs: number;
  /** `DASHBOARD_STREAM_MAX_SECONDS` in ms: a stream is ended after this long (the browser reconnects where it left off). */
  maxLifetimeMs: number;
  /** `DASHBOARD_HISTORY_BYTES`: the kept rows' JSON, summed, at most. */
  historyBytes: number;
}

/** The token state index: verify's state kept from the token's logs. */
export interface StateIndexConfig {
  /** `STATE_INDEX`: on unless "false" (verify then reads the chain for every payment). */
  enabled: boolean;
  /** `STATE_INDEX_LOG_RANGE`: blocks per `eth_getLogs` of the nonce backfill, at most (providers cap it). */
  logRangeBlocks: number;
  /** `STATE_INDEX_MAX_NONCES`: spent nonces held in memory per network at most; older ones are asked of the ledger. */
  maxNonces: number;
  /** `CRONOS_*_INDEX_START_BLOCK`: the first block of the nonce backfill per network; default the token's deployment block. */
  startBlocks: Partial<Record<NetworkName, bigint>>;
}

/** How the relayer keeps its transactions moving. */
export interface LifecycleConfig {
  /**
   * `MAX_FEE_PER_GAS_GWEI` in wei: nothing is sent above it; new settles answer 503 while the network needs more.
   * Unset: each network's cap follows its chain, read at start-up (`defaultFeeCap` in src/chain/fees.ts).
   */
  maxFeePerGasWei?: bigint;
  /** `REPLACE_AFTER_SECONDS`: a transaction not mined within this much chain time is replaced (or re-broadcast). */
  replaceAfterSeconds: number;
}

/** Where settlements are recorded, and how instances share the relayer keys. */
export interface LedgerConfig {
  /** `DATABASE_URL`: PostgreSQL shared by several instances. Never logged (it may carry a password). */
  databaseUrl?: string;
  /** `LEDGER_FILE`: without a database URL, the embedded ledger's file, or `:memory:`. */
  file: string;
  /** `LEDGER_LEASE_TTL_SECONDS`: relayer key leases and instance heartbeats lapse after this. */
  leaseTtlMs: number;
  /** `RECONCILE_INTERVAL_MS`: how often this instance's reconciler looks at unfinished settlements. */
  reconcileIntervalMs: number;
  /** `LEDGER_POOL_SIZE`: PostgreSQL connections of this instance. */
  poolSize: number;
  /** `LEDGER_RETENTION_DAYS`: finished settlements (settled or failed) last changed longer ago are deleted; 0 = kept forever. */
  retentionDays: number;
  /** `LEDGER_STATEMENT_TIMEOUT_MS`: PostgreSQL cancels a statement or lock wait taking longer; a call not answered within this plus 500 ms fails (503 on settle). */
  statementTimeoutMs: number;
  /** `LEDGER_CONNECT_TIMEOUT_MS`: connecting to PostgreSQL, or waiting for a pooled connection, may take this long. */
  connectTimeoutMs: number;
}

/** Relayer safety: gas caps and the revert penalty. */
export interface RelayerSafetyConfig {
  /** `MAX_SETTLE_GAS`: a settlement whose estimate exceeds this is refused before sending. */
  maxSettleGas: bigint;
  /** `ERC1271_GAS_LIMIT`: gas limit of the `isValidSignature` call that checks a contract wallet's signature. */
  erc1271GasLimit: bigint;
  /** `REVERT_PENALTY_SECONDS`: how long a payer whose payment failed by its own doing (a revert, a cancel, a substitute under its nonce) is refused; 0 = off. */
  revertPenaltySeconds: number;
}

/** Per-minute request limits; 0 switches one off. */
export interface RateLimitsConfig {
  /** Per client IP, when no API keys are configured. */
  verifyPerMinute: number;
  settlePerMinute: number;
  /** Per API key (a key's own `verify=`/`settle=` wins), when keys are configured. */
  keyVerifyPerMinute: number;
  keySettlePerMinute: number;
  /** Per payer, counted only for settles whose signature is proven the payer's, with or without keys. */
  payerSettlePerMinute: number;
  /** Per client IP, in memory per instance: `/healthcheck`, `/v2/x402/supported` and the dashboard's API (no key needed for them). */
  publicPerMinute: number;
  /** `RATE_LIMIT_STORE_WAIT_MS`: how long a request waits for the shared (database) count before this instance's own count judges it. */
  storeWaitMs: number;
}

/** Time-outs and the connection cap of a listener. */
export interface HttpLimitsConfig {
  /** Receiving a whole request (headers and body) may take this long; not the answer (a settle may wait longer). */
  requestTimeoutMs: number;
  /** Receiving the request headers may take this long (also bounds a connection that sends nothing). */
  headersTimeoutMs: number;
  /** Connections held at once; further ones are closed on arrival (an idle keep-alive one gives way first). */
  maxConnections: number;
  /**
   * Connections one client (an IPv4 address, an IPv6 /56) may hold at once, below `maxConnections`;
   * 0 = no per-client cap. Default a tenth of `maxConnections` (at least 1, at most 100). Proxies named
   * in `TRUST_PROXY` by address or subnet are exempt; a hop count exempts nobody.
   */
  maxConnectionsPerClient: number;
  /**
   * How long a connection over its client's cap may wait for a place (its client's connections are
   * asked to close after their answers meanwhile); then it is answered 503. 0 = answered 503 at once.
   */
  connectionQueueMs: number;
}

/** One seller API key, as configuration keeps it: never the key itself. */
export interface ApiKeyConfig {
  /** The first 12 hex digits of the key's SHA-256: what logs and rate-limit stores show. */
  id: string;
  /** SHA-256 of the key, hex. */
  sha256: string;
  /** This key's own limits (`verify=N settle=N` in the key file), else the RATE_LIMIT_KEY_* defaults. */
  verifyPerMinute?: number;
  settlePerMinute?: number;
  /**
   * The payTo addresses of the seller holding this key (`payTo=0x…` in the key file, lower case): its
   * settlements to them, and only those, are listed in the discovery catalog. None: nothing it settles is listed.
   */
  payTo?: string[];
}
