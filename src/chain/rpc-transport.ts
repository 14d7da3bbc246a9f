import type { Tracer } from "@opentelemetry/api";
import { BaseError, createTransport, http, keccak256, RpcRequestError, shouldThrow, TimeoutError, webSocket, type EIP1193RequestFn, type Hex, type Transport } from "viem";
import { classifySendError } from "./node-errors.js";
import { rpcAttempt, tracedAttempts } from "./rpc-trace.js";
import { describeRpcFailure, redactUrl } from "./rpc-url.js";

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
  /** With several URLs: each is pinged (`eth_blockNumber`, and `eth_chainId` now and then) this often to rank them. */
  rankIntervalMs: number;
  /** The chain id the URLs must report: a ping answering another one counts as failed. */
  chainId?: number;
  /** Told of each ranking ping (metrics). */
  onPing?: (endpoint: RpcEndpoint, up: boolean) => void;
  /** With tracing on: each request's attempts are spans ({@link rpcAttempt}); the ranking pings are not. */
  tracer?: Tracer;
}

/** One RPC URL as its last ranking ping found it. */
export interface RpcEndpointState {
  /** The endpoint's label: scheme and host, and its place in the list. */
  url: string;
  /** It answered its last ping (with the expected chain id, when one is given). */
  ok: boolean;
  chainId?: number;
  blockNumber?: number;
  /** Why the last ping failed: `connection refused`, `no answer within 1000 ms`, `HTTP 503`, … */
  error?: string;
  /** When that ping was answered or gave up (`Date.now()`). */
  at?: number;
}

/** A network's transport over its RPC URLs, and each endpoint on its own. */
export interface RpcTransport {
  transport: Transport;
  endpoints: RpcEndpoint[];
  /**
   * With several URLs: each one's state from its last ranking ping (no request is made). Resolves once
   * each has been pinged at least once (at most one ping time-out after start-up); empty with one URL.
   */
  states(): Promise<RpcEndpointState[]>;
  /** The same states as known now, without waiting (a URL not pinged yet says so). */
  snapshot(): RpcEndpointState[];
  /** Stops the ranking pings and closes WebSocket connections. */
  close(): void;
}

/** The number of recent pings and request outcomes a URL's rank is judged on. */
const SAMPLES = 10;
/** A ranking ping gives up after this long (or the request time-out, when shorter). */
const PING_TIMEOUT_MS = 1_000;
/** The pause before the one pass that tries again the URLs that failed fast (refused, HTTP 5xx); never one that timed out. */
const RETRY_DELAY_MS = 150;

/**
 * The transport of a network served by `urls`. One URL: that endpoint, each request retried once.
 * Several: a failover transport. Each URL is pinged on its own every `rankIntervalMs` (`eth_blockNumber`;
 * `eth_chainId` at the first ping and every tenth; time-out 1 s) and ranked: a URL that failed any of its last ten pings (or a
 * request lately, which counts as one at once) goes after the others; among healthy URLs the configured
 * order stands, so reads keep seeing the node that took the relayer's transactions (read-your-writes for
 * pending nonces and receipts) rather than flip with each sample. A request goes to the best-ranked URL
 * it has not tried yet and, when that fails (no answer within `timeoutMs`, connection refused, HTTP 5xx),
 * to the next one as ranked at that moment: each URL at most once, so a request in flight when its URL
 * hangs costs one time-out and is never sent back to it. When every URL failed, those that failed fast
 * (not by a time-out) are tried once more. A JSON-RPC error answer (a revert, `nonce too low`) is passed
 * on as viem's `fallback` does, without demoting the URL that answered it.
 *
 * Either way a raw transaction whose send failed but which the node knows (the first endpoint took it
 * and the answer was lost, then the next said `already known` or `nonce too low`) counts as sent.
 */
