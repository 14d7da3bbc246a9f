import type { Address, PublicClient } from "viem";
import type { RpcEndpointState } from "../chain/rpc-transport.js";
import { describeRpcFailure, redactUrl } from "../chain/rpc-url.js";
import { tokenAbi } from "../chain/token-abi.js";
import type { LedgerHealth } from "../ledger/types.js";
import type { IndexStatus } from "../state/index.js";
import { ENV_PREFIX, type NetworkConfig } from "./config/index.js";

/** What one network looks like from here. */
export interface NetworkInspection {
  network: string;
  ok: boolean;
  chainId?: number;
  blockNumber?: number;
  blockAgeSeconds?: number;
  token: { address: Address; hasCode?: boolean; name?: string; version?: string };
  relayers: Array<{ address: Address; balanceWei?: string }>;
  /** Each problem names the configuration variable to look at. */
  problems: Array<{ variable: string; message: string }>;
  /** With several RPC URLs: each one's state (the network stays healthy while one of them serves). */
  rpc?: RpcEndpointState[];
  /** With several RPC URLs: the ones that do not answer (not a problem while another serves). */
  warnings?: Array<{ variable: string; message: string }>;
  /** The token state index (absent with STATE_INDEX=false): behind is no problem, verify then reads the chain. */
  stateIndex?: IndexStatus;
}

/** One of a network's RPC URLs as its last ranking ping saw it. */
export type { RpcEndpointState };

/** One RPC URL of a network on its own, for the checks of that URL. */
export interface RpcEndpointClient {
  label: string;
  client: PublicClient;
}

/** Parameters of {@link inspectNetwork}. */
export interface InspectNetworkParameters {
  client: PublicClient;
  config: NetworkConfig;
  relayers: readonly Address[];
  relayerMinBalanceWei: bigint;
  /** 0 = do not judge block age. */
  maxBlockAgeSeconds: number;
  /** The RPC time-out, to say how long a request that timed out waited. */
  rpcTimeoutMs?: number;
  /** Wall-clock time (ms) the block age is measured against; default `Date.now()`. */
  nowMs?: number;
  /** What messages call the RPC behind `client`; default from the configured URLs. */
  rpc?: string;
  /** Several RPC URLs behind `client`: each one's state from the ranking's last pings (no request is made for them). */
  rpcStates?: () => Promise<RpcEndpointState[]>;
  /** The network's token state index, reported as it stands. */
  index?: { status(): IndexStatus };
}


/**
 * Checks one configured network for real: the RPC answers with the configured chain id, the
 * latest block, the token has code and the configured EIP-712 domain, the relayers have gas.
 */
export async function inspectNetwork(parameters: InspectNetworkParameters): Promise<NetworkInspection> {
  const { client, config } = parameters;
  const prefix = ENV_PREFIX[config.network];
  const rpcVariable = `${prefix}_RPC_URL`;
  const tokenVariable = `${prefix}_TOKEN_ADDRESS`;
  const result: NetworkInspection = {
    network: config.network,
    ok: false,
    token: { address: config.token },
    relayers: parameters.relayers.map((address) => ({ address })),
    problems: [],
    ...(parameters.index ? { stateIndex: parameters.index.status() } : {}),
  };
  const problem = (variable: string, message: string) => result.problems.push({ variable, message });
  // Scheme and host only: RPC URLs often carry an API key in their path or query.
  const urls = config.rpcUrls.map(redactUrl);
  const why = (error: unknown) => describeRpcFailure(error, { timeoutMs: parameters.rpcTimeoutMs });
  const rpc = parameters.rpc ?? (urls.length === 1 ? `the RPC at ${urls[0]}` : "the RPC");
  const down = (error: unknown) =>
    urls.length > 1 && !parameters.rpc ? `none of the RPCs (${urls.join(", ")}) answers (${why(error)})` : `${rpc} does not answer (${why(error)})`;
  const probing = parameters.rpcStates?.();
  const withEndpoints = async () => {
    const states = await probing;
    if (!states || states.length < 2) return result;
    result.rpc = states.map(({ at: _at, ...state }) => state);
    result.warnings = [];
    result.rpc.forEach((state) => {
      const label = `the RPC at ${state.url}`;
      if (state.chainId !== undefined && !state.ok) problem(rpcVariable, `${label} reports chain id ${state.chainId}, expected ${config.chainId}`);
      else if (!state.ok) result.warnings!.push({ variable: rpcVariable, message: `${label} does not answer (${state.error}); the others serve` });
    });
    return result;
  };

  try {
    result.chainId = await client.getChainId();
  } catch (error) {
    problem(rpcVariable, down(error));
    return withEndpoints();
  }
  if (result.chainId !== config.chainId) {
    problem(rpcVariable, `${parameters.rpc ?? "the RPC"} reports chain id ${result.chainId}, expected ${config.chainId}`);
    return withEndpoints();
  }
  try {
    const block = await client.getBlock({ blockTag: "latest" });
    result.blockNumber = Number(block.number);
    result.blockAgeSeconds = Math.max(0, Math.round((parameters.nowMs ?? Date.now()) / 1000 - Number(block.timestamp)));
    if (parameters.maxBlockAgeSeconds > 0 && result.blockAgeSeconds > parameters.maxBlockAgeSeconds) {
      problem(rpcVariable, `the latest block is ${result.blockAgeSeconds} s old (HEALTH_MAX_BLOCK_AGE_SECONDS ${parameters.maxBlockAgeSeconds})`);
    }
    const code = await client.getCode({ address: config.token });
    result.token.hasCode = code !== undefined && code !== "0x";
    if (!result.token.hasCode) {
      problem(tokenVariable, `no contract at ${config.token} on chain ${config.chainId}`);
    } else {
      const domain = await readDomain(client, config.token);
      result.token.name = domain.name;
      result.token.version = domain.version;
      if (domain.name !== config.domain.name) {
        problem(`${prefix}_TOKEN_NAME`, `the token's EIP-712 name is "${domain.name}", configured "${config.domain.name}"`);
      }
      if (domain.version !== config.domain.version) {
        problem(`${prefix}_TOKEN_VERSION`, `the token's EIP-712 version is "${domain.version}", configured "${config.domain.version}"`);
      }
    }
    for (const relayer of result.relayers) {
      const balance = await client.getBalance({ address: relayer.address });
      relayer.balanceWei = balance.toString();
      if (balance < parameters.relayerMinBalanceWei) {
        problem("RELAYER_PRIVATE_KEY", `relayer ${relayer.address} holds ${balance} wei of gas, below RELAYER_MIN_BALANCE_WEI ${parameters.relayerMinBalanceWei}`);
      }
    }
  } catch (error) {
    problem(rpcVariable, `${urls.length > 1 && !parameters.rpc ? "the RPCs" : rpc} failed a read (${why(error)})`);
  }
  await withEndpoints();
  result.ok = result.problems.length === 0;
  return result;
}

