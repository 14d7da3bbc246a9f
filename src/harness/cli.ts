import { parseArgs } from "node:util";
import { parseGwei, parseUnits } from "viem";
import { z } from "zod";
import { CRONOS_MAINNET, CRONOS_TESTNET, NETWORK_NAMES, canonicalNetwork, type NetworkName } from "../protocol/networks.js";
import { CRONOS_BLOCK_TIME_MS, DEFAULT_BUYERS, DEFAULT_FACILITATOR_PORT, DEFAULT_NODE, DEFAULT_RPC_PORT, MAX_BUYERS, NODE_KINDS, START_BLOCK } from "./defaults.js";
import { DEFAULT_FEE_BUMP, MAX_FEE_BUMP } from "./cronos-node/texts.js";
import type { PortRole } from "./errors.js";
import { LOG_LEVELS, type LogLevel } from "./log.js";
import type { LocalStackOptions } from "./stack.js";
import { KitErrorOf } from "../protocol/errors.js";

/** A bad flag or variable; the message is one line naming it. The CLI exits with status 2. */
export class UsageError extends KitErrorOf("UsageError", "usage") {}

/** What `npm start` was asked to do. */
export interface StartCommand {
  help: boolean;
  json: boolean;
  logLevel: LogLevel;
  stack: LocalStackOptions;
  /**
   * `--write-env FILE`: where to write the stack's URLs and buyer keys as `NAME=value` lines once it is
   * ready. Not `--env-file`: Node 22 takes that flag anywhere on its command line, even after the script,
   * and exits 9 when the file does not exist yet.
   */
  envFile?: string;
  /** `--background`: return once the stack is ready, leaving it running detached (stopped by `cronos-x402 stop`). */
  background?: BackgroundOptions;
}

/** How `cronos-x402 start --background` runs, and where `cronos-x402 stop` finds what it started. */
export interface BackgroundOptions {
  /** The folder of the state file and the log (`--state-dir`). */
  stateDir: string;
  /** How long to wait for the ready line before giving up (`--ready-timeout`, in seconds on the command line). */
  readyTimeoutMs: number;
}

/** Default of `--state-dir`: a folder in the current directory, so `stop` run from the same place finds the stack. */
export const DEFAULT_STATE_DIR = ".cronos-x402";
/** Default of `--ready-timeout`, in seconds. */
export const DEFAULT_READY_TIMEOUT_SECONDS = 180;
/** Default of `cronos-x402 stop --timeout`, in seconds: the stack stops within its own 15 s bound. */
export const DEFAULT_STOP_TIMEOUT_SECONDS = 30;

interface OptionSpec {
  flag: string;
  env: string;
  /** Shown in --help. */
  value: string;
  description: string;
  fallback: string;
}

