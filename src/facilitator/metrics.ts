import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { NetworkRuntime } from "./runtime.js";
import type { Relayer } from "../chain/relayer.js";

type RelayerStatus = ReturnType<Relayer["status"]>[number];
import type { OutcomeRecord } from "./http/app.js";
import { canonicalNetwork, type NetworkName } from "../protocol/networks.js";
import { networkOfCaip2 } from "../protocol/x402v2.js";

/** The facilitator's Prometheus metrics, on a registry of its own (several instances per process stay apart). */
export interface FacilitatorMetrics {
  registry: Registry;
  /** One verify/settle answer. */
  outcome(record: OutcomeRecord): void;
  /** Any HTTP answer. */
  request(route: string, status: number): void;
  rateLimited(route: string): void;
  rpcError(network: string): void;
  confirmationWait(network: string, seconds: number): void;
  /** Relayer gauges are read from the chain when scraped. */
  watchRelayers(networks: ReadonlyMap<NetworkName, NetworkRuntime>): void;
}

/** Creates the metrics; `defaults` adds Node's process metrics. */
export function createMetrics(options: { defaults?: boolean } = {}): FacilitatorMetrics {
  const registry = new Registry();
  if (options.defaults) collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: "x402_http_requests_total",
    help: "HTTP requests by route and status",
    labelNames: ["route", "status"],
    registers: [registry],
  });
  const outcomes = new Counter({
    name: "x402_outcomes_total",
    help: "verify and settle answers by network, outcome code and dialect (cronos or x402v2)",
    labelNames: ["route", "network", "outcome", "dialect"],
    registers: [registry],
  });
  const latency = new Histogram({
    name: "x402_request_duration_seconds",
    help: "verify and settle latency",
    labelNames: ["route"],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [registry],
  });
  const confirmations = new Histogram({
    name: "x402_settle_confirmation_seconds",
    help: "time from sending a settle transaction to its confirmed receipt",
    labelNames: ["network"],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120],
    registers: [registry],
  });
  const rpcErrors = new Counter({ name: "x402_rpc_errors_total", help: "RPC faults by network", labelNames: ["network"], registers: [registry] });
  const limited = new Counter({ name: "x402_rate_limited_total", help: "requests refused by a rate limit", labelNames: ["route"], registers: [registry] });
  let runtimes: ReadonlyMap<NetworkName, NetworkRuntime> = new Map();
  /** A gauge per network and relayer, read from the chain at scrape time; `read` undefined = no value. */
  const relayerGauge = (name: string, help: string, read: (runtime: NetworkRuntime, relayer: RelayerStatus) => Promise<number | undefined>) =>
    new Gauge({
      name,
      help,
      labelNames: ["network", "relayer"],
      registers: [registry],
      async collect() {
        this.reset();
        await Promise.all(
          [...runtimes.values()].flatMap((runtime) =>
            runtime.relayer.status().map(async (relayer) => {
              try {
                const value = await read(runtime, relayer);
                if (value !== undefined) this.set({ network: runtime.config.network, relayer: relayer.address }, value);
              } catch {
                rpcErrors.inc({ network: runtime.config.network });
              }
            }),
          ),
        );
      },
    });
  relayerGauge(
    "x402_relayer_nonce_gap",
    "relayer transactions handed a nonce but not yet mined (local next nonce - chain latest nonce)",
    async (runtime, { address, localNonce }) =>
      localNonce === undefined ? undefined : localNonce - (await runtime.client.getTransactionCount({ address, blockTag: "latest" })),
  );
  relayerGauge("x402_relayer_balance_wei", "relayer native gas balance", async (runtime, { address }) =>
    Number(await runtime.client.getBalance({ address })),
  );
  return {
    registry,
    outcome(record) {
      // The network label is bounded: a caller's unknown network string counts as "other".
      const network = canonicalNetwork(record.network) ?? networkOfCaip2(record.network) ?? "other";
      outcomes.inc({ route: record.route, network, outcome: record.code, dialect: record.dialect });
      latency.observe({ route: record.route }, record.durationMs / 1000);
    },
    request(route, status) {
      requests.inc({ route, status: String(status) });
    },
    rateLimited(route) {
      limited.inc({ route });
    },
    rpcError(network) {
      rpcErrors.inc({ network });
    },
    confirmationWait(network, seconds) {
      confirmations.observe({ network }, seconds);
    },
    watchRelayers(networks) {
      runtimes = networks;
    },
  };
}
