// A listening facilitator: the service and metrics listeners, and closing them in order.
import type { Server } from "node:http";
import type { Address } from "viem";
import type { FacilitatorConfig } from "./config/index.js";
import { connectionCounts, createListener, listenOn } from "./http/listen.js";
import { metricsEndpoint } from "./http/metrics-endpoint.js";
import { tracedRequests } from "./http/traced-requests.js";
import { createFacilitator, type Facilitator, type StartFacilitatorOptions } from "./server.js";
import { StartupError } from "./startup-error.js";

/** A listening facilitator. */
export interface RunningFacilitator {
  url: string;
  /** Where Prometheus metrics are served (`…/metrics`, its own listener); absent with METRICS=false. */
  metricsUrl?: string;
  relayers: Address[];
  facilitator: Facilitator;
  /** Stops taking requests, lets settles in flight finish (bounded by `graceMs`), closes connections. */
  close(graceMs?: number): Promise<void>;
}

/**
 * Assembles the facilitator and listens on `config.host:config.port` (port 0 = any free port), and
 * unless `config.metrics` is off serves `/metrics` on `config.metricsHost:config.metricsPort`.
 */
export async function startFacilitator(config: FacilitatorConfig, options: StartFacilitatorOptions = {}): Promise<RunningFacilitator> {
  const facilitator = await createFacilitator(config, options);
  const { logger } = facilitator.context;
  const listener = (name: string, handler: Parameters<typeof createListener>[0]) =>
    createListener(handler, {
      name,
      limits: config.http,
      logger,
      // The connections of a proxy named in TRUST_PROXY carry many clients: no per-client cap for them. A
      // hop count names no proxy (Express trusts every address at hop 0 then): it exempts nobody.
      isTrustedProxy: Array.isArray(config.trustProxy)
        ? (address) => (facilitator.app.get("trust proxy fn") as (address: string, hop: number) => boolean)(address, 0)
        : () => false,
      onDropped: (reason) => facilitator.metrics.connectionDropped(name, reason),
      onIdleClosed: () => facilitator.metrics.idleConnectionClosed(name),
      onWaiting: (event) => facilitator.metrics.connectionWaiting(name, event),
    });
  const servers: Server[] = [];
  const bind = async (server: Server, host: string, port: number, variable: string, hint: string) => {
    try {
      const url = await listenOn(server, host, port);
      servers.push(server);
      return url;
    } catch (error) {
      await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
      await facilitator.close(0);
      if ((error as NodeJS.ErrnoException).code === "EADDRINUSE") {
        throw new StartupError(`${variable}: ${host}:${port} is already in use; choose another port (${hint})`, { code: "port_in_use", cause: error });
      }
      throw error;
    }
  };
  const tracer = facilitator.tracing?.tracer;
  const server = listener("service", tracer ? tracedRequests(facilitator.app, tracer) : facilitator.app);
  facilitator.metrics.watchConnections("service", () => connectionCounts(server));
  const url = await bind(server, config.host, config.port, "PORT", "PORT=… or --port …");
  const metricsUrl = config.metrics
    ? await bind(listener("metrics", metricsEndpoint(facilitator.metrics.registry, logger)), config.metricsHost, config.metricsPort, "METRICS_PORT", "METRICS_PORT=…, or METRICS=false")
    : undefined;
  let closing: Promise<void> | undefined;
  return {
    url,
    ...(metricsUrl ? { metricsUrl: `${metricsUrl}/metrics` } : {}),
    relayers: facilitator.relayers,
    facilitator,
    close(graceMs = 30_000) {
      // Open dashboard streams never go idle: end them, or closing would wait out the grace.
      facilitator.dashboard?.close();
      closing ??= Promise.all(
        servers.map(
          (each) =>
            new Promise<void>((resolve) => {
              const timer = setTimeout(() => each.closeAllConnections(), graceMs);
              // Keep-alive connections go idle as their last request (a settle in flight) is answered: close them then.
              const sweep = setInterval(() => each.closeIdleConnections(), 100);
              each.close(() => {
                clearTimeout(timer);
                clearInterval(sweep);
                resolve();
              });
              each.closeIdleConnections();
            }),
        ),
      )
        // Then release the relayer key leases (others take the keys at once) and close the ledger.
        .then(() => facilitator.close(graceMs));
      return closing;
    },
  };
}
