import type { Hex } from "viem";
import type { RequestProvider } from "../../src/harness/rpc-bridge.js";
import { postJson } from "./http.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// JSON-RPC: over HTTP as another process speaks it, and a recorder in front of an in-process provider.

/** A JSON-RPC response as it comes over the wire. */
export interface WireResponse {
  jsonrpc: string;
  id: number | string | null;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

/** Calls one JSON-RPC method over HTTP with plain fetch and returns the wire answer (its result or its error). */
export async function rpcAnswer(url: string, method: string, params: unknown[] = []): Promise<WireResponse> {
  return (await postJson(url, { jsonrpc: "2.0", id: 1, method, params })).json as WireResponse;
}

/** Calls one JSON-RPC method over HTTP with plain fetch and returns its result (throws on a JSON-RPC error). */
export async function rpc<T = unknown>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const response = await rpcAnswer(url, method, params);
  if (response.error) throw new Error(`${method}: ${response.error.message}`);
  return response.result as T;
}

/** ABI-encoded `balanceOf(address)` call data. */
export function balanceOfData(address: string): Hex {
  return `0x70a08231${address.slice(2).toLowerCase().padStart(64, "0")}`;
}

/** One JSON-RPC request the facilitator made. */
export interface RpcCall {
  method: string;
  params: unknown[];
}

/** A provider that records every request in front of a real one, and can fail chosen methods. */
export interface RpcRecorder {
  provider: RequestProvider;
  calls: RpcCall[];
  /** The methods called since the last reset, in order. */
  methods(): string[];
  count(method: string): number;
  reset(): void;
  /** Methods answered with a connection failure instead of being passed on (the RPC "down" for them). */
  failing: Set<string>;
}

/** Wraps `provider` so a test can count and inspect the facilitator's chain reads. */
export function recordRpc(provider: RequestProvider): RpcRecorder {
  const calls: RpcCall[] = [];
  const failing = new Set<string>();
  return {
    calls,
    failing,
    methods: () => calls.map((call) => call.method),
    count: (method) => calls.filter((call) => call.method === method).length,
    reset() {
      calls.length = 0;
      failing.clear();
    },
    provider: {
      async request(args) {
        calls.push({ method: args.method, params: (args.params as unknown[] | undefined) ?? [] });
        if (failing.has(args.method)) throw new Error(`connect ECONNREFUSED (test: ${args.method} is down)`);
        return provider.request(args);
      },
    },
  };
}