/** Every value option: flag, variable, default. A flag wins over its variable. */
export const START_OPTIONS = {
  port: { flag: "--port", env: "PORT", value: "N", description: "facilitator port (0 = any free port)", fallback: String(DEFAULT_FACILITATOR_PORT) },
  networks: {
    flag: "--networks",
    env: "NETWORKS",
    value: "LIST",
    description: "comma-separated networks to run: cronos-testnet, cronos-mainnet (aliases: testnet, mainnet, cronos)",
    fallback: NETWORK_NAMES.join(","),
  },
  blockTime: {
    flag: "--block-time",
    env: "BLOCK_TIME_MS",
    value: "MS|cronos",
    description: `milliseconds between blocks; 0 = mine each transaction at once (automine); "cronos" = ${CRONOS_BLOCK_TIME_MS}, the real networks' pace (500 ms blocks since 2025, per the Cronos 2025 whitepaper, whitepaper.cronos.org)`,
    fallback: "0",
  },
  node: {
    flag: "--node",
    env: "CHAIN_NODE",
    value: "cronos|ethereum",
    description: "how the chains admit transactions and answer over JSON-RPC: cronos = as a Cronos v1.7 node (strict nonces and its refusal texts, its eth_getLogs caps; docs/cronos-node.md), ethereum = as EDR alone (geth's pool: gaps queued)",
    fallback: DEFAULT_NODE,
  },
  feeBump: { flag: "--fee-bump", env: "CRONOS_FEE_BUMP", value: "PERCENT", description: "with --node cronos: the replacement rule's mempool.feebump (a replacement needs priority >= old x (100 + PERCENT) / 100)", fallback: String(DEFAULT_FEE_BUMP) },
  minGasPrice: { flag: "--min-gas-price", env: "CRONOS_MIN_GAS_PRICE_GWEI", value: "GWEI", description: "with --node cronos: the chain's minimum gas price (a fee under it is refused; the base fee never goes under it)", fallback: "0" },
  forkTestnet: { flag: "--fork-testnet", env: "FORK_TESTNET_URL", value: "URL", description: "fork this JSON-RPC endpoint for cronos-testnet instead of starting empty", fallback: "" },
  forkMainnet: { flag: "--fork-mainnet", env: "FORK_MAINNET_URL", value: "URL", description: "fork this JSON-RPC endpoint for cronos-mainnet instead of starting empty", fallback: "" },
  buyers: { flag: "--buyers", env: "BUYERS", value: "N", description: `funded buyers per chain, 0-${MAX_BUYERS} (Hardhat accounts #2 upward, skipping #9)`, fallback: String(DEFAULT_BUYERS) },
  buyerBalance: {
    flag: "--buyer-balance",
    env: "BUYER_BALANCE",
    value: "USDC",
    description: "USDC.e per buyer in WHOLE tokens, up to 6 decimals (1000 = 1,000 USDC.e = 1000000000 base units)",
    fallback: "1000",
  },
  testnetRpcPort: { flag: "--testnet-rpc-port", env: "TESTNET_RPC_PORT", value: "N", description: "cronos-testnet JSON-RPC port (0 = any free port)", fallback: String(DEFAULT_RPC_PORT[CRONOS_TESTNET]) },
  mainnetRpcPort: { flag: "--mainnet-rpc-port", env: "MAINNET_RPC_PORT", value: "N", description: "cronos-mainnet JSON-RPC port (0 = any free port)", fallback: String(DEFAULT_RPC_PORT[CRONOS_MAINNET]) },
  rateLimitVerify: { flag: "--rate-limit-verify", env: "RATE_LIMIT_VERIFY_PER_MINUTE", value: "N", description: "facilitator /verify requests per client IP and minute (0 = no limit)", fallback: "0" },
  rateLimitSettle: { flag: "--rate-limit-settle", env: "RATE_LIMIT_SETTLE_PER_MINUTE", value: "N", description: "facilitator /settle requests per client IP and minute (0 = no limit)", fallback: "0" },
  logLevel: { flag: "--log-level", env: "LOG_LEVEL", value: "LEVEL", description: `facilitator log level on stderr: ${LOG_LEVELS.join(", ")}`, fallback: "info" },
} as const satisfies Record<string, OptionSpec>;

type OptionKey = keyof typeof START_OPTIONS;

/** The flag and variable that change the port of each role (for "port in use" messages). */
export const PORT_SETTING: Record<PortRole, OptionSpec> = {
  facilitator: START_OPTIONS.port,
  "cronos-testnet-rpc": START_OPTIONS.testnetRpcPort,
  "cronos-mainnet-rpc": START_OPTIONS.mainnetRpcPort,
};

