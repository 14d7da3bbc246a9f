import type { Address, PublicClient } from "viem";
import { describeRpcFailure, redactUrl } from "../chain/rpc-url.js";
import { tokenAbi } from "../chain/token-abi.js";
import type { LedgerHealth } from "../ledger/types.js";
import type { NetworkConfig } from "./config.js";

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
}

const PREFIX: Record<string, string> = { "cronos-testnet": "CRONOS_TESTNET", "cronos-mainnet": "CRONOS_MAINNET" };

/**
 * Checks one configured network for real: the RPC answers with the configured chain id, the
 * latest block, the token has code and the configured EIP-712 domain, the relayers have gas.
 */
export async function inspectNetwork(parameters: InspectNetworkParameters): Promise<NetworkInspection> {
  const { client, config } = parameters;
  const prefix = PREFIX[config.network] ?? config.network.toUpperCase();
  const rpcVariable = `${prefix}_RPC_URL`;
  const tokenVariable = `${prefix}_TOKEN_ADDRESS`;
  const result: NetworkInspection = {
    network: config.network,
    ok: false,
    token: { address: config.token },
    relayers: parameters.relayers.map((address) => ({ address })),
    problems: [],
  };
  const problem = (variable: string, message: string) => result.problems.push({ variable, message });
  // Scheme and host only: RPC URLs often carry an API key in their path or query.
  const rpc = config.rpcUrl ? `the RPC at ${redactUrl(config.rpcUrl)}` : "the RPC";
  const why = (error: unknown) => describeRpcFailure(error, { timeoutMs: parameters.rpcTimeoutMs });

  try {
    result.chainId = await client.getChainId();
  } catch (error) {
    problem(rpcVariable, `${rpc} does not answer (${why(error)})`);
    return result;
  }
  if (result.chainId !== config.chainId) {
    problem(rpcVariable, `the RPC reports chain id ${result.chainId}, expected ${config.chainId}`);
    return result;
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
    problem(rpcVariable, `${rpc} failed a read (${why(error)})`);
  }
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

/** The settlement ledger as `/healthcheck` reports it: the database, and this instance's relayer key leases. */
export interface LedgerInspection extends LedgerHealth {
  leases: Array<{ address: Address; epoch: number; expiresAt: string }>;
}

/** Runs the network checks (and the ledger's) in parallel and builds the healthcheck answer. */
export async function healthReport(
  inspections: Array<() => Promise<NetworkInspection>>,
  ledger?: () => Promise<LedgerInspection>,
): Promise<HealthReport> {
  const started = performance.now();
  const [results, database] = await Promise.all([Promise.all(inspections.map((inspect) => inspect())), ledger?.()]);
  const problems = results
    .filter((r) => !r.ok)
    .map((r) => `${r.network}: ${r.problems.map((p) => `${p.variable}: ${p.message}`).join("; ")}`);
  if (database && !database.reachable) problems.push(`ledger: ${database.backend === "postgres" ? "DATABASE_URL" : "LEDGER_FILE"}: unreachable (${database.error ?? "no answer"})`);
  else if (database && database.migrations.applied < database.migrations.expected) {
    problems.push(`ledger: ${database.migrations.applied} of ${database.migrations.expected} migrations applied`);
  }
  return {
    status: problems.length === 0 ? "success" : "error",
    results: {
      uptime: process.uptime(),
      responseTime: Math.round((performance.now() - started) * 1000) / 1000,
      message: problems.length === 0 ? "OK" : problems.join(" | "),
      timestamp: Date.now(),
      networks: Object.fromEntries(results.map((r) => [r.network, r])),
      ...(database ? { ledger: database } : {}),
    },
  };
}
