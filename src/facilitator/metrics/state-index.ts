// The token state index's metrics: where it stands, how far behind, its backfill, its faults and history changes; verify's state source.
import { Counter, type Registry } from "prom-client";
import type { NetworkName } from "../../protocol/networks.js";
import type { NetworkRuntime } from "../../settlement/runtime.js";
import type { IndexStatus } from "../../state/index.js";
import type { FacilitatorMetrics } from "./types.js";
import { networkGauge } from "./series.js";

/** The state index area's metrics on `registry`, read from the networks `runtimes()` gives when scraped. */
export function stateIndexMetrics(
  registry: Registry,
  runtimes: () => ReadonlyMap<NetworkName, NetworkRuntime>,
): Pick<FacilitatorMetrics, "indexFollowError" | "indexHistoryChange" | "verifyStateSource"> {
  // The token state index, read from memory when scraped.
  const indexGauge = (name: string, help: string, value: (status: IndexStatus) => number | undefined) =>
    networkGauge(registry, runtimes, name, help, (runtime) => runtime.index && value(runtime.index.status()));
  indexGauge("x402_state_index_following", "1 while the token state index is at the chain's head and answers verify, else 0", (status) => (status.state === "following" ? 1 : 0));
  indexGauge("x402_state_index_block", "the block the token state index is true at", (status) => status.block);
  indexGauge("x402_state_index_lag_blocks", "blocks the chain has that the token state index has not read yet", (status) =>
    status.block === undefined || status.chainBlock === undefined ? undefined : Math.max(0, status.chainBlock - status.block),
  );
  indexGauge("x402_state_index_confirmed_age_seconds", "seconds since the token state index last confirmed it is at the chain's head", (status) =>
    status.confirmedMsAgo === undefined ? undefined : status.confirmedMsAgo / 1000,
  );
  indexGauge("x402_state_index_backfill_block", "the block the nonce backfill has reached", (status) => status.backfill.throughBlock);
  indexGauge("x402_state_index_backfill_target_block", "the block the nonce backfill must reach (where the index started following)", (status) => status.backfill.targetBlock);
  const indexErrors = new Counter({
    name: "x402_state_index_follow_errors_total",
    help: "times the token state index could not follow the chain, by kind (rpc: a fault; inconsistent: answers that do not fit together)",
    labelNames: ["network", "kind"],
    registers: [registry],
  });
  const indexHistoryChanges = new Counter({
    name: "x402_state_index_history_changes_total",
    help: "times the chain's history changed under the token state index: rewind (back to a block both histories share), rebuild (started over)",
    labelNames: ["network", "kind"],
    registers: [registry],
  });
  const verifySources = new Counter({
    name: "x402_verify_state_source_total",
    help: "verify checks by where their chain state came from: the token state index, or reads of the chain",
    labelNames: ["network", "source"],
    registers: [registry],
  });
  return {
    indexFollowError(network, kind) {
      indexErrors.inc({ network, kind });
    },
    indexHistoryChange(network, kind) {
      indexHistoryChanges.inc({ network, kind });
    },
    verifyStateSource(network, source) {
      verifySources.inc({ network, source });
    },
  };
}