/** The `--help` text. */
export function startUsage(): string {
  const rows = Object.values(START_OPTIONS).map((o) => [`  ${o.flag} ${o.value}`, o.env, o.description + (o.fallback ? ` [default: ${o.fallback}]` : "")]);
  const width = Math.max(...rows.map((r) => r[0]!.length));
  const envWidth = Math.max(...rows.map((r) => r[1]!.length));
  return [
    "Usage: cronos-x402 start [options]        (in the kit's clone: npm start -- [options])",
    "",
    "Starts local Cronos chains (testnet 338, mainnet 25) with USDC.e at its real address and funded",
    "buyers, plus an x402 facilitator for them, all on 127.0.0.1. Stops on Ctrl+C / SIGTERM, or when the",
    "process that started it exits (a wrapper such as npx that a SIGTERM ends without passing it on).",
    "Clients on viem's cronos / cronosTestnet definitions work as is: Multicall3 sits at its canonical",
    `address and the chains start past its creation blocks (testnet ${START_BLOCK[CRONOS_TESTNET].toLocaleString("en-US")}, mainnet ${START_BLOCK[CRONOS_MAINNET].toLocaleString("en-US")}).`,
    "",
    "Options (flag, environment variable, meaning; a flag wins over its variable):",
    ...rows.map(([flag, env, text]) => `${flag!.padEnd(width)}  ${env!.padEnd(envWidth)}  ${text}`),
    `${"  --json".padEnd(width)}  ${"".padEnd(envWidth)}  when ready print ONE JSON line on stdout (logs stay on stderr)`,
    `${"  --write-env FILE".padEnd(width)}  ${"".padEnd(envWidth)}  when ready write FACILITATOR_URL, RPC_URL, CHAIN_ID, TOKEN_ADDRESS, BUYER_PRIVATE_KEY, ... as NAME=value lines to FILE`,
    `${"  --background".padEnd(width)}  ${"".padEnd(envWidth)}  return once ready, leaving the stack running detached; \`cronos-x402 stop\` stops it`,
    `${"  --state-dir DIR".padEnd(width)}  ${"".padEnd(envWidth)}  with --background: where its state file (pid) and its log (stack.log) go [default: ${DEFAULT_STATE_DIR}]`,
    `${"  --ready-timeout S".padEnd(width)}  ${"".padEnd(envWidth)}  with --background: give up (and stop it) when not ready within S seconds [default: ${DEFAULT_READY_TIMEOUT_SECONDS}]`,
    `${"  -h, --help".padEnd(width)}  ${"".padEnd(envWidth)}  this text`,
    "",
    "In CI, any language:  cronos-x402 start --background --write-env .x402.env   (returns when ready)",
    "                      set -a; . ./.x402.env; set +a; <your suite>; cronos-x402 stop",
    "",
    "Other facilitator variables (CONFIRMATIONS, SETTLE_TIMEOUT_SECONDS, POLLING_INTERVAL_MS, ...) are",
    "passed through. Buyer, relayer (#9) and deployer (#0) keys are Hardhat's PUBLIC test keys: LOCAL-ONLY.",
    "Exit status: 0 after a clean stop, 1 when start-up fails (e.g. a port in use), 2 for a bad option.",
  ].join("\n");
}

const count = (max: number) =>
  z
    .string()
    .regex(/^\d+$/, `must be an integer from 0 to ${max}`)
    .transform(Number)
    .pipe(z.number().max(max, `must be an integer from 0 to ${max}`));
const portNumber = count(65_535);
const forkUrl = z.url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" }).optional();

