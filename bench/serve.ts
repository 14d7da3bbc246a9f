// Benchmark helper: serves a bench server's Express app on a free loopback port, with GET /cpu (the main
// thread's CPU time so far, µs, and its GC pauses so far: count, total and longest ms, minor and major) for
// bench:verify; prints one JSON line `{"url": …}` when listening, and closes on SIGTERM.
import type { Express } from "express";
import type { AddressInfo } from "node:net";
import { constants, PerformanceObserver, type PerformanceEntry } from "node:perf_hooks";

export function serveForBench(app: Express): void {
  const gc = { minor: { count: 0, ms: 0, longestMs: 0 }, major: { count: 0, ms: 0, longestMs: 0 } };
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const { detail } = entry as PerformanceEntry & { detail?: { kind?: number } };
      const kind = detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR ? gc.minor : gc.major;
      kind.count++;
      kind.ms += entry.duration;
      kind.longestMs = Math.max(kind.longestMs, entry.duration);
    }
  }).observe({ entryTypes: ["gc"] });
  app.get("/cpu", (_req, res) => {
    const { user, system } = process.threadCpuUsage();
    res.json({ mainThreadMicros: user + system, gc });
  });
  const server = app.listen(0, "127.0.0.1", () => {
    console.log(JSON.stringify({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
  });
  process.on("SIGTERM", () => server.close(() => process.exit(0)));
}
