import type { Address } from "viem";
import type { NetworkConfig } from "../config/index.js";
import type { HealthReport } from "../health.js";
import { redactUrl } from "../../chain/rpc-url.js";

/** One served network as the dashboard shows it. Carries nothing secret. */
export interface NetworkView {
  network: string;
  chainId: number;
  /** An embedded local chain's JSON-RPC URL in full; a configured RPC only by host (its path or query may hold an API key). */
  rpc: string;
  token: Address;
  /** The token's EIP-712 domain as read from the chain (the configured one while it cannot be read). */
  domain: { name: string; version: string };
  ok: boolean;
  blockNumber?: number;
  blockAgeSeconds?: number;
  relayers: Array<{ address: Address; balanceWei?: string }>;
  /** The healthcheck's findings, each naming the variable to look at. */
  problems: string[];
}

/** The body of `GET /dashboard/api/networks`. */
export interface NetworksView {
  /** True on the local stack (buyers and the try-it panel are served). */
  local: boolean;
  /**
   * What the feed shows this request: `all` outcomes, or only `settled` ones (API keys are configured and
   * the request carries none). Set per request by the router; absent from the view it is given.
   */
  feed?: "all" | "settled";
  /** When the chain was read (ms since the epoch): the block age is as of then. */
  checkedAt: number;
  networks: NetworkView[];
}

/** How an RPC endpoint is shown: in full when it is a local chain's, else its host only. */
export function rpcShown(config: NetworkConfig, localRpcUrl: string | undefined): string {
  if (localRpcUrl) return localRpcUrl;
  if (config.rpcUrls.length === 0) return "embedded (in-process)";
  return config.rpcUrls
    .map((url) => {
      try {
        return new URL(url).host;
      } catch {
        return "configured";
      }
    })
    .join(", ");
}

/** Builds the networks view from the (shared, cached) healthcheck report. */
export async function networksView(
  configs: readonly NetworkConfig[],
  health: () => Promise<HealthReport>,
  localRpcUrls: Partial<Record<string, string>> | undefined,
): Promise<NetworksView> {
  const report = await health();
  // A problem text may quote an RPC error; a configured URL in it is cut to its host like everywhere else.
  const redact = (text: string) =>
    configs.reduce((out, config) => config.rpcUrls.reduce((cut, url) => cut.split(url).join(redactUrl(url)), out), text);
  return {
    local: localRpcUrls !== undefined,
    checkedAt: report.results.timestamp,
    networks: configs.map((config): NetworkView => {
      const inspection = report.results.networks[config.network];
      return {
        network: config.network,
        chainId: config.chainId,
        rpc: rpcShown(config, localRpcUrls?.[config.network]),
        token: config.token,
        domain: {
          name: inspection?.token.name ?? config.domain.name,
          version: inspection?.token.version ?? config.domain.version,
        },
        ok: inspection?.ok ?? false,
        ...(inspection?.blockNumber !== undefined ? { blockNumber: inspection.blockNumber } : {}),
        ...(inspection?.blockAgeSeconds !== undefined ? { blockAgeSeconds: inspection.blockAgeSeconds } : {}),
        relayers: inspection?.relayers ?? [],
        problems: (inspection?.problems ?? []).map((problem) => redact(`${problem.variable}: ${problem.message}`)),
      };
    }),
  };
}
