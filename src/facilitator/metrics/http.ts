// The HTTP surface's metrics: requests, verify/settle answers and their latency, limits, connections, dashboard streams.
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import { networkOfAnyForm } from "../../protocol/x402v2.js";
import type { FacilitatorMetrics } from "./types.js";
import { seriesOf } from "./series.js";

/** The HTTP area's metrics on `registry`. */
export function httpMetrics(
  registry: Registry,
): Pick<
  FacilitatorMetrics,
  "outcome" | "request" | "rateLimited" | "connectionDropped" | "watchConnections" | "connectionWaiting" | "idleConnectionClosed" | "rateLimitStoreFallback" | "dashboardStream"
> {
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
  const limited = new Counter({
    name: "x402_rate_limited_total",
    help: "requests refused by a rate limit, by route and whose quota ran out (ip, key, payer)",
    labelNames: ["route", "by"],
    registers: [registry],
  });
  const dropped = new Counter({
    name: "x402_http_connections_dropped_total",
    help: "connections refused on arrival (answered 503 and closed, never reset), by reason: MAX_CONNECTIONS were open (server) or their client held MAX_CONNECTIONS_PER_CLIENT and four times as many waiting (client)",
    labelNames: ["listener", "reason"],
    registers: [registry],
  });
  const waitingConnections = new Counter({
    name: "x402_http_connections_waiting_total",
    help: "connections over their client's MAX_CONNECTIONS_PER_CLIENT that waited for a place (queued), served connections of that client asked to close after their answer (retired) or, idle, closed (yielded) to make one, and waiting connections refused after CONNECTION_QUEUE_MS (expired)",
    labelNames: ["listener", "event"],
    registers: [registry],
  });
  const listeners = new Map<string, () => { served: number; yielded: number; waiting: number }>();
  new Gauge({
    name: "x402_http_connections",
    help: "connections held now, by listener and state: served (handed to HTTP, counted against their client's MAX_CONNECTIONS_PER_CLIENT), yielded (handed to HTTP, idle, having given their place to a waiting one of their client) or waiting (over their client's MAX_CONNECTIONS_PER_CLIENT, for a place)",
    labelNames: ["listener", "state"],
    registers: [registry],
    collect() {
      for (const [listener, counts] of listeners) {
        const { served, yielded, waiting } = counts();
        this.set({ listener, state: "served" }, served);
        this.set({ listener, state: "yielded" }, yielded);
        this.set({ listener, state: "waiting" }, waiting);
      }
    },
  });
  const idleClosed = new Counter({
    name: "x402_http_idle_connections_closed_total",
    help: "idle keep-alive connections closed to make room for new ones (near MAX_CONNECTIONS, or their client at its cap)",
    labelNames: ["listener"],
    registers: [registry],
  });
  const storeFallbacks = new Counter({
    name: "x402_rate_limit_store_fallbacks_total",
    help: "requests judged by this instance's own rate-limit count because the shared store (the database) did not answer within RATE_LIMIT_STORE_WAIT_MS (slow) or failed (error)",
    labelNames: ["limiter", "reason"],
    registers: [registry],
  });
  const streamsOpen = new Gauge({ name: "x402_dashboard_streams_open", help: "dashboard event streams open now", registers: [registry] });
  const streamsEnded = new Counter({
    name: "x402_dashboard_streams_total",
    help: "dashboard event streams by what happened: refused (too many open), or ended because the client left (client), read nothing for DASHBOARD_STREAM_STALL_SECONDS (stalled), lived DASHBOARD_STREAM_MAX_SECONDS (lifetime) or the facilitator stopped (shutdown)",
    labelNames: ["event"],
    registers: [registry],
  });
  // Each answer's series, found once per label set (prom-client hashes a labels object on every call).
  const outcomeSeries = seriesOf((route: string, network: string, outcome: string, dialect: string) => outcomes.labels({ route, network, outcome, dialect }));
  const latencySeries = seriesOf((route: string) => latency.labels({ route }));
  const requestSeries = seriesOf((route: string, status: number) => requests.labels({ route, status: String(status) }));
  return {
    outcome(record) {
      // The network label is bounded: a caller's unknown network string counts as "other".
      const network = networkOfAnyForm(record.network) ?? "other";
      outcomeSeries(record.route, network, record.code, record.dialect).inc();
      latencySeries(record.route).observe(record.durationMs / 1000);
    },
    request(route, status) {
      requestSeries(route, status).inc();
    },
    rateLimited(route, by) {
      limited.inc({ route, by });
    },
    connectionDropped(listener, reason) {
      dropped.inc({ listener, reason });
    },
    watchConnections(listener, counts) {
      listeners.set(listener, counts);
    },
    connectionWaiting(listener, event) {
      waitingConnections.inc({ listener, event });
    },
    idleConnectionClosed(listener) {
      idleClosed.inc({ listener });
    },
    rateLimitStoreFallback(limiter, reason) {
      storeFallbacks.inc({ limiter, reason });
    },
    dashboardStream(event) {
      if (event === "opened") streamsOpen.inc();
      else if (event !== "refused") streamsOpen.dec();
      if (event !== "opened") streamsEnded.inc({ event });
    },
  };
}