/** The value schema of each option (input: the raw string). */
const VALUE_SCHEMAS = {
  port: portNumber,
  networks: z.string().transform((raw, ctx): NetworkName[] => {
    const names: NetworkName[] = [];
    for (const part of raw.split(",").map((s) => s.trim()).filter(Boolean)) {
      const name = part === "testnet" ? CRONOS_TESTNET : part === "mainnet" ? CRONOS_MAINNET : canonicalNetwork(part);
      if (!name) {
        ctx.addIssue({ code: "custom", message: `unknown network "${part}" (known: ${NETWORK_NAMES.join(", ")})` });
        return z.NEVER;
      }
      if (!names.includes(name)) names.push(name);
    }
    if (names.length === 0) ctx.addIssue({ code: "custom", message: "names no network" });
    return names;
  }),
  blockTime: z.union([z.literal("cronos").transform(() => CRONOS_BLOCK_TIME_MS), count(3_600_000)], {
    error: 'must be "cronos" or an integer from 0 to 3600000',
  }),
  node: z.enum(NODE_KINDS, { error: `must be ${NODE_KINDS.join(" or ")}` }),
  feeBump: count(MAX_FEE_BUMP),
  minGasPrice: z
    .string()
    .regex(/^\d{1,21}(\.\d{1,9})?$/, "must be gwei with at most 9 decimals, e.g. 0, 10000 or 0.5")
    .transform((raw) => parseGwei(raw)),
  forkTestnet: forkUrl,
  forkMainnet: forkUrl,
  buyers: count(MAX_BUYERS),
  buyerBalance: z
    .string()
    .regex(/^\d+(\.\d{1,6})?$/, "must be a whole number of USDC.e with at most 6 decimals, e.g. 1000 or 2.5")
    .transform((raw) => parseUnits(raw, 6)),
  testnetRpcPort: portNumber,
  mainnetRpcPort: portNumber,
  rateLimitVerify: count(1_000_000),
  rateLimitSettle: count(1_000_000),
  logLevel: z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(", ")}` }),
} satisfies Record<OptionKey, z.ZodType>;

/**
 * Parses `npm start` arguments and environment into stack options. Throws {@link UsageError}
 * naming the flag (or variable) at the first problem.
 */
export function parseStartArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): StartCommand {
  let parsed: ReturnType<typeof parseFlags>;
  try {
    parsed = parseFlags(argv);
  } catch (error) {
    throw new UsageError(`${flagProblem(error)} (see --help)`);
  }
  const { values } = parsed;
  if (values.help) return { help: true, json: values.json === true, logLevel: "info", stack: {} };
  for (const flag of ["state-dir", "ready-timeout"] as const) {
    if (values[flag] !== undefined && !values.background) throw new UsageError(`--${flag} goes with --background (see --help)`);
  }
  const envFile = nonEmpty("--write-env", values["write-env"]);
  const background: BackgroundOptions | undefined = values.background
    ? { stateDir: nonEmpty("--state-dir", values["state-dir"]) ?? DEFAULT_STATE_DIR, readyTimeoutMs: seconds("--ready-timeout", values["ready-timeout"], DEFAULT_READY_TIMEOUT_SECONDS) }
    : undefined;
  const read = <K extends OptionKey>(key: K): z.output<(typeof VALUE_SCHEMAS)[K]> => {
    const spec: OptionSpec = START_OPTIONS[key];
    const flagValue = values[spec.flag.slice(2) as keyof typeof values] as string | undefined;
    const envValue = env[spec.env]?.trim() || undefined;
    const raw = flagValue ?? envValue ?? (spec.fallback || undefined);
    const source = flagValue !== undefined ? spec.flag : envValue !== undefined ? spec.env : `${spec.flag} (default)`;
    const result = VALUE_SCHEMAS[key].safeParse(raw?.trim());
    if (!result.success) {
      const message = result.error.issues[0]?.message ?? "invalid";
      throw new UsageError(`${source}: ${message}${message.includes(`"${raw}"`) ? "" : `, got "${raw}"`}`);
    }
    return result.data as z.output<(typeof VALUE_SCHEMAS)[K]>;
  };

  const networks = read("networks");
  const fork: Partial<Record<NetworkName, string>> = {};
  const forkTestnet = read("forkTestnet");
  const forkMainnet = read("forkMainnet");
  if (forkTestnet) fork[CRONOS_TESTNET] = forkTestnet;
  if (forkMainnet) fork[CRONOS_MAINNET] = forkMainnet;
  for (const [network, key] of [[CRONOS_TESTNET, "forkTestnet"], [CRONOS_MAINNET, "forkMainnet"]] as const) {
    if (fork[network] && !networks.includes(network)) {
      throw new UsageError(`${START_OPTIONS[key].flag}: ${network} is not among the networks to run (${START_OPTIONS.networks.flag} ${networks.join(",")})`);
    }
  }

  const node = read("node");
  if (node === "ethereum") {
    for (const key of ["feeBump", "minGasPrice"] as const) {
      const spec = START_OPTIONS[key];
      if (values[spec.flag.slice(2) as keyof typeof values] !== undefined || env[spec.env]?.trim()) throw new UsageError(`${spec.flag} (${spec.env}) goes with --node cronos: a Cronos node's setting`);
    }
  }

  const port = read("port");
  const rpcPorts: Partial<Record<NetworkName, number>> = {};
  if (networks.includes(CRONOS_TESTNET)) rpcPorts[CRONOS_TESTNET] = read("testnetRpcPort");
  if (networks.includes(CRONOS_MAINNET)) rpcPorts[CRONOS_MAINNET] = read("mainnetRpcPort");
  const ports: Array<[string, number]> = [
    [START_OPTIONS.port.flag, port],
    ...(rpcPorts[CRONOS_TESTNET] !== undefined ? [[START_OPTIONS.testnetRpcPort.flag, rpcPorts[CRONOS_TESTNET]] as [string, number]] : []),
    ...(rpcPorts[CRONOS_MAINNET] !== undefined ? [[START_OPTIONS.mainnetRpcPort.flag, rpcPorts[CRONOS_MAINNET]] as [string, number]] : []),
  ];
  for (const [i, [flagA, a]] of ports.entries()) {
    const clash = ports.slice(i + 1).find(([, b]) => a !== 0 && a === b);
    if (clash) throw new UsageError(`${flagA} and ${clash[0]} are both ${a}; each needs its own port`);
  }

  return {
    help: false,
    json: values.json === true,
    ...(envFile !== undefined ? { envFile } : {}),
    ...(background ? { background } : {}),
    logLevel: read("logLevel"),
    stack: {
      networks,
      port,
      rpcPorts,
      blockTimeMs: read("blockTime"),
      node,
      cronos: { feeBump: read("feeBump"), minGasPrice: read("minGasPrice") },
      fork,
      buyers: read("buyers"),
      buyerBalance: read("buyerBalance"),
      rateLimits: { verifyPerMinute: read("rateLimitVerify"), settlePerMinute: read("rateLimitSettle") },
    },
  };
}

