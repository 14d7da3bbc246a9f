// The floor for `npm run bench:verify`: Express with the facilitator's JSON body parser, answering verify's
// valid answer as a constant (no checks, no chain). Prints one JSON line `{"url": …}` when listening (port 0).
import express from "express";
import { serveForBench } from "./serve.js";

const app = express();
app.disable("x-powered-by");
app.set("etag", false);
app.use(express.json({ limit: 64 * 1024, type: "application/json", strict: false }));
app.post("/v2/x402/verify", (_req, res) => {
  res.json({ isValid: true, invalidReason: null });
});
serveForBench(app);