/** The token's EIP-712 name and version: ERC-5267 `eip712Domain()` where present, else `name()` / `version()`. */
export async function readDomain(client: PublicClient, token: Address): Promise<{ name: string; version: string }> {
  try {
    const [, name, version] = await client.readContract({ address: token, abi: tokenAbi, functionName: "eip712Domain" });
    return { name, version };
  } catch {
    const [name, version] = await Promise.all([
      client.readContract({ address: token, abi: tokenAbi, functionName: "name" }),
      client.readContract({ address: token, abi: tokenAbi, functionName: "version" }),
    ]);
    return { name, version };
  }
}

/** The healthcheck body: the documented shape plus a per-network report. */
export interface HealthReport {
  status: "success" | "error";
  results: {
    uptime: number;
    /** Milliseconds the checks took (the Cronos docs' example shows a `process.hrtime()` pair instead). */
    responseTime: number;
    message: string;
    timestamp: number;
    networks: Record<string, NetworkInspection>;
    ledger?: LedgerInspection;
  };
}

/**
 * A network's report when its checks did not finish within the healthcheck's time: the last completed
 * one with a warning saying so (its verdict stands), or, with none yet, a failed one.
 */
export function lateInspection(
  config: NetworkConfig,
  relayers: readonly Address[],
  last: CheckedValue<NetworkInspection> | undefined,
  waitedMs: number,
  rpc?: RpcEndpointState[],
): NetworkInspection {
  const variable = `${ENV_PREFIX[config.network]}_RPC_URL`;
  const endpoints = rpc && rpc.length > 1 ? { rpc: rpc.map(({ at: _at, ...state }) => state) } : {};
  if (!last) {
    return {
      network: config.network,
      ok: false,
      token: { address: config.token },
      relayers: relayers.map((address) => ({ address })),
      problems: [{ variable, message: `the checks did not finish within ${waitedMs} ms (the RPC is slow or does not answer)` }],
      ...endpoints,
    };
  }
  const ageSeconds = Math.round((Date.now() - last.at) / 1000);
  const warning = { variable, message: `the checks did not finish within ${waitedMs} ms (the RPC is slow); those of ${ageSeconds} s ago are shown` };
  return { ...last.value, ...endpoints, warnings: [...(last.value.warnings ?? []), warning] };
}

/** The ledger's database in a word: it answered (`up`), has not answered yet within the healthcheck's time (`slow`), or failed (`down`). */
export type LedgerState = "up" | "slow" | "down";

/**
 * The settlement ledger as `/healthcheck` reports it: the database's state, and this instance's relayer
 * key leases. Where the database is (`location`) and the driver's own error text are kept for the
 * detailed view ({@link publicHealth} removes them).
 */
export interface LedgerInspection extends LedgerHealth {
  state: LedgerState;
  /** Whether other instances can share this ledger (PostgreSQL) or it is this instance's own (the embedded one). */
  shared: boolean;
  /** On the embedded ledger: that it is this instance's alone, and how instances share one. */
  note?: string;
  leases: Array<{ address: Address; epoch: number; expiresAt: string }>;
  /** Outcomes answered while the database was unreachable and not yet written (absent when none). */
  outbox?: number;
}

