import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { z } from "zod";
import { getAddress, isAddress, isHex, parseGwei, type Address, type Hex } from "viem";
import { NETWORKS, NETWORK_NAMES, canonicalNetwork, type NetworkName } from "../protocol/networks.js";
import { parseHost } from "./http/hosts.js";
import type { NetworkConfig } from "../settlement/runtime.js";

export type { NetworkConfig } from "../settlement/runtime.js";

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
  /** `MAX_FEE_PER_GAS_GWEI` in wei: nothing is sent above it; new settles answer 503 while the network needs more. */
  maxFeePerGasWei: bigint;
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
}

/** A configuration problem; the message names the variable and what was found. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

const intVar = (fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .optional()
    .transform((value, ctx) => {
      if (value === undefined || value.trim() === "") return fallback;
      const n = Number(value);
      if (!Number.isInteger(n) || n < min || n > max) {
        const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
        ctx.addIssue({ code: "custom", message: `must be an integer ${range}, got "${value}"` });
        return z.NEVER;
      }
      return n;
    });

/** An integer variable with no fixed default (undefined when unset): its default depends on another. */
const optionalIntVar = (min = 0) =>
  z
    .string()
    .optional()
    .transform((value, ctx) => {
      if (value === undefined || value.trim() === "") return undefined;
      const n = Number(value);
      if (!Number.isInteger(n) || n < min) {
        ctx.addIssue({ code: "custom", message: `must be an integer >= ${min}, got "${value}"` });
        return z.NEVER;
      }
      return n;
    });

const optionalString = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === "" ? undefined : value.trim()));

const envSchema = z.object({
  PORT: intVar(8402, 0, 65_535),
  HOST: optionalString.transform((v) => v ?? "127.0.0.1"),
  FACILITATOR_NETWORKS: optionalString,
  CRONOS_TESTNET_RPC_URL: optionalString,
  CRONOS_MAINNET_RPC_URL: optionalString,
  CRONOS_TESTNET_TOKEN_ADDRESS: optionalString,
  CRONOS_MAINNET_TOKEN_ADDRESS: optionalString,
  CRONOS_TESTNET_TOKEN_NAME: optionalString,
  CRONOS_MAINNET_TOKEN_NAME: optionalString,
  CRONOS_TESTNET_TOKEN_VERSION: optionalString,
  CRONOS_MAINNET_TOKEN_VERSION: optionalString,
  RELAYER_PRIVATE_KEY: optionalString,
  RELAYER_PRIVATE_KEY_FILE: optionalString,
  CONFIRMATIONS: intVar(1, 1),
  SETTLE_TIMEOUT_SECONDS: intVar(120, 1),
  SETTLE_MARGIN_SECONDS: intVar(6),
  HEAD_CACHE_MS: intVar(250),
  RPC_TIMEOUT_MS: intVar(10_000, 1),
  RPC_RANK_INTERVAL_MS: intVar(1_000, 50),
  POLLING_INTERVAL_MS: intVar(250, 1),
  RATE_LIMIT_VERIFY_PER_MINUTE: intVar(10),
  RATE_LIMIT_SETTLE_PER_MINUTE: intVar(5),
  TRUST_PROXY: optionalString,
  ALLOWED_HOSTS: optionalString,
  BODY_LIMIT_BYTES: intVar(64 * 1024, 1024),
  HEALTH_MAX_BLOCK_AGE_SECONDS: intVar(0),
  HEALTH_CACHE_MS: intVar(1_000),
  HEALTH_TIMEOUT_MS: intVar(750, 50, 60_000),
  RELAYER_MIN_BALANCE_WEI: optionalString,
  LOG_LOOKBACK_BLOCKS: intVar(10_000, 1),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).optional(),
  METRICS: z.enum(["true", "false"]).optional(),
  DASHBOARD: z.enum(["true", "false"], { error: 'must be "true" or "false"' }).optional(),
  DASHBOARD_MAX_STREAMS: intVar(100, 1, 10_000),
  DASHBOARD_STREAM_STALL_SECONDS: intVar(10, 1, 3_600),
  DASHBOARD_STREAM_MAX_SECONDS: intVar(600, 1, 86_400),
  DASHBOARD_HISTORY_BYTES: intVar(1024 * 1024, 16 * 1024, 256 * 1024 * 1024),
  // Relayer safety (defaults sized from measured honest settlements: docs/operations.md)
  MAX_SETTLE_GAS: intVar(250_000, 21_000),
  ERC1271_GAS_LIMIT: intVar(150_000, 21_000),
  REVERT_PENALTY_SECONDS: intVar(600),
  // --- The HTTP edge: slow clients, API keys, per-key and per-payer limits, the metrics listener ---
  REQUEST_TIMEOUT_MS: intVar(30_000, 100),
  HEADERS_TIMEOUT_MS: intVar(10_000, 100),
  MAX_CONNECTIONS: intVar(1_000, 1),
  MAX_CONNECTIONS_PER_CLIENT: optionalIntVar(),
  CONNECTION_QUEUE_MS: intVar(5_000, 0, 60_000),
  RATE_LIMIT_PUBLIC_PER_MINUTE: intVar(600),
  API_KEYS: optionalString,
  API_KEYS_FILE: optionalString,
  RATE_LIMIT_KEY_VERIFY_PER_MINUTE: intVar(600),
  RATE_LIMIT_KEY_SETTLE_PER_MINUTE: intVar(120),
  RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: intVar(120),
  RATE_LIMIT_STORE_WAIT_MS: intVar(50, 1, 10_000),
  METRICS_HOST: optionalString.transform((v) => v ?? "127.0.0.1"),
  METRICS_PORT: intVar(9464, 0, 65_535),
  METRICS_CACHE_MS: intVar(5_000),
  METRICS_VERIFY_STAGES: z.enum(["true", "false"], { error: 'must be "true" or "false"' }).optional(),
  // Settlement ledger
  DATABASE_URL: optionalString,
  LEDGER_FILE: optionalString,
  LEDGER_LEASE_TTL_SECONDS: intVar(15, 1),
  RECONCILE_INTERVAL_MS: intVar(2_000, 50),
  LEDGER_POOL_SIZE: intVar(10, 2),
  LEDGER_RETENTION_DAYS: intVar(0, 0, 36_500),
  // The discovery catalog
  CATALOG_MAX_ENTRIES: intVar(100_000, 1, 10_000_000),
  CATALOG_MAX_ENTRIES_PER_SELLER: intVar(1_000, 1),
  LEDGER_STATEMENT_TIMEOUT_MS: intVar(1_000, 100, 600_000),
  LEDGER_CONNECT_TIMEOUT_MS: intVar(1_500, 100, 600_000),
  // A transaction's life
  MAX_FEE_PER_GAS_GWEI: optionalString,
  REPLACE_AFTER_SECONDS: intVar(3, 1),
  // The token state index
  STATE_INDEX: z.enum(["true", "false"], { error: 'must be "true" or "false"' }).optional(),
  STATE_INDEX_LOG_RANGE: intVar(2_000, 1, 1_000_000),
  STATE_INDEX_MAX_NONCES: intVar(500_000, 1_000, 1_000_000_000),
  CRONOS_TESTNET_INDEX_START_BLOCK: intVar(-1, 0),
  CRONOS_MAINNET_INDEX_START_BLOCK: intVar(-1, 0),
  // Names the unknown-variable check leaves alone (comma-separated): another program's variable that looks like one of ours.
  UNCHECKED_VARIABLES: optionalString,
});

