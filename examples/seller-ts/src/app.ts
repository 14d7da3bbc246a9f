import express, { type Express } from "express";
import { paymentRequirements, requirePayment } from "cronos-x402-facilitator-kit/seller";
import type { NetworkName } from "cronos-x402-facilitator-kit/protocol";
import type { Address } from "viem";

/** What the seller needs to know: where its facilitator is, and whom buyers pay. */
export interface SellerOptions {
  facilitatorUrl: string;
  payTo: Address;
  network?: NetworkName;
  /** USDC.e base units (6 decimals) per request; default 0.01 USDC.e. */
  price?: bigint;
}

/** A paid JSON endpoint: `GET /weather` costs `price`, answered once the facilitator has settled the payment. */
export function createSeller(options: SellerOptions): Express {
  const app = express();
  const requirements = paymentRequirements({
    network: options.network ?? "cronos-testnet",
    payTo: options.payTo,
    amount: options.price ?? 10_000n,
    description: "Today's weather",
  });
  app.get("/weather", requirePayment(requirements, { facilitatorUrl: options.facilitatorUrl }), (_req, res) => {
    res.json({ city: "Singapore", forecast: "thunderstorms", celsius: 31 });
  });
  app.get("/", (_req, res) => res.json({ paid: ["/weather"] }));
  return app;
}
