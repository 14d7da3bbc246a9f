// Signature recovery's metrics: where recoveries ran (inline, a worker, …), workers lost, the pool's queue.
import { Counter, Gauge, type Registry } from "prom-client";
import type { RecoveryPath, WorkerLoss } from "../../chain/recovery-pool.js";
import type { FacilitatorMetrics } from "./types.js";

const PATHS: readonly RecoveryPath[] = ["inline", "worker", "starting", "full", "late", "rescued"];

/** The recovery area's metrics on `registry`. */
export function recoveryMetrics(registry: Registry): Pick<FacilitatorMetrics, "signaturesRecovered" | "recoveryWorkerLost" | "watchRecovery"> {
  const recovered = new Counter({
    name: "x402_signature_recoveries_total",
    help: "payers' signatures recovered, by where: inline (the main thread, idle), worker, starting (inline, no worker ready yet), full (inline, the queue at its bound), late (inline, its worker had not answered within RECOVERY_LATE_MS), rescued (inline, its worker died or hung)",
    labelNames: ["path"],
    registers: [registry],
  });
  // One child per path, bound once: no label hashing per recovery.
  const byPath = new Map(PATHS.map((path) => [path, recovered.labels(path)]));
  const batches = new Counter({
    name: "x402_recovery_batches_total",
    help: "batches of recoveries answered by the worker threads (x402_signature_recoveries_total{path=\"worker\"} over this: the mean batch)",
    registers: [registry],
  });
  const lost = new Counter({
    name: "x402_recovery_workers_lost_total",
    help: "recovery worker threads lost and replaced, by reason: exited (crashed) or hung (no answer within the time bound)",
    labelNames: ["reason"],
    registers: [registry],
  });
  let state: (() => { workers: number; ready: number; queued: number }) | undefined;
  new Gauge({
    name: "x402_recovery_pool",
    help: "the recovery pool when scraped: worker threads (workers), those ready (ready), recoveries waiting or in workers (queued)",
    labelNames: ["what"],
    registers: [registry],
    collect() {
      if (!state) return;
      const now = state();
      for (const what of ["workers", "ready", "queued"] as const) this.set({ what }, now[what]);
    },
  });
  return {
    signaturesRecovered(path, count) {
      byPath.get(path)!.inc(count);
      if (path === "worker") batches.inc();
    },
    recoveryWorkerLost: (why: WorkerLoss) => lost.inc({ reason: why }),
    watchRecovery(read) {
      state = read;
    },
  };
}