/**
 * Variables in the facilitator's own namespaces: one that the schema does not know (a typo such as
 * `CRONOS_MAINNET_RPC`) stops start-up instead of being ignored. So does any other variable within a
 * typo of a known name ({@link looksLikeOurs}) or saying one in other words ({@link sameMeaning}) and,
 * while `DATABASE_URL` is unset, any `DATABASE_*`: each would otherwise drop a setting, or leave the
 * instance on its own embedded ledger, apart from its cluster.
 */
const OWN_NAMESPACE = /^(CRONOS_|RELAYER_|RATE_LIMIT_|METRICS_|API_KEYS|LEDGER_|RECONCILE_|DASHBOARD|MAX_CONNECTIONS|CONNECTION_|HEALTH_|SETTLE_|STATE_INDEX|CATALOG_)/;
const KNOWN_VARIABLES = Object.keys(envSchema.shape);

/** Every environment variable the facilitator reads. */
export const CONFIG_VARIABLES: readonly string[] = KNOWN_VARIABLES;

/** Which env prefix each network's variables use. */
export const ENV_PREFIX: Record<NetworkName, "CRONOS_TESTNET" | "CRONOS_MAINNET"> = {
  "cronos-testnet": "CRONOS_TESTNET",
  "cronos-mainnet": "CRONOS_MAINNET",
};

/** Options of {@link loadConfig}. */
export interface LoadConfigOptions {
  /**
   * The networks run on embedded local chains: they need no RPC URL (the caller injects a transport).
   * Set by the local stack; a standalone facilitator leaves it empty.
   */
  embedded?: readonly NetworkName[];
  /**
   * The embedded ledger's file when `LEDGER_FILE` is not set: the standalone process passes
   * {@link DEFAULT_LEDGER_FILE} (a restart remembers everything); embedded use defaults to `:memory:`.
   */
  defaultLedgerFile?: string;
}

