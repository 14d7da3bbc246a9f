// Schema bombs (issue 39): `npm run bench:schema-bombs`. A JSON Schema written by a payer, made to cost a
// validator that runs it (every level `allOf` of two `$ref`s to the next: 28 levels froze ajv for 1.1 s, 40 for
// over an hour), sent at each entrance that once ran it: verify and settle (in the payment-identifier
// extension), the kit's seller middleware (in a PAYMENT-SIGNATURE) and the catalog (a settle declaring a
// resource with it). The local stack runs in a child process; a kit seller runs here. Prints each entrance's
// answer time, one request at a time (BENCH_BOMB_ROUNDS each: no schema, 30 and 60 levels in turn), against
// the issue's bound of 50 ms. Asserts nothing (test/facilitator/schema-bombs.test.ts does, without timing).
import os from "node:os";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import type { Address, Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { createV2PaymentPayload } from "../src/buyer/index.js";
import { encodeBase64Json } from "../src/protocol/header.js";
import { paymentRequirements, requirePayment } from "../src/seller/index.js";
import { doublingSchema } from "../test/helpers/schema-bombs.js";
import { percentile, startBenchTarget } from "./stack.js";

const ROUNDS = Number(process.env.BENCH_BOMB_ROUNDS ?? 30);
const BOUND_MS = 50;
const PAY_TO: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";
/** The bomb's levels in a round: none (the same request without a schema, for comparison), 30, 60. */
const LEVELS = [0, 30, 60] as const;
const levelsOf = (round: number) => LEVELS[(round + LEVELS.length) % LEVELS.length]!;

const stack = await startBenchTarget(0, 2, { RATE_LIMIT_VERIFY_PER_MINUTE: "0", RATE_LIMIT_SETTLE_PER_MINUTE: "0", RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "0", MAX_CONNECTIONS_PER_CLIENT: "0" });
const server = createServer();
try {
  const net = stack.info.networks["cronos-testnet"]!;
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, node ${process.version}, load average ${os.loadavg().map((n) => n.toFixed(2)).join(" ")}`);
  const buyers = net.buyers.map((buyer) => privateKeyToAccount(buyer.privateKey as Hex));
  const requirements = paymentRequirements({ network: "cronos-testnet", payTo: PAY_TO, amount: 10_000n, resource: "https://seller.example/report", discovery: { input: { city: "Oslo" } } });
  server.on("request", express().get("/report", requirePayment(requirements, { facilitatorUrl: stack.info.facilitatorUrl, paymentIdentifier: "optional" }), (_req, res) => void res.json({ report: "sunny" })));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const sellerUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/report`;
  const offer = JSON.parse(Buffer.from((await fetch(sellerUrl)).headers.get("PAYMENT-REQUIRED")!, "base64").toString("utf8")) as {
    accepts: Array<Record<string, unknown>>;
    resource: { url: string };
    extensions: Record<string, unknown>;
  };

  let signed = 0;
  /** A fresh x402 v2 payment of the seller's offer whose payment-identifier extension carries the bomb. */
  const bombed = async (levels: number) => {
    const payment = await createV2PaymentPayload({ signer: buyers[signed++ % buyers.length]!, requirements: offer.accepts[0]!, resource: offer.resource, paymentId: `pay_bomb_${Date.now()}_${signed}` });
    const identifier = (payment.extensions as Record<string, { info: unknown }>)["payment-identifier"]!;
    return { ...payment, extensions: { "payment-identifier": { info: identifier.info, ...(levels > 0 ? { schema: doublingSchema(levels) } : {}) } } };
  };
  const post = async (path: string, body: unknown) => {
    const started = performance.now();
    const response = await fetch(`${stack.info.facilitatorUrl}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const answer = (await response.json()) as { isValid?: boolean; success?: boolean };
    return { ms: performance.now() - started, ok: response.status === 200 && (answer.isValid ?? answer.success) === true };
  };

  const entrances: Record<string, (round: number) => Promise<{ ms: number; ok: boolean }>> = {
    "POST /v2/x402/verify (identifier schema)": async (round) => post("/v2/x402/verify", { x402Version: 2, paymentPayload: await bombed(levelsOf(round)), paymentRequirements: offer.accepts[0] }),
    "POST /v2/x402/settle (identifier schema)": async (round) => post("/v2/x402/settle", { x402Version: 2, paymentPayload: await bombed(levelsOf(round)), paymentRequirements: offer.accepts[0] }),
    "seller middleware (PAYMENT-SIGNATURE)": async (round) => {
      const header = encodeBase64Json(await bombed(levelsOf(round)));
      const started = performance.now();
      const response = await fetch(sellerUrl, { headers: { "PAYMENT-SIGNATURE": header } });
      await response.arrayBuffer();
      return { ms: performance.now() - started, ok: response.status === 200 };
    },
    "POST /v2/x402/settle (catalog declaration)": async (round) => {
      const payment = await bombed(levelsOf(round));
      const levels = levelsOf(round);
      const declaration = { info: { input: { type: "http", method: "GET", queryParams: { round: String(round) } } }, schema: levels > 0 ? doublingSchema(levels) : {} };
      const requirements = offer.accepts[0]!;
      const extra = { ...(requirements.extra as object), resource: { url: `https://seller.example/bomb/${round}` }, bazaar: declaration };
      return post("/v2/x402/settle", { x402Version: 2, paymentPayload: payment, paymentRequirements: { ...requirements, extra } });
    },
  };
  console.log(`${ROUNDS} requests per entrance, one at a time, without a schema, with 30 and 60 levels in turn (the issue's bound: ${BOUND_MS} ms, read at the median):`);
  for (const [label, send] of Object.entries(entrances)) {
    await send(-1); // a first request warms the paths up
    const times: Record<number, number[]> = { 0: [], 30: [], 60: [] };
    let answered = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const { ms, ok } = await send(round);
      times[levelsOf(round)]!.push(ms);
      if (ok) answered++;
    }
    const median = (levels: number) => percentile(times[levels]!.sort((a, b) => a - b), 50);
    const summary = (levels: number) => `${levels === 0 ? "no schema" : `${levels} levels`} p50 ${median(levels).toFixed(1)} ms, max ${times[levels]!.at(-1)!.toFixed(1)} ms`;
    const verdict = Math.max(median(30), median(60)) <= BOUND_MS ? "within" : "OVER";
    console.log(`  ${label}: ${LEVELS.map(summary).join("; ")}; ${answered}/${ROUNDS} answered valid/paid; bombs' p50 ${verdict} ${BOUND_MS} ms`);
  }
} finally {
  server.close();
  await stack.stop();
}
