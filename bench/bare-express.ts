// The floor for `npm run bench:verify`: Express with the facilitator's JSON body parser, answering verify's
// valid answer as a constant (no checks, no chain). Prints one JSON line `{"url": …}` when listening (port 0).
import express from "express";
import type { AddressInfo } from "node:net";

const app = express();
app.disable("x-powered-by");
app.set("etag", false);
app.use(express.json({ limit: 64 * 1024, type: "application/json", strict: false }));
app.post("/v2/x402/verify", (_req, res) => {
  res.json({ isValid: true, invalidReason: null });
});
// The main thread's CPU time so far (µs), for the bench's CPU per request.
app.get("/cpu", (_req, res) => {
  const { user, system } = process.threadCpuUsage();
  res.json({ mainThreadMicros: user + system });
});
const server = app.listen(0, "127.0.0.1", () => {
  console.log(JSON.stringify({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