/**
 * Parses the facilitator's configuration from environment variables. Throws {@link ConfigError}
 * naming the variable at the first problem; never echoes a secret.
 */
export function loadConfig(environment: NodeJS.ProcessEnv = process.env, options: LoadConfigOptions = {}): FacilitatorConfig {
  const env = withoutServiceLinks(environment);
  assertNoUnknownVariables(env);
  assertDatabaseUrlNotEmpty(env);
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`${String(issue.path[0])}: ${issue.message}`);
  }
  const e = parsed.data;
  const embedded = options.embedded ?? [];

  let names: NetworkName[];
  if (e.FACILITATOR_NETWORKS) {
    names = [];
    for (const raw of e.FACILITATOR_NETWORKS.split(",").map((s) => s.trim()).filter(Boolean)) {
      const name = canonicalNetwork(raw);
      if (!name) throw new ConfigError(`FACILITATOR_NETWORKS: unknown network "${raw}" (known: ${NETWORK_NAMES.join(", ")})`);
      if (!names.includes(name)) names.push(name);
    }
  } else {
    names = NETWORK_NAMES.filter((name) => embedded.includes(name) || e[`${ENV_PREFIX[name]}_RPC_URL`] !== undefined);
  }
  if (names.length === 0) {
    throw new ConfigError(
      "CRONOS_TESTNET_RPC_URL / CRONOS_MAINNET_RPC_URL: no network configured; set at least one RPC URL (or run `cronos-x402 start`, `npm start` in the kit's clone, for the embedded local chains)",
    );
  }

  const networks = names.map((name): NetworkConfig => {
    const prefix = ENV_PREFIX[name];
    const info = NETWORKS[name];
    const rpcUrls = parseRpcUrls(`${prefix}_RPC_URL`, e[`${prefix}_RPC_URL`]);
    if (rpcUrls.length === 0 && !embedded.includes(name)) throw new ConfigError(`${prefix}_RPC_URL: required to serve ${name}`);
    const tokenVar = e[`${prefix}_TOKEN_ADDRESS`];
    if (tokenVar && !isAddress(tokenVar, { strict: false })) {
      throw new ConfigError(`${prefix}_TOKEN_ADDRESS: not an address: "${tokenVar}"`);
    }
    return {
      network: name,
      chainId: info.chainId,
      rpcUrls,
      token: getAddress(tokenVar ?? info.token),
      domain: {
        name: e[`${prefix}_TOKEN_NAME`] ?? info.domain.name,
        version: e[`${prefix}_TOKEN_VERSION`] ?? info.domain.version,
      },
    };
  });

  return {
    host: e.HOST,
    port: e.PORT,
    networks,
    relayerKeys: readRelayerKeys(e.RELAYER_PRIVATE_KEY, e.RELAYER_PRIVATE_KEY_FILE),
    confirmations: e.CONFIRMATIONS,
    settleTimeoutMs: e.SETTLE_TIMEOUT_SECONDS * 1000,
    settleMarginSeconds: e.SETTLE_MARGIN_SECONDS,
    headCacheMs: e.HEAD_CACHE_MS,
    rpcTimeoutMs: e.RPC_TIMEOUT_MS,
    rpcRankIntervalMs: e.RPC_RANK_INTERVAL_MS,
    pollingIntervalMs: e.POLLING_INTERVAL_MS,
    rateLimits: {
      verifyPerMinute: e.RATE_LIMIT_VERIFY_PER_MINUTE,
      settlePerMinute: e.RATE_LIMIT_SETTLE_PER_MINUTE,
      keyVerifyPerMinute: e.RATE_LIMIT_KEY_VERIFY_PER_MINUTE,
      keySettlePerMinute: e.RATE_LIMIT_KEY_SETTLE_PER_MINUTE,
      payerSettlePerMinute: e.RATE_LIMIT_PAYER_SETTLE_PER_MINUTE,
      publicPerMinute: e.RATE_LIMIT_PUBLIC_PER_MINUTE,
      storeWaitMs: e.RATE_LIMIT_STORE_WAIT_MS,
    },
    trustProxy: parseTrustProxy(e.TRUST_PROXY),
    allowedHosts: parseAllowedHosts(e.ALLOWED_HOSTS),
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    healthMaxBlockAgeSeconds: e.HEALTH_MAX_BLOCK_AGE_SECONDS,
    healthCacheMs: e.HEALTH_CACHE_MS,
    healthTimeoutMs: e.HEALTH_TIMEOUT_MS,
    relayerMinBalanceWei: parseWei(e.RELAYER_MIN_BALANCE_WEI),
    logLookbackBlocks: e.LOG_LOOKBACK_BLOCKS,
    logLevel: e.LOG_LEVEL ?? "info",
    metrics: e.METRICS !== "false",
    dashboard: e.DASHBOARD === "true",
    dashboardFeed: {
      maxStreams: e.DASHBOARD_MAX_STREAMS,
      stallMs: e.DASHBOARD_STREAM_STALL_SECONDS * 1000,
      maxLifetimeMs: e.DASHBOARD_STREAM_MAX_SECONDS * 1000,
      historyBytes: e.DASHBOARD_HISTORY_BYTES,
    },
    relayerSafety: {
      maxSettleGas: BigInt(gasCap("MAX_SETTLE_GAS", e.MAX_SETTLE_GAS)),
      erc1271GasLimit: BigInt(gasCap("ERC1271_GAS_LIMIT", e.ERC1271_GAS_LIMIT)),
      revertPenaltySeconds: e.REVERT_PENALTY_SECONDS,
    },
    metricsHost: e.METRICS_HOST,
    metricsPort: e.METRICS_PORT,
    metricsCacheMs: e.METRICS_CACHE_MS,
    metricsVerifyStages: e.METRICS_VERIFY_STAGES === "true",
    http: { ...httpLimits(e.REQUEST_TIMEOUT_MS, e.HEADERS_TIMEOUT_MS, e.MAX_CONNECTIONS, e.MAX_CONNECTIONS_PER_CLIENT), connectionQueueMs: e.CONNECTION_QUEUE_MS },
    apiKeys: readApiKeys(e.API_KEYS, e.API_KEYS_FILE),
    ledger: {
      ...(e.DATABASE_URL ? { databaseUrl: parseDatabaseUrl(e.DATABASE_URL) } : {}),
      file: e.LEDGER_FILE ?? options.defaultLedgerFile ?? ":memory:",
      leaseTtlMs: e.LEDGER_LEASE_TTL_SECONDS * 1000,
      reconcileIntervalMs: e.RECONCILE_INTERVAL_MS,
      poolSize: e.LEDGER_POOL_SIZE,
      retentionDays: e.LEDGER_RETENTION_DAYS,
      statementTimeoutMs: e.LEDGER_STATEMENT_TIMEOUT_MS,
      connectTimeoutMs: e.LEDGER_CONNECT_TIMEOUT_MS,
    },
    lifecycle: {
      maxFeePerGasWei: parseGweiVar("MAX_FEE_PER_GAS_GWEI", e.MAX_FEE_PER_GAS_GWEI, DEFAULT_MAX_FEE_PER_GAS_GWEI),
      replaceAfterSeconds: e.REPLACE_AFTER_SECONDS,
    },
    catalog: catalogBounds(e.CATALOG_MAX_ENTRIES, e.CATALOG_MAX_ENTRIES_PER_SELLER),
    stateIndex: {
      enabled: e.STATE_INDEX !== "false",
      logRangeBlocks: e.STATE_INDEX_LOG_RANGE,
      maxNonces: e.STATE_INDEX_MAX_NONCES,
      startBlocks: Object.fromEntries(
        names.flatMap((name) => {
          const start = e[`${ENV_PREFIX[name]}_INDEX_START_BLOCK`];
          return start >= 0 ? [[name, BigInt(start)]] : [];
        }),
      ),
    },
  };
}

