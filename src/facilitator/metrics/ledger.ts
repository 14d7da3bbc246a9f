// The ledger's metrics: settlements pending and the oldest's age, the reconciler's moves, key leases, rows set aside.
import { Counter, Gauge, type Registry } from "prom-client";
import type { PendingSummary, SettlementStore } from "../../ledger/types.js";
import { memoizeFor } from "../memoize.js";
import type { CreateMetricsOptions, FacilitatorMetrics } from "./types.js";

/** The ledger area's metrics on `registry`. */
export function ledgerMetrics(registry: Registry, options: CreateMetricsOptions): Pick<FacilitatorMetrics, "watchLedger" | "reconcilerAction" | "leaseChange" | "rowsSetAside"> {
  const reconcilerActions = new Counter({
    name: "x402_reconciler_actions_total",
    help: "settlements the reconciler moved, by action",
    labelNames: ["action"],
    registers: [registry],
  });
  const leaseChanges = new Counter({
    name: "x402_relayer_lease_changes_total",
    help: "relayer key leases this instance acquired or lost",
    labelNames: ["change"],
    registers: [registry],
  });
  let ledger: Pick<SettlementStore, "pendingSummary"> | undefined;
  // The gauges share one ledger read per `cacheMs`, however often `/metrics` is scraped; a read that failed is the ledger down.
  const answer = memoizeFor(options.cacheMs ?? 5_000, (): Promise<{ read?: PendingSummary } | undefined> =>
    ledger ? ledger.pendingSummary().then((read) => ({ read }), () => ({})) : Promise.resolve(undefined),
  );
  const summary = async () => (await answer())?.read;
  new Gauge({
    name: "x402_ledger_up",
    help: "1 when the settlement ledger answered the metrics' last read of it (within METRICS_CACHE_MS), 0 when it failed (the database is down or unreachable)",
    registers: [registry],
    async collect() {
      const read = await answer();
      if (read) this.set(read.read ? 1 : 0);
    },
  });
  new Gauge({
    name: "x402_ledger_pending_settlements",
    help: "settlements claimed or sent, not yet settled or failed (all instances)",
    registers: [registry],
    async collect() {
      const read = await summary();
      if (read) this.set(read.count);
    },
  });
  new Gauge({
    name: "x402_ledger_oldest_pending_seconds",
    help: "age of the oldest settlement still pending (0 when none)",
    registers: [registry],
    async collect() {
      const read = await summary();
      if (read) this.set(read.oldestCreatedAt === undefined ? 0 : Math.max(0, (Date.now() - read.oldestCreatedAt) / 1000));
    },
  });
  const setAside = new Counter({
    name: "x402_ledger_rows_set_aside_total",
    help: "ledger rows of another history of the chain (a local chain restarted or reverted) set aside, never served again, by kind",
    labelNames: ["network", "kind"],
    registers: [registry],
  });
  return {
    watchLedger(watched) {
      ledger = watched;
    },
    reconcilerAction(action) {
      reconcilerActions.inc({ action });
    },
    leaseChange(change) {
      leaseChanges.inc({ change });
    },
    rowsSetAside(network, kind, count) {
      if (count > 0) setAside.inc({ network, kind }, count);
    },
  };
}
