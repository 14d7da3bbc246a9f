// The seller on its own: FACILITATOR_URL (e.g. from `npx cronos-x402 start`), PAY_TO and PORT from the environment.
import { getAddress } from "viem";
import { createSeller } from "./app.ts";

const facilitatorUrl = process.env.FACILITATOR_URL ?? "http://127.0.0.1:8402";
// Hardhat account #1: the local stack's suggested payTo. Set PAY_TO to your own address anywhere else.
const payTo = getAddress(process.env.PAY_TO ?? "0x70997970C51812dc3A010C7d01b50e0d17dc79C8");
const port = Number(process.env.PORT ?? 4021);

createSeller({ facilitatorUrl, payTo }).listen(port, "127.0.0.1", () => {
  console.log(`seller on http://127.0.0.1:${port}/weather (facilitator ${facilitatorUrl}, paying ${payTo})`);
});