/** One seller's bound cannot exceed the whole catalog's: it would never bind. */
function catalogBounds(maxEntries: number, maxEntriesPerSeller: number): CatalogConfig {
  if (maxEntriesPerSeller > maxEntries) {
    throw new ConfigError(`CATALOG_MAX_ENTRIES_PER_SELLER: must be at most CATALOG_MAX_ENTRIES (${maxEntries}), got "${maxEntriesPerSeller}"`);
  }
  return { maxEntries, maxEntriesPerSeller };
}

// --- A transaction's life ---

/**
 * The default fee cap, in gwei: twice the 5,000 gwei Cronos EVM asked before its 2024-2025 fee cuts, so
 * it never binds in normal operation; set it from the network's gas tracker to bound what a fee spike
 * may cost (on Cronos a transaction pays its whole fee cap: docs/operations.md).
 */
export const DEFAULT_MAX_FEE_PER_GAS_GWEI = "10000";

function parseGweiVar(variable: string, value: string | undefined, fallback: string): bigint {
  const text = value ?? fallback;
  if (!/^\d+(\.\d{1,9})?$/.test(text) || parseGwei(text) === 0n) {
    throw new ConfigError(`${variable}: must be a positive number of gwei (up to 9 decimals), got "${text}"`);
  }
  return parseGwei(text);
}

/** The standalone process's embedded ledger when `LEDGER_FILE` is not set (relative to the working directory). */
export const DEFAULT_LEDGER_FILE = "data/ledger.db";