export function rpcTransport(parameters: RpcTransportParameters): RpcTransport {
  const { urls, timeoutMs } = parameters;
  if (urls.length === 0) throw new Error("rpcTransport needs at least one URL");
  const several = urls.length > 1;
  const transportOf = (url: string, index: number, retryCount: number) => {
    const options = { key: `rpc-${index}`, timeout: timeoutMs, retryCount };
    return isWebSocketUrl(url) ? webSocket(url, options) : http(url, { ...options, batch: { wait: 0 } });
  };
  const endpoints = urls.map(
    (url, index): RpcEndpoint => ({
      url,
      label: several ? `${redactUrl(url)} (URL #${index + 1} of ${urls.length})` : redactUrl(url),
      transport: transportOf(url, index, several ? 0 : 1),
    }),
  );
  // A WebSocket endpoint's socket is shared (viem keeps one per URL) and reconnects by itself: closed with the transport.
  const closeSockets = () => {
    for (const endpoint of endpoints) {
      if (!isWebSocketUrl(endpoint.url)) continue;
      const value = endpoint.transport({ retryCount: 0 }).value as { getRpcClient?: () => Promise<{ close(): void }> } | undefined;
      void value?.getRpcClient?.().then((client) => client.close(), () => {});
    }
  };
  const { tracer } = parameters;
  if (!several) {
    // Traced, its one retry is made outside the endpoint, so that each attempt is a span of its own.
    const transport = tracer ? tracedAttempts(transportOf(urls[0]!, 0, 0), tracer, endpoints[0]!.label, 1) : endpoints[0]!.transport;
    return { transport: sentOnce(transport), endpoints, states: async () => [], snapshot: () => [], close: closeSockets };
  }

  const ranking = new Ranking(endpoints, parameters);
  return {
    transport: sentOnce(failover(endpoints, ranking, tracer)),
    endpoints,
    states: () => ranking.states(),
    snapshot: () => ranking.snapshot(),
    close() {
      ranking.stop();
      closeSockets();
    },
  };
}

/** The URLs' recent record, and their order from it. */
class Ranking {
  readonly #endpoints: RpcEndpoint[];
  readonly #p: RpcTransportParameters;
  /** Per URL: its last outcomes (true = answered), newest last. */
  readonly #samples: boolean[][];
  readonly #last: Array<RpcEndpointState | undefined>;
  readonly #first: Array<Promise<void>>;
  readonly #pings: number[];
  readonly #timers = new Set<NodeJS.Timeout>();
  #stopped = false;

  constructor(endpoints: RpcEndpoint[], parameters: RpcTransportParameters) {
    this.#endpoints = endpoints;
    this.#p = parameters;
    this.#samples = endpoints.map(() => []);
    this.#last = endpoints.map(() => undefined);
    this.#pings = endpoints.map(() => 0);
    // Each URL is pinged in a loop of its own: one that hangs delays no other's pings.
    this.#first = endpoints.map((_, index) => this.#loop(index));
  }

  /** The URLs' indexes, healthy ones first, each group in the configured order. */
  order(): number[] {
    const healthy = (index: number) => this.#samples[index]!.every(Boolean);
    const all = this.#endpoints.map((_, index) => index);
    return [...all.filter(healthy), ...all.filter((index) => !healthy(index))];
  }

  /** A request to `index` failed at the transport (no answer, refused, HTTP error): it goes after the others at once. */
  failed(index: number): void {
    this.#record(index, false);
  }

