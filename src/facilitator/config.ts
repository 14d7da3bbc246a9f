import { readFileSync } from "node:fs";
import { z } from "zod";
import { getAddress, isAddress, isHex, type Address, type Hex } from "viem";
import { NETWORKS, NETWORK_NAMES, canonicalNetwork, type NetworkName } from "../protocol/networks.js";

/** One network the facilitator serves. */
export interface NetworkConfig {
  network: NetworkName;
  chainId: number;
  /** JSON-RPC endpoint; absent when the caller injects a transport (embedded local chain). */
  rpcUrl?: string;
  token: Address;
  /** The EIP-712 domain the token must report on chain. */
  domain: { name: string; version: string };
}

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
  /** How often receipts and blocks are polled. */
  pollingIntervalMs: number;
  rateLimits: { verifyPerMinute: number; settlePerMinute: number };
  /** Express `trust proxy`: false (socket address only), true, a hop count, or addresses/subnets. */
  trustProxy: boolean | number | string[];
  bodyLimitBytes: number;
  /** Healthcheck fails when the latest block is older than this; 0 switches the check off. */
  healthMaxBlockAgeSeconds: number;
  /** A healthcheck answer is reused for this long (it costs several RPC reads per network); 0 = never. */
  healthCacheMs: number;
  /** Healthcheck and start-up fail when a relayer holds less native gas than this (wei). */
  relayerMinBalanceWei: bigint;
  /** How far back (blocks) settle looks for the transaction that used an authorization. */
  logLookbackBlocks: number;
  logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  /** Serve Prometheus metrics at `/metrics`. */
  metrics: boolean;
  /** Serve the page that watches payments happen at `/` (`DASHBOARD=true`; off by default, on in the local stack). */
  dashboard: boolean;
  /** What a settlement may cost the relayer (see docs/operations.md, "Threat model: what the relayer pays"). */
  relayerSafety: RelayerSafetyConfig;
}

/** Relayer safety: gas caps and the revert penalty. */
export interface RelayerSafetyConfig {
  /** `MAX_SETTLE_GAS`: a settlement whose estimate exceeds this is refused before sending. */
  maxSettleGas: bigint;
  /** `ERC1271_GAS_LIMIT`: gas limit of the `isValidSignature` call that checks a contract wallet's signature. */
  erc1271GasLimit: bigint;
  /** `REVERT_PENALTY_SECONDS`: how long a payer (and its wallet code) whose settlement reverted is refused; 0 = off. */
  revertPenaltySeconds: number;
}

/** A configuration problem; the message names the variable and what was found. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

const intVar = (fallback: number, min = 0) =>
  z
    .string()
    .optional()
    .transform((value, ctx) => {
      if (value === undefined || value.trim() === "") return fallback;
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
  PORT: intVar(8402),
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
  POLLING_INTERVAL_MS: intVar(250, 1),
  RATE_LIMIT_VERIFY_PER_MINUTE: intVar(10),
  RATE_LIMIT_SETTLE_PER_MINUTE: intVar(5),
  TRUST_PROXY: optionalString,
  BODY_LIMIT_BYTES: intVar(64 * 1024, 1024),
  HEALTH_MAX_BLOCK_AGE_SECONDS: intVar(0),
  HEALTH_CACHE_MS: intVar(1_000),
  RELAYER_MIN_BALANCE_WEI: optionalString,
  LOG_LOOKBACK_BLOCKS: intVar(10_000, 1),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).optional(),
  METRICS: z.enum(["true", "false"]).optional(),
  DASHBOARD: z.enum(["true", "false"], { error: 'must be "true" or "false"' }).optional(),
  // Relayer safety (defaults sized from measured honest settlements: docs/operations.md)
  MAX_SETTLE_GAS: intVar(250_000, 21_000),
  ERC1271_GAS_LIMIT: intVar(150_000, 21_000),
  REVERT_PENALTY_SECONDS: intVar(600),
});

/** Which env prefix each network's variables use. */
const PREFIX: Record<NetworkName, "CRONOS_TESTNET" | "CRONOS_MAINNET"> = {
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
}

/**
 * Parses the facilitator's configuration from environment variables. Throws {@link ConfigError}
 * naming the variable at the first problem; never echoes a secret.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, options: LoadConfigOptions = {}): FacilitatorConfig {
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
    names = NETWORK_NAMES.filter((name) => embedded.includes(name) || e[`${PREFIX[name]}_RPC_URL`] !== undefined);
  }
  if (names.length === 0) {
    throw new ConfigError(
      "CRONOS_TESTNET_RPC_URL / CRONOS_MAINNET_RPC_URL: no network configured; set at least one RPC URL (or run `npm start` for the embedded local chains)",
    );
  }

  const networks = names.map((name): NetworkConfig => {
    const prefix = PREFIX[name];
    const info = NETWORKS[name];
    const rpcUrl = e[`${prefix}_RPC_URL`];
    if (!rpcUrl && !embedded.includes(name)) throw new ConfigError(`${prefix}_RPC_URL: required to serve ${name}`);
    if (rpcUrl && !/^(https?|wss?):\/\//.test(rpcUrl)) {
      throw new ConfigError(`${prefix}_RPC_URL: must be an http(s) or ws(s) URL`);
    }
    const tokenVar = e[`${prefix}_TOKEN_ADDRESS`];
    if (tokenVar && !isAddress(tokenVar, { strict: false })) {
      throw new ConfigError(`${prefix}_TOKEN_ADDRESS: not an address: "${tokenVar}"`);
    }
    return {
      network: name,
      chainId: info.chainId,
      rpcUrl,
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
    pollingIntervalMs: e.POLLING_INTERVAL_MS,
    rateLimits: { verifyPerMinute: e.RATE_LIMIT_VERIFY_PER_MINUTE, settlePerMinute: e.RATE_LIMIT_SETTLE_PER_MINUTE },
    trustProxy: parseTrustProxy(e.TRUST_PROXY),
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    healthMaxBlockAgeSeconds: e.HEALTH_MAX_BLOCK_AGE_SECONDS,
    healthCacheMs: e.HEALTH_CACHE_MS,
    relayerMinBalanceWei: parseWei(e.RELAYER_MIN_BALANCE_WEI),
    logLookbackBlocks: e.LOG_LOOKBACK_BLOCKS,
    logLevel: e.LOG_LEVEL ?? "info",
    metrics: e.METRICS !== "false",
    dashboard: e.DASHBOARD === "true",
    relayerSafety: {
      maxSettleGas: BigInt(gasCap("MAX_SETTLE_GAS", e.MAX_SETTLE_GAS)),
      erc1271GasLimit: BigInt(gasCap("ERC1271_GAS_LIMIT", e.ERC1271_GAS_LIMIT)),
      revertPenaltySeconds: e.REVERT_PENALTY_SECONDS,
    },
  };
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

function parseTrustProxy(value: string | undefined): boolean | number | string[] {
  if (value === undefined || value === "false") return false;
  if (value === "true") return true;
  if (/^\d+$/.test(value)) return Number(value);
  return value.split(",").map((s) => s.trim()).filter(Boolean);
}

function parseWei(value: string | undefined): bigint {
  if (value === undefined) return 1n;
  if (!/^\d+$/.test(value)) throw new ConfigError(`RELAYER_MIN_BALANCE_WEI: must be a whole number of wei, got "${value}"`);
  return BigInt(value);
}
