import { fallback, http, keccak256, webSocket, type Hex, type Transport } from "viem";
import { redactUrl } from "./rpc-url.js";

/** One configured RPC endpoint of a network. */
export interface RpcEndpoint {
  /** The URL as configured: it may carry an API key, so it is never shown. */
  url: string;
  /** What logs, the healthcheck and messages show: scheme and host, and the URL's place when there are several. */
  label: string;
  /** This endpoint alone (no failover), for the checks of this one URL. */
  transport: Transport;
}

/** Parameters of {@link rpcTransport}. */
export interface RpcTransportParameters {
  /** In order of preference. */
  urls: readonly string[];
  /** Each request's time-out. */
  timeoutMs: number;
  /** With several URLs: each is pinged (`eth_blockNumber`) this often to rank them. */
  rankIntervalMs: number;
  /** Told of each ranking ping (metrics). */
  onPing?: (endpoint: RpcEndpoint, up: boolean) => void;
}

/** A network's transport over its RPC URLs, and each endpoint on its own. */
export interface RpcTransport {
  transport: Transport;
  endpoints: RpcEndpoint[];
  /** Stops the ranking pings and closes WebSocket connections. */
  close(): void;
}

/**
 * The transport of a network served by `urls`. One URL: that endpoint, each request retried once.
 * Several: viem's `fallback`, ranked. A request goes to the best-ranked endpoint and, when that fails
 * (no answer, connection refused, HTTP 5xx), to the next; ranking pings every endpoint and puts the
 * ones that failed among their last ten pings after the others. Latency is not ranked: among healthy
 * endpoints the configured order stands, so reads keep seeing the node that took the relayer's
 * transactions (read-your-writes for pending nonces and receipts) rather than flip with each sample.
 *
 * Either way a raw transaction whose send failed but which the node knows (the first endpoint took it
 * and the answer was lost, then the next said `already known` or `nonce too low`) counts as sent.
 */
export function rpcTransport(parameters: RpcTransportParameters): RpcTransport {
  const { urls, timeoutMs } = parameters;
  if (urls.length === 0) throw new Error("rpcTransport needs at least one URL");
  const several = urls.length > 1;
  const endpoints = urls.map((url, index): RpcEndpoint => {
    const options = { key: `rpc-${index}`, timeout: timeoutMs, retryCount: several ? 0 : 1 };
    return {
      url,
      label: several ? `${redactUrl(url)} (URL #${index + 1} of ${urls.length})` : redactUrl(url),
      transport: isWebSocketUrl(url) ? webSocket(url, options) : http(url, { ...options, batch: { wait: 0 } }),
    };
  });
  // A WebSocket endpoint's socket is shared (viem keeps one per URL) and reconnects by itself: closed with the transport.
  const closeSockets = () => {
    for (const endpoint of endpoints) {
      if (!isWebSocketUrl(endpoint.url)) continue;
      const value = endpoint.transport({ retryCount: 0 }).value as { getRpcClient?: () => Promise<{ close(): void }> } | undefined;
      void value?.getRpcClient?.().then((client) => client.close(), () => {});
    }
  };
  if (!several) return { transport: sentOnce(endpoints[0]!.transport), endpoints, close: closeSockets };

  let closed = false;
  const ranked = fallback(
    endpoints.map((endpoint) => endpoint.transport),
    {
      retryCount: 1,
      rank: {
        // viem's ranking loop waits between rounds with a timer that keeps a process alive and never
        // stops: it runs with no wait of its own, paced here by an unref'd timer, and a closed transport's
        // ping never settles, which ends the loop.
        interval: 0,
        timeout: Math.min(timeoutMs, 1_000),
        weights: { stability: 1, latency: 0 },
        ping: async ({ transport }) => {
          await new Promise((wake) => setTimeout(wake, parameters.rankIntervalMs).unref());
          if (closed) return new Promise(() => {});
          const endpoint = endpoints[Number(transport.config.key.slice("rpc-".length))];
          try {
            const answer = await transport.request({ method: "eth_blockNumber" });
            if (endpoint) parameters.onPing?.(endpoint, true);
            return answer;
          } catch (error) {
            if (endpoint) parameters.onPing?.(endpoint, false);
            throw error;
          }
        },
      },
    },
  );
  return {
    transport: sentOnce(ranked),
    endpoints,
    close() {
      closed = true;
      closeSockets();
    },
  };
}

/** Whether an RPC URL is served over WebSocket (`ws://`, `wss://`). */
export function isWebSocketUrl(url: string): boolean {
  return /^wss?:/.test(url);
}

/**
 * `eth_sendRawTransaction` that failed (a refusal, or no answer) but whose transaction the node knows
 * answers its hash: a send retried on the same or the next endpoint after the first took it is one send.
 */
function sentOnce(transport: Transport): Transport {
  return (parameters) => {
    const inner = transport(parameters);
    const request = (async (args: { method: string; params?: unknown }, options?: unknown) => {
      if (args.method !== "eth_sendRawTransaction") return inner.request(args as never, options as never);
      try {
        return await inner.request(args as never, options as never);
      } catch (error) {
        const [raw] = args.params as [Hex];
        const hash = keccak256(raw);
        const known = await inner.request({ method: "eth_getTransactionByHash", params: [hash] } as never).catch(() => null);
        if (known) return hash;
        throw error;
      }
    }) as typeof inner.request;
    return { ...inner, request };
  };
}