function parseDatabaseUrl(value: string): string {
  // The message never repeats the value: it may carry a password.
  if (!/^postgres(ql)?:\/\/[^\s]+$/.test(value)) throw new ConfigError("DATABASE_URL: must be a postgres:// (or postgresql://) URL");
  return value;
}

// --- RPC failover ---

/**
 * `CRONOS_*_RPC_URL`: one URL or several, comma-separated, in order of preference. Messages name a URL
 * by its position, never by its text (its path or query may carry an API key).
 */
function parseRpcUrls(variable: string, value: string | undefined): string[] {
  if (value === undefined) return [];
  const urls = value.split(",").map((url) => url.trim());
  const several = urls.length > 1;
  const which = (index: number) => (several ? `URL #${index + 1}` : "the URL");
  urls.forEach((url, index) => {
    if (url === "") throw new ConfigError(`${variable}: ${which(index)} is empty (URLs are separated by single commas)`);
    if (!/^(https?|wss?):\/\/[^/?#]/.test(url)) throw new ConfigError(`${variable}: ${several ? `${which(index)} ` : ""}must be an http(s) or ws(s) URL`);
    const earlier = urls.indexOf(url);
    if (earlier < index) throw new ConfigError(`${variable}: ${which(index)} repeats URL #${earlier + 1}`);
  });
  return urls;
}

/** A gas limit a node accepts for one call: at most 2^24 (EIP-7825's transaction cap). */
function gasCap(variable: string, value: number): number {
  if (value > 16_777_216) throw new ConfigError(`${variable}: must be at most 16777216 (one transaction's gas cap), got "${value}"`);
  return value;
}

function readRelayerKeys(inline: string | undefined, file: string | undefined): Hex[] {
  if (inline && file) throw new ConfigError("RELAYER_PRIVATE_KEY / RELAYER_PRIVATE_KEY_FILE: set one, not both");
  let raw = inline;
  let source = "RELAYER_PRIVATE_KEY";
  if (file) {
    source = "RELAYER_PRIVATE_KEY_FILE";
    try {
      raw = readFileSync(file, "utf8");
    } catch (error) {
      throw new ConfigError(`RELAYER_PRIVATE_KEY_FILE: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
    }
  }
  if (!raw) throw new ConfigError("RELAYER_PRIVATE_KEY: required (the key that sends settle transactions), or RELAYER_PRIVATE_KEY_FILE");
  const keys = raw.split(/[\s,]+/).filter(Boolean).map((k) => (k.startsWith("0x") ? k : `0x${k}`));
  keys.forEach((key, index) => {
    // The message names the position, never the value.
    if (!isHex(key) || key.length !== 66) throw new ConfigError(`${source}: key #${index + 1} is not a 32-byte hex private key`);
  });
  if (keys.length === 0) throw new ConfigError(`${source}: no key found`);
  return keys as Hex[];
}

// --- The HTTP edge ---

/**
 * `ALLOWED_HOSTS`: comma-separated host names or IP addresses, as a client's `Host` header names this
 * service (any port). Each is kept as a URL parser reads it (lower case, IPv6 in brackets); a scheme, a
 * port, a path or a wildcard is refused, naming the entry.
 */
function parseAllowedHosts(value: string | undefined): string[] {
  if (value === undefined) return [];
  const names: string[] = [];
  for (const entry of value.split(",").map((part) => part.trim())) {
    const host = parseHost(entry);
    if (entry === "" || !host || host.port !== "" || /[*:]/.test(entry.replace(/^\[.*\]$/, ""))) {
      throw new ConfigError(
        `ALLOWED_HOSTS: ${JSON.stringify(entry)} is not a host name; list the names clients put in the Host header, comma-separated, without scheme, port or path (e.g. pay.example.com,10.0.0.5)`,
      );
    }
    if (!names.includes(host.name)) names.push(host.name);
  }
  return names;
}

/**
 * Whether `name=value` is one of the variables Kubernetes sets for each Service in the namespace (unless
 * the pod says `enableServiceLinks: false`). For a Service `metrics`: `METRICS_SERVICE_HOST`,
 * `METRICS_SERVICE_PORT` (and `METRICS_SERVICE_PORT_<port name>`), `METRICS_PORT=tcp://10.0.0.5:9464`,
 * `METRICS_PORT_9464_TCP=tcp://…` and its `_PROTO`, `_PORT` and `_ADDR`. A Service may have any name, ours
 * included (dashboard, relayer, ledger, metrics, database, …): the shape, not the prefix, tells them.
 * `<NAME>_PORT` and `<NAME>_PORT_<n>_<PROTO>` count only with their `proto://address:port` value.
 */
function isServiceLink(name: string, value: string): boolean {
  if (/^[A-Z][A-Z0-9_]*_SERVICE_(HOST|PORT(_[A-Z0-9_]+)?)$/.test(name)) return true;
  if (/^[A-Z][A-Z0-9_]*_PORT_\d+_(TCP|UDP|SCTP)_(PROTO|PORT|ADDR)$/.test(name)) return true;
  return /^[A-Z][A-Z0-9_]*_PORT(_\d+_(TCP|UDP|SCTP))?$/.test(name) && /^(tcp|udp|sctp):\/\/\S+:\d+$/.test(value.trim());
}

/**
 * The environment without Kubernetes' service links ({@link isServiceLink}): never taken for typos, and
 * never read as one of our settings: `METRICS_PORT=tcp://10.0.0.5:9464`, set for a Service named
 * `metrics`, leaves `METRICS_PORT` at its default rather than failing to parse as a port.
 */
function withoutServiceLinks(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name, value]) => value === undefined || !isServiceLink(name, value)));
}

