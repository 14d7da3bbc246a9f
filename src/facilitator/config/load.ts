// Loading: the environment checked for typos, parsed by the schema once, and turned into a FacilitatorConfig.
import { getAddress, isAddress } from "viem";
import { NETWORKS, NETWORK_NAMES, canonicalNetwork, type NetworkName } from "../../protocol/networks.js";
import { ConfigError } from "./error.js";
import { httpLimits, parseAllowedHosts, parseTrustProxy, readApiKeys } from "./http.js";
import { assertDatabaseUrlNotEmpty, catalogBounds, gasCap, parseDatabaseUrl, parseGweiVar, parseRpcUrls, parseWei, readRelayerKeys } from "./parse.js";
import { ENV_PREFIX, envSchema } from "./schema.js";
import { tracingSettings } from "./tracing.js";
import { assertNoUnknownVariables, withoutServiceLinks } from "./typos.js";
import type { FacilitatorConfig, NetworkConfig } from "./types.js";

/** The standalone process's embedded ledger when `LEDGER_FILE` is not set (relative to the working directory). */
export const DEFAULT_LEDGER_FILE = "data/ledger.db";

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
  const tracing = tracingSettings(e);
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
    chainHistoryConfirmMs: e.CHAIN_HISTORY_CONFIRM_MS,
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
    ...(tracing ? { tracing } : {}),
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
      ...(e.MAX_FEE_PER_GAS_GWEI !== undefined ? { maxFeePerGasWei: parseGweiVar("MAX_FEE_PER_GAS_GWEI", e.MAX_FEE_PER_GAS_GWEI) } : {}),
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