/** Runs the network checks (and the ledger's) in parallel and builds the healthcheck answer. */
export async function healthReport(
  inspections: Array<() => Promise<NetworkInspection>>,
  ledger?: () => Promise<LedgerInspection>,
): Promise<HealthReport> {
  const started = performance.now();
  const [results, database] = await Promise.all([Promise.all(inspections.map((inspect) => inspect())), ledger?.()]);
  const list = (inspected: NetworkInspection[], items: (r: NetworkInspection) => Array<{ variable: string; message: string }>) =>
    inspected.map((r) => `${r.network}: ${items(r).map((p) => `${p.variable}: ${p.message}`).join("; ")}`);
  const problems = list(results.filter((r) => !r.ok), (r) => r.problems);
  const variable = database?.backend === "postgres" ? "DATABASE_URL" : "LEDGER_FILE";
  if (database?.state === "down") problems.push(`ledger: ${variable}: down (${describeLedgerFailure(database.error)})`);
  else if (database?.state === "up" && database.migrations.applied < database.migrations.expected) {
    problems.push(`ledger: ${database.migrations.applied} of ${database.migrations.expected} migrations applied`);
  }
  // A dead RPC URL while another serves is a warning: the network stays healthy. So is a slow database.
  const warned = list(results.filter((r) => r.warnings && r.warnings.length > 0), (r) => r.warnings!);
  if (database?.state === "slow") warned.push(`ledger: ${variable}: slow (${describeLedgerFailure(database.error)})`);
  const warnings = warned.length > 0 ? ` (${warned.join(" | ")})` : "";
  return {
    status: problems.length === 0 ? "success" : "error",
    results: {
      uptime: process.uptime(),
      responseTime: Math.round((performance.now() - started) * 1000) / 1000,
      message: (problems.length === 0 ? "OK" : problems.join(" | ")) + warnings,
      timestamp: Date.now(),
      networks: Object.fromEntries(results.map((r) => [r.network, r])),
      ...(database ? { ledger: database } : {}),
    },
  };
}

/**
 * The healthcheck as anyone may read it: the ledger's state without where it is (its file or host) or
 * the driver's words (which may name the host), in their place a short description.
 */
export function publicHealth(report: HealthReport): HealthReport {
  const ledger = report.results.ledger;
  if (!ledger) return report;
  const { location: _location, error, ...rest } = ledger;
  const shown = { ...rest, ...(error !== undefined ? { error: describeLedgerFailure(error) } : {}) } as LedgerInspection;
  return { ...report, results: { ...report.results, ledger: shown } };
}

/** What went wrong with the ledger's database, in a few words that never name where it is. */
export function describeLedgerFailure(error: string | undefined): string {
  if (error === undefined) return "no answer";
  const known: Array<[RegExp, string]> = [
    [/no answer within \d+ ms/i, error.match(/no answer within \d+ ms/i)?.[0] ?? ""],
    [/ECONNREFUSED/, "connection refused"],
    [/ENOTFOUND|EAI_AGAIN/, "DNS lookup failed"],
    [/ECONNRESET|terminat|Connection terminated/i, "connection lost"],
    [/timeout|timed out/i, "timed out"],
    [/password|authentication/i, "authentication failed"],
    [/not open|closed/i, "closed"],
  ];
  return known.find(([pattern]) => pattern.test(error))?.[1] ?? "unreachable";
}

/** A check's last completed answer, and when it came. */
export interface CheckedValue<T> {
  value: T;
  at: number;
}

/**
 * A check that answers within `deadlineMs`: the running check when it finishes in time, else
 * `late(last)` built from the last completed one (or none yet). One run at a time: callers meanwhile
 * share it, so a dependency that hangs is asked once, not once per healthcheck; the deadline counts from
 * the run's start (a caller joining a run already late is answered at once); the run goes on after the
 * deadline and its answer serves the next call. A run that throws counts as not answered.
 */
export function boundedCheck<T>(
  run: () => Promise<T>,
  deadlineMs: number,
  late: (last: CheckedValue<T> | undefined, waitedMs: number) => T,
  initial?: T,
): () => Promise<T> {
  let last: CheckedValue<T> | undefined = initial === undefined ? undefined : { value: initial, at: Date.now() };
  let running: Promise<T | undefined> | undefined;
  let runStarted = 0;
  return async () => {
    if (!running) runStarted = performance.now();
    const current = (running ??= run().then(
      (value) => {
        last = { value, at: Date.now() };
        running = undefined;
        return value;
      },
      () => {
        running = undefined;
        return undefined;
      },
    ));
    // Counted from the run's start: a caller joining a run already late is answered at once.
    const started = runStarted;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), Math.max(0, deadlineMs - (performance.now() - started)))));
    try {
      const value = await Promise.race([current, deadline]);
      return value === undefined ? late(last, Math.round(performance.now() - started)) : value;
    } finally {
      clearTimeout(timer);
    }
  };
}