/** `DATABASE_URL=` (set, but empty) is refused: taken as unset, it would start the instance on its own embedded ledger. */
function assertDatabaseUrlNotEmpty(env: NodeJS.ProcessEnv): void {
  if (env.DATABASE_URL === undefined || env.DATABASE_URL.trim() !== "") return;
  throw new ConfigError(
    "DATABASE_URL: set, but empty; the instance would start on its own embedded ledger, apart from any instances sharing a database (give the PostgreSQL URL, or unset it to use the embedded ledger on purpose)",
  );
}

function assertNoUnknownVariables(env: NodeJS.ProcessEnv): void {
  const unchecked = new Set((env.UNCHECKED_VARIABLES ?? "").split(",").map((name) => name.trim()).filter(Boolean));
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || KNOWN_VARIABLES.includes(name) || unchecked.has(name)) continue;
    let suggestion: string | undefined;
    if (OWN_NAMESPACE.test(name)) {
      // The same setting in other words first (LEDGER_URL → DATABASE_URL), else the closest name of the same
      // namespace (RELAYER_KEY_FILE → RELAYER_PRIVATE_KEY_FILE, not API_KEYS_FILE).
      const namespace = KNOWN_VARIABLES.filter((known) => known.split("_")[0] === name.split("_")[0]);
      suggestion = sameMeaning(name, env) ?? closest(name, namespace.length > 0 ? namespace : KNOWN_VARIABLES);
    } else if (name.startsWith("DATABASE_") && !env.DATABASE_URL) {
      suggestion = "DATABASE_URL";
    } else {
      suggestion = looksLikeOurs(name) ?? sameMeaning(name, env);
    }
    if (suggestion === undefined) continue;
    throw new ConfigError(
      `${name}: unknown variable; did you mean ${suggestion}? (the facilitator stops at a variable that looks like one of its own; if ${name} is meant for something else, name it in UNCHECKED_VARIABLES)`,
    );
  }
}

/**
 * The known variable `name` is a typo of, compared in upper case: for the short names (`PORT`, `HOST`)
 * one substituted or swapped letter (`PROT`, `HOTS`; not `PORTS` or `PORT0`, which schedulers set),
 * else up to two edits (`DATABSE_URL`, `LOGLEVEL`, `CRONOS_TESTNET_RPC_URI`). npm's own `npm_*`
 * variables (all of them under `npm start`) are never ours.
 */
function looksLikeOurs(name: string): string | undefined {
  if (name.startsWith("npm_")) return undefined;
  const upper = name.toUpperCase();
  for (const known of KNOWN_VARIABLES) {
    const short = Math.min(upper.length, known.length) <= 5;
    if (short ? upper.length === known.length && editDistance(upper, known) <= 1 : Math.abs(upper.length - known.length) <= 2 && editDistance(upper, known) <= 2) {
      return known;
    }
  }
  return undefined;
}

/**
 * Words other tools and habits use for ours, as `_`-separated word runs: a PostgreSQL or SQLite
 * database is our ledger (`DATABASE_URL` is the ledger's URL), a DSN or connection string a URL, a path
 * a file, trusted proxies `TRUST_PROXY`, a gas price the fee per gas. Applied to singular words.
 */
const SYNONYMS: ReadonlyArray<[RegExp, string]> = [
  [/(?<=^|_)(DATABASE|DB|PG|POSTGRES|POSTGRESQL|PSQL|SQLITE)(?=_|$)/g, "LEDGER"],
  [/(?<=^|_)(CONNECTION_STRING|CONNECTION_URL|CONNECTION_URI|CONN_STRING|CONNECTION|CONN|URI|DSN)(?=_|$)/g, "URL"],
  [/(?<=^|_)PATH(?=_|$)/g, "FILE"],
  [/(?<=^|_)TRUSTED(?=_|$)/g, "TRUST"],
  [/(?<=^|_)GAS_PRICE(?=_|$)/g, "FEE_PER_GAS"],
];
/** Units a name may end in, in either spelling: a unit changed or left out still names the same setting. */
const UNIT_WORDS = new Set(["SECOND", "SEC", "MS", "MILLISECOND", "MILLI", "GWEI", "WEI", "BYTE"]);

