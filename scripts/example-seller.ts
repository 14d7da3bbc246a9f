// `npm run example:seller`: a seller with one paid JSON endpoint, `GET /weather`, for 0.01 USDC.e on
// cronos-testnet. Run `npm start` first (the local chains and the facilitator), then this, then
// `npm run example:buyer`.
//
// Environment:
//   SELLER_PORT      port to listen on, on 127.0.0.1 (default 4021; 0 = any free port)
//   FACILITATOR_URL  the facilitator (default http://127.0.0.1:8402, the one `npm start` runs)
//   PAY_TO           the address that receives the payments (default Hardhat account #1, the stack's
//                    suggested seller; a PUBLIC test account, LOCAL-ONLY)
// An empty variable counts as unset.
import type { AddressInfo } from "node:net";
import express from "express";
import { createFacilitatorClient, getPayment, paymentRequirements, requirePayment } from "../src/seller/index.js";

const port = Number(process.env.SELLER_PORT || 4021);
const facilitatorUrl = process.env.FACILITATOR_URL || "http://127.0.0.1:8402";
const payTo = process.env.PAY_TO || "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const PRICE = 10_000n; // 0.01 USDC.e (6 decimals)

if (!Number.isInteger(port) || port < 0 || port > 65_535) {
  process.stderr.write(`error: SELLER_PORT must be a port number, got "${process.env.SELLER_PORT}"\n`);
  process.exit(2);
}

let requirements;
try {
  requirements = paymentRequirements({
    network: "cronos-testnet",
    payTo,
    amount: PRICE,
    description: "Current weather in Cronos City",
    resource: "/weather",
  });
} catch (error) {
  process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)} (check PAY_TO)\n`);
  process.exit(2);
}

const app = express();
app.disable("x-powered-by");

// Unpaid: 402 with the requirements. Paid: verified and settled by the facilitator, then this handler
// runs; `payment` (txHash, from, to, value, blockNumber, timestamp) is merged into the JSON answer.
app.get("/weather", requirePayment(requirements, { facilitatorUrl }), (req, res) => {
  const payment = getPayment(req);
  const block = payment?.receipt.blockNumber === undefined ? "" : ` (block ${payment.receipt.blockNumber})`;
  console.log(`paid (${payment?.dialect}): ${payment?.receipt.value} base units from ${payment?.receipt.from}, tx ${payment?.receipt.txHash}${block}`);
  res.json({ location: "Cronos City", temperatureC: 21, conditions: "sunny", windKph: 9 });
});

const server = app.listen(port, "127.0.0.1", () => {
  const { port: bound } = server.address() as AddressInfo;
  console.log(`example seller listening on http://127.0.0.1:${bound}`);
  console.log(`  GET /weather costs 0.01 USDC.e (${PRICE} base units) on cronos-testnet, paid to ${requirements.payTo}`);
  console.log(`  facilitator ${facilitatorUrl}`);
  // Not needed to serve, but a missing facilitator is the usual mistake: say so at once.
  createFacilitatorClient({ url: facilitatorUrl, timeoutMs: 3_000 })
    .supported()
    .then((supported) => {
      const networks = supported.kinds.map((kind) => kind.network);
      if (!networks.includes("cronos-testnet")) console.error(`warning: the facilitator does not support cronos-testnet (it supports: ${networks.join(", ") || "nothing"})`);
    })
    .catch((error: unknown) => {
      console.error(`warning: the facilitator at ${facilitatorUrl} does not answer (${error instanceof Error ? error.message : String(error)}); run \`npm start\` first`);
    });
});
server.on("error", (error: NodeJS.ErrnoException) => {
  const hint = error.code === "EADDRINUSE" ? `: port ${port} is in use; choose another with SELLER_PORT=N` : "";
  process.stderr.write(`error: cannot listen on 127.0.0.1:${port}: ${error.message}${hint}\n`);
  process.exit(1);
});

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
