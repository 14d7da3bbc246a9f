// RPC calls as spans: one span per attempt (a retry, or the next URL of a failover, is an attempt of its own),
// named by the JSON-RPC method, with the URL's name (scheme and host: never its path, query or credentials).
import { SpanKind, type Tracer } from "@opentelemetry/api";
import { createTransport, type EIP1193RequestFn, type Transport } from "viem";
import { inChildSpan } from "../telemetry/spans.js";
import { describeRpcFailure } from "./rpc-url.js";

/** The attributes of an RPC span. */
export const RpcAttribute = {
  system: "rpc.system",
  method: "rpc.method",
  /** 1 for the first attempt of a call, 2 for its first retry or the next URL, … */
  attempt: "x402.rpc.attempt",
  /** The endpoint's label ({@link redactUrl}: scheme and host, and its place among several). */
  url: "x402.rpc.url",
} as const;

/**
 * One attempt of a call to `url`, in a span that ends when it is answered (a failure marked with its cause,
 * URLs redacted); outside any span (background work), no span.
 */
export function rpcAttempt<T>(tracer: Tracer, method: string, url: string, attempt: number, send: () => Promise<T>): Promise<T> {
  const attributes = { [RpcAttribute.system]: "jsonrpc", [RpcAttribute.method]: method, [RpcAttribute.attempt]: attempt, [RpcAttribute.url]: url };
  return inChildSpan(tracer, method, { kind: SpanKind.CLIENT, attributes }, send, (error) => describeRpcFailure(error));
}

/**
 * `inner` (which retries nothing itself) with each attempt in a span; with `retryCount`, retried as viem
 * retries (the same errors, the same back-off), and viem hands every attempt of one call the same
 * arguments object, which counts the attempts.
 */
export function tracedAttempts(inner: Transport, tracer: Tracer, url: string, retryCount = 0): Transport {
  return (parameters) => {
    const instance = inner({ ...parameters, retryCount: 0 });
    const attempts = new WeakMap<object, number>();
    const request = (async (args: { method: string; params?: unknown }, options?: unknown) => {
      const attempt = (attempts.get(args) ?? 0) + 1;
      attempts.set(args, attempt);
      return rpcAttempt(tracer, args.method, url, attempt, () => instance.request(args as never, options as never));
    }) as EIP1193RequestFn;
    // Without retries the instance stays as it is (its errors as viem made them), its request spanned.
    if (retryCount === 0) return { ...instance, request };
    const { key, name, type } = instance.config;
    return createTransport({ key, name, type, retryCount, request }, instance.value);
  };
}
