// docs/x402-packages.md's seller, verbatim (test/compat checks that it is, and runs it).
import express from "express";
import { paymentMiddleware, x402ResourceServer } from "@x402/express";
import { HTTPFacilitatorClient } from "@x402/core/server";
import { ExactEvmScheme } from "@x402/evm/exact/server";
import { cronosPrice } from "../../src/protocol/index.js";

/** An `@x402/express` seller whose GET /weather costs $0.01 of USDC.e on Cronos testnet or mainnet, settled by this facilitator. */
export function x402Seller(facilitatorUrl: string, payTo: string) {
  const facilitator = new HTTPFacilitatorClient({ url: `${facilitatorUrl}/v2/x402` });
  const server = new x402ResourceServer(facilitator)
    .register("eip155:338", new ExactEvmScheme())
    .register("eip155:25", new ExactEvmScheme());
  const app = express();
  app.use(
    paymentMiddleware(
      {
        "GET /weather": {
          accepts: [
            { scheme: "exact", network: "eip155:338", payTo, price: cronosPrice("eip155:338", "$0.01") },
            { scheme: "exact", network: "eip155:25", payTo, price: cronosPrice("eip155:25", "$0.01") },
          ],
          description: "Weather",
        },
      },
      server,
    ),
  );
  app.get("/weather", (_req, res) => void res.json({ forecast: "sunny" }));
  return app;
}
