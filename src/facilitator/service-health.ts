// The service's healthcheck: each network's checks and the ledger's, each answering within HEALTH_TIMEOUT_MS, cached HEALTH_CACHE_MS.
import type { RpcTransport } from "../chain/rpc-transport.js";
import type { NetworkName } from "../protocol/networks.js";
import type { NetworkRuntime } from "../settlement/runtime.js";
import type { FacilitatorConfig } from "./config/index.js";
import type { Coordination } from "./coordination.js";
import { boundedCheck, healthReport, inspectNetwork, lateInspection, type HealthReport, type LedgerInspection, type NetworkInspection } from "./health.js";
import { memoizeFor } from "./memoize.js";

/** Where the healthcheck looks: the networks (with their transports and start-up checks) and the ledger. */
export interface ServiceHealthParameters {
  config: FacilitatorConfig;
  networks: ReadonlyMap<NetworkName, NetworkRuntime>;
  rpcOf: ReadonlyMap<NetworkName, RpcTransport>;
  startupInspections: ReadonlyMap<NetworkName, NetworkInspection>;
  coordination: Pick<Coordination, "inspect" | "ledger">;
  /** Wall clock (ms) of the cache and the block age. */
  now: () => number;
}

/** The healthcheck's answer, as often as asked (cached for `HEALTH_CACHE_MS`); the ledger's first inspection is awaited here. */
export async function serviceHealth({ config, networks, rpcOf, startupInspections, coordination, now }: ServiceHealthParameters): Promise<() => Promise<HealthReport>> {
  // Each part of the healthcheck answers within HEALTH_TIMEOUT_MS: a network whose RPC hangs, or a
  // database that does not answer, is reported from its last answer (slow) rather than waited for.
  const networkChecks = [...networks.values()].map((runtime) => {
    const rpc = rpcOf.get(runtime.config.network)!;
    return boundedCheck(
      () =>
        inspectNetwork({
          client: runtime.client,
          config: runtime.config,
          relayers: runtime.relayer.addresses,
          relayerMinBalanceWei: config.relayerMinBalanceWei,
          maxBlockAgeSeconds: config.healthMaxBlockAgeSeconds,
          rpcTimeoutMs: config.rpcTimeoutMs,
          nowMs: now(),
          rpcStates: rpc.states,
          ...(runtime.index ? { index: runtime.index } : {}),
        }),
      config.healthTimeoutMs,
      (last, waitedMs) => lateInspection(runtime.config, runtime.relayer.addresses, last, waitedMs, rpc.snapshot()),
      startupInspections.get(runtime.config.network),
    );
  });
  const ledgerCheck = boundedCheck(
    coordination.inspect,
    config.healthTimeoutMs,
    (last, waitedMs): LedgerInspection => ({
      ...(last?.value ?? { backend: coordination.ledger.backend, location: "", reachable: false, migrations: { applied: 0, expected: 0 }, shared: coordination.ledger.backend === "postgres", leases: [] }),
      state: "slow",
      error: `no answer within ${waitedMs} ms`,
    }),
    await coordination.inspect().catch(() => undefined),
  );
  return memoizeFor(config.healthCacheMs, () => healthReport(networkChecks, ledgerCheck), now);
}