/** A word in the singular, roughly (`PROXIES` → `PROXY`, `KEYS` → `KEY`; `GAS`, `ADDRESS` and `MS` as they are). */
function singular(word: string): string {
  if (word.length > 4 && word.endsWith("IES")) return `${word.slice(0, -3)}Y`;
  if (word.length > 3 && word.endsWith("S") && !word.endsWith("SS")) return word.slice(0, -1);
  return word;
}

/** A name's words as compared for meaning: upper case, synonyms replaced, singular, a trailing unit dropped. */
function canonicalWords(name: string): string[] {
  const synonyms = (text: string) => SYNONYMS.reduce((replaced, [pattern, word]) => replaced.replace(pattern, word), text);
  // Synonyms before the singular (POSTGRES is no plural) and after it (DATABASES, URIS).
  const text = synonyms(synonyms(name.toUpperCase()).split("_").filter(Boolean).map(singular).join("_"));
  const words = text.split("_");
  while (words.length > 1 && UNIT_WORDS.has(words.at(-1)!)) words.pop();
  return words;
}

/**
 * The known variable `name` says in other words, beyond a typo's reach ({@link looksLikeOurs}): the same
 * words once singular, with synonyms and units aside (`TRUST_PROXIES`, `TRUSTED_PROXIES`, `POSTGRES_URL`,
 * `DATABASE_POOL_SIZE` → `LEDGER_POOL_SIZE`, `REVERT_PENALTY_MS`, `MAX_FEE_PER_GAS_WEI`), the first two or
 * more words of a known name (`MAX_FEE_PER_GAS`, `REVERT_PENALTY`, `BODY_LIMIT`), or its last two or more
 * (`POOL_SIZE`, `PRIVATE_KEY`). Only names of two words or more are compared (a scheduler's `PORTS` is not
 * our `PORT`; a bare `DATABASE`, `DB` or `POSTGRES` is the one exception: `DATABASE_URL`), and never a
 * name that merely extends one of ours (`DATABASE_URL_UNPOOLED` is a platform's). When the variable it
 * would stand for is set, it is another program's (platforms set `POSTGRES_URL` beside `DATABASE_URL`).
 */
function sameMeaning(name: string, env: NodeJS.ProcessEnv): string | undefined {
  if (name.startsWith("npm_")) return undefined;
  const words = canonicalWords(name);
  const key = words.join("_");
  const matches =
    key === "LEDGER"
      ? ["DATABASE_URL"]
      : KNOWN_VARIABLES.filter((known) => {
          const knownWords = canonicalWords(known);
          if (knownWords.length < 2 || words.length < 2) return false;
          const knownKey = knownWords.join("_");
          return key === knownKey || knownKey.startsWith(`${key}_`) || knownKey.endsWith(`_${key}`);
        });
  const unset = matches.filter((known) => env[known] === undefined);
  return unset.length > 0 ? closest(name.toUpperCase(), unset) : undefined;
}

/** The candidate with the smallest edit distance to `name`. */
function closest(name: string, candidates: readonly string[]): string {
  let best = candidates[0]!;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const distance = editDistance(name, candidate);
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return best;
}

/** Edit distance counting an insertion, a deletion, a substitution or a swap of neighbours as one edit. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = rows[i]!;
      row[j] = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j]!, rows[i - 2]![j - 2]! + 1);
    }
  }
  return rows[a.length]![b.length]!;
}

const PROXY_NAMES = ["loopback", "linklocal", "uniquelocal"];

/**
 * `TRUST_PROXY`: false, a hop count, or proxy addresses/subnets. `true` (trust every hop) is refused:
 * any client could then choose its rate-limit key with a forged `X-Forwarded-For`.
 */
function parseTrustProxy(value: string | undefined): false | number | string[] {
  if (value === undefined || value.toLowerCase() === "false") return false;
  if (/^(true|yes|on|\*)$/i.test(value)) {
    throw new ConfigError(
      `TRUST_PROXY: "${value}" would trust every X-Forwarded-For entry, so any client could pick its rate-limit key; give the number of proxies in front (e.g. 1) or their addresses/subnets (e.g. loopback or 10.0.0.0/8)`,
    );
  }
  if (/^\d+$/.test(value)) return Number(value) === 0 ? false : Number(value);
  const entries = value.split(",").map((s) => s.trim()).filter(Boolean);
  for (const entry of entries) {
    if (!PROXY_NAMES.includes(entry) && !isAddressOrSubnet(entry)) {
      throw new ConfigError(`TRUST_PROXY: "${entry}" is not an IP address, a subnet (address/prefix) or one of ${PROXY_NAMES.join(", ")}`);
    }
  }
  return entries;
}

