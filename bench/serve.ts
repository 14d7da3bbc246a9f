// Benchmark helper: serves a bench server's Express app on a free loopback port, with GET /cpu (the main
// thread's CPU time so far, µs) for bench:verify's CPU per request; prints one JSON line `{"url": …}` when
// listening, and closes on SIGTERM.
import type { Express } from "express";
import type { AddressInfo } from "node:net";

export function serveForBench(app: Express): void {
  app.get("/cpu", (_req, res) => {
    const { user, system } = process.threadCpuUsage();
    res.json({ mainThreadMicros: user + system });
  });
  const server = app.listen(0, "127.0.0.1", () => {
    console.log(JSON.stringify({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
  });
  process.on("SIGTERM", () => server.close(() => process.exit(0)));
}
