import type { RequestProvider } from "../../src/harness/rpc-bridge.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).

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
