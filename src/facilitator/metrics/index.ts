// The facilitator's Prometheus metrics: one registry, its metrics registered per area (HTTP, chain, ledger, state index, the relayer's runway, signature recovery, verify's stages).
import { Registry, collectDefaultMetrics } from "prom-client";
import { chainMetrics } from "./chain.js";
import { httpMetrics } from "./http.js";
import { ledgerMetrics } from "./ledger.js";
import { recoveryMetrics } from "./recovery.js";
import { runwayMetrics } from "./runway.js";
import { watchStages } from "./stages.js";
import { stateIndexMetrics } from "./state-index.js";
import type { CreateMetricsOptions, FacilitatorMetrics } from "./types.js";

export type { CreateMetricsOptions, FacilitatorMetrics } from "./types.js";

/** Creates the metrics on a registry of their own. */
export function createMetrics(options: CreateMetricsOptions = {}): FacilitatorMetrics {
  const registry = new Registry();
  if (options.defaults) collectDefaultMetrics({ register: registry });
  const http = httpMetrics(registry);
  const { runtimes, readings, ...chain } = chainMetrics(registry, options);
  const ledger = ledgerMetrics(registry, options);
  const index = stateIndexMetrics(registry, runtimes);
  const runway = runwayMetrics(registry, options, runtimes, readings);
  if (options.stages) watchStages(registry, options.stages);
  return {
    registry,
    ...http,
    ...chain,
    ...ledger,
    ...index,
    ...recoveryMetrics(registry),
    outcome(record) {
      http.outcome(record);
      runway.settled(record);
    },
  };
}