function parseFlags(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    strict: true,
    allowPositionals: false,
    options: {
      port: { type: "string" },
      networks: { type: "string" },
      "block-time": { type: "string" },
      node: { type: "string" },
      "fee-bump": { type: "string" },
      "min-gas-price": { type: "string" },
      "fork-testnet": { type: "string" },
      "fork-mainnet": { type: "string" },
      buyers: { type: "string" },
      "buyer-balance": { type: "string" },
      "testnet-rpc-port": { type: "string" },
      "mainnet-rpc-port": { type: "string" },
      "rate-limit-verify": { type: "string" },
      "rate-limit-settle": { type: "string" },
      "log-level": { type: "string" },
      json: { type: "boolean" },
      "write-env": { type: "string" },
      background: { type: "boolean" },
      "state-dir": { type: "string" },
      "ready-timeout": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
}

/** node:util `parseArgs`'s refusal as one line: its gist, without the advice on positionals. */
export function flagProblem(error: unknown): string {
  return (error as Error).message.split("\n")[0]!.replace(/\. To specify a positional argument.*$/, "");
}

/** A path option's value, refused when empty. */
function nonEmpty(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (value.trim() === "") throw new UsageError(`${flag}: needs a path, got ""`);
  return value;
}

/**
 * A duration option in whole seconds (1 to 3600), as milliseconds; `fallback` seconds when absent.
 * Shared by `start --ready-timeout` and `stop --timeout`.
 */
export function seconds(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback * 1000;
  const parsed = count(3_600).safeParse(value.trim());
  if (!parsed.success || parsed.data < 1) throw new UsageError(`${flag}: must be a whole number of seconds from 1 to 3600, got "${value}"`);
  return parsed.data * 1000;
}