function isAddressOrSubnet(entry: string): boolean {
  const [address = "", prefix, ...rest] = entry.split("/");
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  // proxy-addr also takes an IPv4 netmask (10.0.0.0/255.0.0.0).
  if (family === 4 && isIP(prefix) === 4) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

/** `MAX_CONNECTIONS_PER_CLIENT` when unset: a tenth of `MAX_CONNECTIONS` (at least 1), at most 100. */
export function defaultConnectionsPerClient(maxConnections: number): number {
  return Math.max(1, Math.min(100, Math.floor(maxConnections / 10)));
}

function httpLimits(requestTimeoutMs: number, headersTimeoutMs: number, maxConnections: number, perClient: number | undefined): Omit<HttpLimitsConfig, "connectionQueueMs"> {
  // Node refuses a headers time-out longer than the request time-out.
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(`HEADERS_TIMEOUT_MS: ${headersTimeoutMs} is longer than REQUEST_TIMEOUT_MS ${requestTimeoutMs}`);
  }
  // A cap at or above the server's own lets one client hold every place: the fairness it exists for is gone.
  if (perClient !== undefined && perClient > 0 && perClient >= maxConnections) {
    throw new ConfigError(
      `MAX_CONNECTIONS_PER_CLIENT: ${perClient} is not below MAX_CONNECTIONS ${maxConnections}, so one client could hold every connection; set it lower (unset: ${defaultConnectionsPerClient(maxConnections)}, a tenth of MAX_CONNECTIONS, at most 100), or 0 for no per-client cap`,
    );
  }
  return { requestTimeoutMs, headersTimeoutMs, maxConnections, maxConnectionsPerClient: perClient ?? defaultConnectionsPerClient(maxConnections) };
}

const API_KEY = /^[A-Za-z0-9._~+/=-]{16,512}$/;

/**
 * Seller API keys from `API_KEYS` (comma-separated) or `API_KEYS_FILE` (one per line, `#` comments,
 * optionally `verify=N settle=N` after the key). Keeps hashes only; messages name the position, never a key.
 */
function readApiKeys(inline: string | undefined, file: string | undefined): ApiKeyConfig[] {
  if (inline && file) throw new ConfigError("API_KEYS / API_KEYS_FILE: set one, not both");
  const lines: Array<{ where: string; text: string }> = [];
  if (inline) {
    inline.split(",").map((s) => s.trim()).filter(Boolean).forEach((text, index) => lines.push({ where: `API_KEYS: key #${index + 1}`, text }));
  } else if (file) {
    let raw: string;
    try {
      raw = readFileSync(file, "utf8");
    } catch (error) {
      throw new ConfigError(`API_KEYS_FILE: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
    }
    raw.split(/\r?\n/).forEach((line, index) => {
      const text = line.trim();
      if (text !== "" && !text.startsWith("#")) lines.push({ where: `API_KEYS_FILE: line ${index + 1}`, text });
    });
    if (lines.length === 0) throw new ConfigError(`API_KEYS_FILE: no key found in ${file}`);
  }
  const seen = new Map<string, string>();
  return lines.map(({ where, text }): ApiKeyConfig => {
    const [key = "", ...settings] = text.split(/\s+/);
    if (!API_KEY.test(key)) throw new ConfigError(`${where}: a key is 16 to 512 characters of A-Z a-z 0-9 . _ ~ + / = -`);
    if (settings.length > 0 && !file) throw new ConfigError(`${where}: per-key limits go in API_KEYS_FILE`);
    const sha256 = createHash("sha256").update(key).digest("hex");
    const earlier = seen.get(sha256);
    if (earlier) throw new ConfigError(`${where}: repeats the key of ${earlier.replace(/^API_KEYS(_FILE)?: /, "")}`);
    seen.set(sha256, where);
    const entry: ApiKeyConfig = { id: sha256.slice(0, 12), sha256 };
    for (const setting of settings) {
      const match = /^(verify|settle)=(\d+)$/.exec(setting);
      // Not echoed: a second key pasted on the line would be a secret.
      if (!match) throw new ConfigError(`${where}: after the key, only verify=N and settle=N may follow`);
      entry[match[1] === "verify" ? "verifyPerMinute" : "settlePerMinute"] = Number(match[2]);
    }
    return entry;
  });
}

function parseWei(value: string | undefined): bigint {
  if (value === undefined) return 1n;
  if (!/^\d+$/.test(value)) throw new ConfigError(`RELAYER_MIN_BALANCE_WEI: must be a whole number of wei, got "${value}"`);
  return BigInt(value);
}
