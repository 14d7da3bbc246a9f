// The environment schema: every variable the facilitator reads, its default and its bounds.
import { z } from "zod";
import type { NetworkName } from "../../protocol/networks.js";
import { tracingEnvShape } from "./tracing.js";

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

export const envSchema = z.object({
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
  CHAIN_HISTORY_CONFIRM_MS: intVar(2_000, 0, 600_000),
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
  // Traces: OpenTelemetry's own variables (docs/operations.md, "Traces"), read by tracing.ts
  ...tracingEnvShape,
  // Names the unknown-variable check leaves alone (comma-separated): another program's variable that looks like one of ours.
  UNCHECKED_VARIABLES: optionalString,
});

/** Every environment variable the facilitator reads. */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(envSchema.shape);

/** Which env prefix each network's variables use. */
export const ENV_PREFIX: Record<NetworkName, "CRONOS_TESTNET" | "CRONOS_MAINNET"> = {
  "cronos-testnet": "CRONOS_TESTNET",
  "cronos-mainnet": "CRONOS_MAINNET",
};
