// The seller middleware's retry window: `npm run bench:seller`. The local stack runs in a child process
// (automine); a kit seller runs here. Prints, per kind of request, its latency through the seller (one at
// a time, BENCH_SELLER_ROUNDS each) and the facilitator calls it made: a fresh payment, a retry within
// maxTimeoutSeconds, the same payment after it (402), in the Cronos dialect and in x402 v2 under a payment
// identifier. And the seller's heap before and after the retries: the window keeps one small entry per payment
// served (its route), until its window ends.
import os from "node:os";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import type { Address, Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader, createV2PaymentPayload } from "../src/buyer/index.js";
import { encodeBase64Json } from "../src/protocol/header.js";
import { createFacilitatorClient, paymentRequirements, requirePayment } from "../src/seller/index.js";
import { percentile, startBenchTarget } from "./stack.js";

const ROUNDS = Number(process.env.BENCH_SELLER_ROUNDS ?? 40);
const PAY_TO: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
const WINDOW_SECONDS = 300;

const stack = await startBenchTarget(0, 2, { RATE_LIMIT_VERIFY_PER_MINUTE: "0", RATE_LIMIT_SETTLE_PER_MINUTE: "0", RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "0", MAX_CONNECTIONS_PER_CLIENT: "0" });
try {
  const net = stack.info.networks["cronos-testnet"]!;
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, node ${process.version}; stack ready in ${stack.readyMs.toFixed(0)} ms`);
  const buyers = net.buyers.map((buyer) => privateKeyToAccount(buyer.privateKey as Hex));
  const requirements = paymentRequirements({ network: "cronos-testnet", payTo: PAY_TO, amount: 10_000n, maxTimeoutSeconds: WINDOW_SECONDS });

  // The seller's clock: now, or past every window (what a replay an hour later meets).
  let skewMs = 0;
  const calls: string[] = [];
  const counting = (input: string | URL | Request, init?: RequestInit) => {
    calls.push(new URL(String(input)).pathname.split("/").at(-1)!);
    return fetch(input, init);
  };
  const facilitator = createFacilitatorClient({ url: stack.info.facilitatorUrl, fetch: counting });
  const app = express();
  app.get("/report", requirePayment(requirements, { facilitator, clock: () => Date.now() + skewMs, paymentIdentifier: "optional" }), (_req, res) => void res.json({ report: "sunny" }));
  const server = createServer(app).listen(0, "127.0.0.1");
  await once(server, "listening");
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/report`;

  const offerResponse = await fetch(url);
  const offer = JSON.parse(Buffer.from(offerResponse.headers.get("PAYMENT-REQUIRED")!, "base64").toString("utf8")) as { accepts: Array<Record<string, unknown>>; extensions: Record<string, unknown> };

  /** Sends each header once in turn; the latencies (sorted), the statuses seen and the facilitator calls per request. */
  async function run(headers: ReadonlyArray<Record<string, string>>) {
    const latencies: number[] = [];
    const statuses = new Map<number, number>();
    calls.length = 0;
    for (const header of headers) {
      const started = performance.now();
      const response = await fetch(url, { headers: header });
      await response.arrayBuffer();
      latencies.push(performance.now() - started);
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
    }
    const perRequest = new Map<string, number>();
    for (const call of calls) perRequest.set(call, (perRequest.get(call) ?? 0) + 1);
    return {
      latencies: latencies.sort((a, b) => a - b),
      statuses: Object.fromEntries(statuses),
      calls: [...perRequest].map(([call, n]) => `${call} ${(n / headers.length).toFixed(1)}`).join(", "),
    };
  }
  const line = (label: string, result: Awaited<ReturnType<typeof run>>) =>
    console.log(`  ${label.padEnd(44)} p50 ${percentile(result.latencies, 50).toFixed(1)} ms, p99 ${percentile(result.latencies, 99).toFixed(1)} ms; statuses ${JSON.stringify(result.statuses)}; facilitator calls per request: ${result.calls}`);

  const cronos = await Promise.all(Array.from({ length: ROUNDS }, (_, i) => createPaymentHeader({ signer: buyers[i % buyers.length]!, requirements })));
  const v2 = await Promise.all(
    Array.from({ length: ROUNDS }, async (_, i) => encodeBase64Json(await createV2PaymentPayload({ signer: buyers[i % buyers.length]!, requirements: offer.accepts[0]!, extensions: offer.extensions }))),
  );
  const xPayment = cronos.map((header) => ({ "X-PAYMENT": header }));
  const signature = v2.map((header) => ({ "PAYMENT-SIGNATURE": header }));

  console.log(`${ROUNDS} requests of each kind, one at a time (maxTimeoutSeconds ${WINDOW_SECONDS}):`);
  line("Cronos: fresh payment", await run(xPayment));
  const heapBefore = process.memoryUsage().heapUsed;
  line("Cronos: retry within the window", await run(xPayment));
  line("x402 v2 + identifier: fresh payment", await run(signature));
  line("x402 v2 + identifier: retry within the window", await run(signature));
  for (let i = 0; i < 4; i++) await run(xPayment);
  const heapAfter = process.memoryUsage().heapUsed;
  // Past the window by the chain's clock: automine gives each block its own second, so after a few hundred
  // settlements the local chain's time is ahead of the wall clock.
  const latest = await fetch(net.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_getBlockByNumber", params: ["latest", false] }) });
  const chainAheadMs = Number(BigInt(((await latest.json()) as { result: { timestamp: string } }).result.timestamp)) * 1000 - Date.now();
  console.log(`  (the chain's clock is ${(chainAheadMs / 1000).toFixed(0)} s ahead of the wall clock: automine gives each block its own second)`);
  skewMs = chainAheadMs + (WINDOW_SECONDS + 1) * 1000;
  line("Cronos: after the window (402)", await run(xPayment));
  line("x402 v2 + identifier: after the window (402)", await run(signature));
  console.log(`seller heap: ${(heapBefore / 1e6).toFixed(1)} MB before ${ROUNDS * 6} retries, ${(heapAfter / 1e6).toFixed(1)} MB after (one route entry per payment served; GC not forced)`);
  server.close();
} finally {
  await stack.stop();
}