  async states(): Promise<RpcEndpointState[]> {
    await Promise.all(this.#first);
    return this.snapshot();
  }

  snapshot(): RpcEndpointState[] {
    return this.#last.map((state, index) => state ?? { url: this.#endpoints[index]!.label, ok: false, error: "not pinged yet" });
  }

  stop(): void {
    this.#stopped = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }

  /** Pings URL `index` now, then every `rankIntervalMs` until stopped; resolves after the first ping. */
  async #loop(index: number): Promise<void> {
    await this.#ping(index);
    const next = () => {
      if (this.#stopped) return;
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        void this.#ping(index).then(next);
      }, this.#p.rankIntervalMs);
      timer.unref();
      this.#timers.add(timer);
    };
    next();
  }

  async #ping(index: number): Promise<void> {
    if (this.#stopped) return;
    const endpoint = this.#endpoints[index]!;
    const timeoutMs = Math.min(this.#p.timeoutMs, PING_TIMEOUT_MS);
    // Not through the endpoint's HTTP transport: viem batches by URL, and a ping batched with a request
    // would lend it the ping's short time-out (or take the request's long one).
    const transport = isWebSocketUrl(endpoint.url)
      ? endpoint.transport({ retryCount: 0, timeout: timeoutMs })
      : http(endpoint.url, { retryCount: 0, timeout: timeoutMs })({ retryCount: 0 });
    const previous = this.#last[index];
    // The chain id rarely changes: asked at the first ping, every tenth, and after a failed one.
    const askChainId = this.#p.chainId !== undefined && (previous?.chainId === undefined || !previous.ok || ++this.#pings[index]! % SAMPLES === 0);
    const state: RpcEndpointState = { url: endpoint.label, ok: false };
    try {
      const [chainId, head] = await Promise.all([
        askChainId ? (transport.request({ method: "eth_chainId" }) as Promise<string>) : Promise.resolve(undefined),
        transport.request({ method: "eth_blockNumber" }) as Promise<string>,
      ]);
      state.chainId = chainId === undefined ? previous?.chainId : Number(BigInt(chainId));
      state.blockNumber = Number(BigInt(head));
      state.ok = this.#p.chainId === undefined || state.chainId === this.#p.chainId;
    } catch (error) {
      state.error = describeRpcFailure(error, { timeoutMs });
    }
    if (this.#stopped) return;
    state.at = Date.now();
    this.#last[index] = state;
    this.#record(index, state.ok);
    this.#p.onPing?.(endpoint, state.ok);
  }

  #record(index: number, ok: boolean): void {
    const samples = this.#samples[index]!;
    samples.push(ok);
    if (samples.length > SAMPLES) samples.shift();
  }
}

/**
 * viem's `fallback` with one difference that matters: the next URL is chosen among those this request
 * has not tried, as ranked when it is chosen (viem's re-reads a list the ranking re-sorts meanwhile, so
 * a request could go back to the URL that just hung). The same `type` and `value.transports`, so viem's
 * subscriptions find the WebSocket endpoints as they do behind `fallback`.
 */
function failover(endpoints: RpcEndpoint[], ranking: Ranking, tracer?: Tracer): Transport {
  return ({ chain, timeout, ...rest }) => {
    const instances = endpoints.map((endpoint) => endpoint.transport({ ...rest, chain, retryCount: 0, timeout }));
    return createTransport(
      {
        key: "failover",
        name: "Failover",
        type: "fallback",
        retryCount: 0,
        request: (async ({ method, params }: { method: string; params?: unknown }, options?: unknown) => {
          const failedFast = new Set<number>();
          let lastError: unknown;
          let attempt = 0;
          for (const pass of [0, 1]) {
            const tried = new Set<number>();
            if (pass === 1) {
              if (failedFast.size === 0) break;
              await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS));
            }
            for (;;) {
              const index = ranking.order().find((i) => !tried.has(i) && (pass === 0 || failedFast.has(i)));
              if (index === undefined) break;
              tried.add(index);
              const send = () => instances[index]!.request({ method, params } as never, options as never);
              attempt++;
              try {
                return await (tracer ? rpcAttempt(tracer, method, endpoints[index]!.label, attempt, send) : send());
              } catch (error) {
                // An answer (a revert, a refusal) is the node's word: passed on, the node not blamed.
                if (shouldThrow(error as Error)) throw error;
                lastError = error;
                if (isJsonRpcAnswer(error)) continue;
                ranking.failed(index);
                if (pass === 0 && !isTimeout(error)) failedFast.add(index);
                else failedFast.delete(index);
              }
            }
          }
          throw lastError;
        }) as EIP1193RequestFn,
      },
      { transports: instances },
    );
  };
}

/** A JSON-RPC error object the node answered (not a transport failure). */
function isJsonRpcAnswer(error: unknown): boolean {
  return error instanceof RpcRequestError || (error instanceof BaseError && error.walk((e) => e instanceof RpcRequestError) !== null);
}

function isTimeout(error: unknown): boolean {
  return error instanceof TimeoutError || (error instanceof BaseError && error.walk((e) => e instanceof TimeoutError) !== null);
}

/** Whether an RPC URL is served over WebSocket (`ws://`, `wss://`). */
export function isWebSocketUrl(url: string): boolean {
  return /^wss?:/.test(url);
}

/**
 * `eth_sendRawTransaction` that failed (a refusal, or no answer) but whose transaction the node knows
 * answers its hash: a send retried on the same or the next endpoint after the first took it is one send.
 * A refusal that says so itself (`already known`, `tx already in mempool`: {@link classifySendError}) is
 * passed on, so the relayer tells a transaction the node held from one it took anew.
 */
function sentOnce(transport: Transport): Transport {
  return (parameters) => {
    const inner = transport(parameters);
    const request = (async (args: { method: string; params?: unknown }, options?: unknown) => {
      if (args.method !== "eth_sendRawTransaction") return inner.request(args as never, options as never);
      try {
        return await inner.request(args as never, options as never);
      } catch (error) {
        // The node says it holds this very transaction: the caller reads that itself (sent, not taken anew).
        if (classifySendError(error).kind === "known") throw error;
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
