import { loadConfig } from "../../src/facilitator/config/index.js";
import type { RunningFacilitator } from "../../src/facilitator/start.js";
import type { NetworkName } from "../../src/protocol/networks.js";
import type { StartFacilitatorOptions } from "../../src/facilitator/server.js";
import { serveJsonRpc, type JsonRpcBridge } from "../../src/harness/rpc-bridge.js";
import { startTestFacilitator, TEST_ENV, type Chain } from "./facilitator.js";
import { startFaultProxy, type FaultProxy } from "./rpc-proxy.js";
import { closeAfter, once } from "./teardown.js";
import { openChain } from "./token.js";

// Helpers only: importing this file runs nothing.

/** A local chain served over HTTP, behind fault proxies: one RPC URL per proxy. */
export interface ProxiedChain {
  chain: Chain;
  bridge: JsonRpcBridge;
  proxies: FaultProxy[];
  /** The proxies' URLs, comma-separated, as `CRONOS_TESTNET_RPC_URL` (or `CRONOS_MAINNET_RPC_URL`) takes them. */
  rpcUrls: string;
  close(): Promise<void>;
}

/**
 * Opens a local chain (338, or `network`'s) with the token and funded buyers, serves it over HTTP, and puts `proxies` fault
 * proxies in front. All of it is closed with the scope that opens it (test/helpers/teardown.ts); `close`
 * closes the proxies and the bridge sooner (the chain stays open until the scope ends).
 */
export async function openProxiedChain(proxies = 1, network: NetworkName = "cronos-testnet"): Promise<ProxiedChain> {
  const chain = await openChain(network);
  const bridge = await serveJsonRpc(chain.connection.provider as never, { port: 0, role: `${network}-rpc` });
  const closeBridge = closeAfter("JSON-RPC bridge", once(() => bridge.close()));
  const started = await Promise.all(Array.from({ length: proxies }, () => startFaultProxy(bridge.url)));
  return {
    chain,
    bridge,
    proxies: started,
    rpcUrls: started.map((proxy) => proxy.url).join(","),
    close: once(async () => {
      await Promise.all(started.map((proxy) => proxy.close()));
      await closeBridge();
    }),
  };
}

/**
 * A listening facilitator (127.0.0.1, free ports for the service and its metrics) on the proxied
 * chain's RPC URLs, with the tests' settings (no rate limits, fast polling) and `env` on top.
 */
export function startFacilitatorOnProxies(
  proxied: ProxiedChain,
  env: Record<string, string> = {},
  options: StartFacilitatorOptions = {},
): Promise<RunningFacilitator> {
  const config = loadConfig({ ...TEST_ENV, PORT: "0", METRICS_PORT: "0", CRONOS_TESTNET_RPC_URL: proxied.rpcUrls, ...env });
  return startTestFacilitator(config, options);
}
