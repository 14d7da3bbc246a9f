// Verify's budget (METRICS_VERIFY_STAGES): microseconds per stage per scrape window, and the main thread's CPU time.
import { Gauge, type Registry } from "prom-client";
import { mainThreadMicros, VERIFY_STAGES, type StageClock } from "../../settlement/stages.js";

/**
 * The verify budget as gauges, over the window since the previous scrape (each scrape starts a new one:
 * for the bench, which scrapes before and after a run): microseconds per verify by stage, the verifies
 * answered and those whose state read waited; and the main thread's CPU time since start.
 */
export function watchStages(registry: Registry, clock: StageClock): void {
  let window: ReturnType<StageClock["take"]> | undefined;
  // The gauges of one scrape read one window.
  const taken = () => (window ??= clock.take());
  new Gauge({
    name: "x402_verify_stage_microseconds",
    help: "microseconds per verify spent in each stage since the previous scrape (METRICS_VERIFY_STAGES; trimmed mean of the stage's samples)",
    labelNames: ["stage"],
    registers: [registry],
    collect() {
      const { micros } = taken();
      for (const stage of VERIFY_STAGES) this.set({ stage }, micros[stage]);
    },
  });
  new Gauge({
    name: "x402_verify_stage_verifies",
    help: "verify requests answered since the previous scrape (METRICS_VERIFY_STAGES); `waited`: those whose state read waited on I/O",
    labelNames: ["kind"],
    registers: [registry],
    collect() {
      const { verifies, waited } = taken();
      this.set({ kind: "answered" }, verifies);
      this.set({ kind: "waited" }, waited);
      window = undefined;
    },
  });
  new Gauge({
    name: "x402_main_thread_cpu_microseconds",
    help: "CPU time of the main thread (the event loop) since start",
    registers: [registry],
    collect() {
      this.set(mainThreadMicros());
    },
  });
}
