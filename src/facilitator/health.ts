import type { Address, PublicClient } from "viem";
import { describeRpcFailure, redactUrl } from "../chain/rpc-url.js";
import { tokenAbi } from "../chain/token-abi.js";
import type { LedgerHealth } from "../ledger/types.js";
import type { IndexStatus } from "../state/index.js";
import { ENV_PREFIX, type NetworkConfig } from "./config.js";

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

/** One of a network's RPC URLs as the last check saw it. */
export interface RpcEndpointState {
  /** Scheme and host, and its place in the list (the path and query may carry an API key). */
  url: string;
  /** It answered with the network's chain id. */
  ok: boolean;
  chainId?: number;
  blockNumber?: number;
  /** Why it failed: `connection refused`, `no answer within 1000 ms`, `HTTP 503`, … */
  error?: string;
}

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
  /** Several RPC URLs behind `client`: each is also asked for its chain id and head. */
  endpoints?: readonly RpcEndpointClient[];
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
  const endpoints = parameters.endpoints && parameters.endpoints.length > 1 ? parameters.endpoints : undefined;
  const probing = endpoints && Promise.all(endpoints.map((endpoint) => probeEndpoint(endpoint, config.chainId, why)));
  const withEndpoints = async () => {
    if (!probing) return result;
    result.rpc = await probing;
    result.warnings = [];
    result.rpc.forEach((state, index) => {
      const label = `the RPC at ${endpoints![index]!.label}`;
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

/** Asks one RPC URL for its chain id and head. */
async function probeEndpoint(endpoint: RpcEndpointClient, chainId: number, why: (error: unknown) => string): Promise<RpcEndpointState> {
  const state: RpcEndpointState = { url: endpoint.label, ok: false };
  try {
    const [answered, head] = await Promise.all([endpoint.client.getChainId(), endpoint.client.getBlockNumber({ cacheTime: 0 })]);
    state.chainId = answered;
    state.blockNumber = Number(head);
    state.ok = answered === chainId;
  } catch (error) {
    state.error = why(error);
  }
  return state;
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

/** The settlement ledger as `/healthcheck` reports it: the database, and this instance's relayer key leases. */
export interface LedgerInspection extends LedgerHealth {
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
  if (database && !database.reachable) problems.push(`ledger: ${database.backend === "postgres" ? "DATABASE_URL" : "LEDGER_FILE"}: unreachable (${database.error ?? "no answer"})`);
  else if (database && database.migrations.applied < database.migrations.expected) {
    problems.push(`ledger: ${database.migrations.applied} of ${database.migrations.expected} migrations applied`);
  }
  // A dead RPC URL while another serves is a warning: the network stays healthy.
  const warned = list(results.filter((r) => r.warnings && r.warnings.length > 0), (r) => r.warnings!);
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
