// The local stack's failure controls (issue 32): `npm run bench:faults` (BENCH_RUNS, default 20;
// BENCH_VERIFIES, default 400). (1) The facilitator's link to its chain, where RPC faults live, with none in
// force: verify through the stack's facilitator against one on the same chain's plain in-process transport.
// (2) Each control made and undone. (3) The memory of the most faults the harness holds (100 armed, 100
// ended). (4) The control endpoint's requests per second.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader } from "../src/buyer/index.js";
import { loadConfig } from "../src/facilitator/config/index.js";
import { startFacilitator } from "../src/facilitator/start.js";
import { localAccount } from "../src/harness/accounts.js";
import { MAX_FAULTS, type FaultSpec } from "../src/harness/control/spec.js";
import { startLocalStack } from "../src/harness/stack.js";
import { paymentRequirements } from "../src/seller/index.js";

const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const VERIFIES = Number(process.env.BENCH_VERIFIES ?? 400);

// A forced collection before each heap reading, without a flag on the command line.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const quantile = (ms: number[], q: number) => [...ms].sort((a, b) => a - b)[Math.min(ms.length - 1, Math.floor(q * ms.length))]!;
const line = (label: string, ms: number[]) =>
  console.log(`${label.padEnd(64)} p50 ${quantile(ms, 0.5).toFixed(2).padStart(8)} ms   p99 ${quantile(ms, 0.99).toFixed(2).padStart(8)} ms`);
const timed = async (work: () => Promise<unknown>) => {
  const began = performance.now();
  await work();
  return performance.now() - began;
};

const stack = await startLocalStack({ port: 0, rpcPorts: { "cronos-testnet": 0 }, networks: ["cronos-testnet"], buyers: 1 });
const testnet = stack.networks["cronos-testnet"]!;
const buyer = privateKeyToAccount(testnet.buyers[0]!.privateKey);
// The same chain, a facilitator on its in-process transport without the harness's link (Hardhat account #8: a PUBLIC key, LOCAL-ONLY).
const plain = await startFacilitator(
  loadConfig(
    // The stack's own settings (src/harness/stack.ts), but for the relayer key.
    {
      FACILITATOR_NETWORKS: "cronos-testnet",
      RELAYER_PRIVATE_KEY: localAccount(8).privateKey,
      HOST: "127.0.0.1",
      PORT: "0",
      METRICS_PORT: "0",
      HEAD_CACHE_MS: "0",
      DASHBOARD: "true",
      LEDGER_FILE: ":memory:",
      RATE_LIMIT_VERIFY_PER_MINUTE: "0",
      RATE_LIMIT_SETTLE_PER_MINUTE: "0",
      RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "0",
      RATE_LIMIT_PUBLIC_PER_MINUTE: "0",
      MAX_CONNECTIONS_PER_CLIENT: "0",
    },
    { embedded: ["cronos-testnet"] },
  ),
  { transports: { "cronos-testnet": stack.chains["cronos-testnet"]!.transport } },
);
try {
  const requirements = paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: 10_000n });
  const body = JSON.stringify({ x402Version: 1, paymentHeader: await createPaymentHeader({ signer: buyer, requirements }), paymentRequirements: requirements });
  const verify = (url: string) => timed(async () => {
    const response = await fetch(`${url}/v2/x402/verify`, { method: "POST", headers: { "content-type": "application/json" }, body });
    if (!((await response.json()) as { isValid: boolean }).isValid) throw new Error("verify refused the bench's payment");
  });
  const sample = async (url: string) => {
    const ms: number[] = [];
    for (let i = 0; i < VERIFIES; i++) ms.push(await verify(url));
    return ms;
  };
  // The link's calls per verify, counted by an RPC fault that takes them all (a delay of 1 ms, a huge count).
  const counter = await stack.harness.fault({ kind: "rpc", mode: "delay", delayMs: 1, forCalls: 1_000_000 });
  for (let i = 0; i < 20; i++) await verify(stack.facilitatorUrl);
  const callsPerVerify = (1_000_000 - (await stack.harness.faults()).find((fault) => fault.id === counter.id)!.callsLeft!) / 20;
  await counter.undo();
  // Alternated halves, so a slower moment of a shared machine falls on both.
  const [throughLink, direct] = [[] as number[], [] as number[]];
  for (let half = 0; half < 2; half++) {
    throughLink.push(...(await sample(stack.facilitatorUrl)));
    direct.push(...(await sample(plain.url)));
  }
  console.log(`(1) verify, ${2 * VERIFIES} sequential requests each (${callsPerVerify} JSON-RPC calls on the link a verify, the token index's own polls included), no fault in force`);
  line("  through the stack's link to the chain", throughLink);
  line("  on the plain in-process transport", direct);

  console.log(`(2) a control made, then undone (median of ${RUNS}; in process: stack.harness)`);
  const kinds: Array<[string, FaultSpec]> = [
    ["balance (a transfer, then a mint)", { kind: "balance", address: buyer.address, amount: 0n }],
    ["pause (pauser's transaction, then unpause)", { kind: "pause" }],
    ["blacklist (and off again)", { kind: "blacklist", address: stack.seller }],
    ["rpc refuse", { kind: "rpc", mode: "refuse" }],
    ["busy", { kind: "busy", forSeconds: 60 }],
    ["blocks (stop, resume)", { kind: "blocks" }],
    ["facilitator-down (graceful stop, start on the port)", { kind: "facilitator-down" }],
  ];
  for (const [label, spec] of kinds) {
    const made: number[] = [];
    const undone: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      let undo!: () => Promise<unknown>;
      made.push(await timed(async () => ({ undo } = await stack.harness.fault(spec))));
      undone.push(await timed(() => undo()));
    }
    line(`  ${label}: make`, made);
    line(`  ${label}: undo`, undone);
  }
  const restarts: number[] = [];
  const advances: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    restarts.push(await timed(() => stack.harness.restartFacilitator()));
    advances.push(await timed(() => stack.harness.advanceTime(1)));
  }
  line("  restartFacilitator (cut, then a new one listening)", restarts);
  line("  advanceTime (a block mined)", advances);

  console.log(`(3) memory: ${MAX_FAULTS} armed faults, then ${MAX_FAULTS} ended ones (the most it keeps)`);
  await stack.harness.reset();
  const heap = () => {
    gc();
    return process.memoryUsage().heapUsed;
  };
  const before = heap();
  for (let i = 0; i < MAX_FAULTS; i++) await stack.harness.fault({ kind: "rpc", mode: "delay", delayMs: 1, trigger: "after-verify", methods: ["eth_call"] });
  const armed = heap();
  await stack.harness.reset();
  console.log(`  ${MAX_FAULTS} armed: ${((armed - before) / 1024).toFixed(0)} KiB (${((armed - before) / MAX_FAULTS).toFixed(0)} bytes each)`);
  // Ended faults are kept up to a bound: the heap after 3× and after 30× that many made and undone is the same.
  let made = 0;
  for (const rounds of [3, 30]) {
    for (; made < rounds * MAX_FAULTS; made++) await (await stack.harness.fault({ kind: "busy", forSeconds: 1 })).undo();
    const ended = heap();
    console.log(`  after ${made} made and undone (${(await stack.harness.faults()).length} kept): ${((ended - before) / 1024).toFixed(0)} KiB over the start`);
  }

  console.log("(4) the control endpoint over HTTP, 16 clients side by side");
  for (const [label, call] of [
    ["GET /harness/faults", () => fetch(`${stack.harnessUrl}/faults`).then((r) => r.text())],
    ["POST /harness/faults (busy), then DELETE it", async () => {
      const made = (await (await fetch(`${stack.harnessUrl}/faults`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"kind":"busy","forSeconds":5}' })).json()) as { id: string };
      await (await fetch(`${stack.harnessUrl}/faults/${made.id}`, { method: "DELETE" })).text();
    }],
  ] as const) {
    const total = 2_000;
    let next = 0;
    const began = performance.now();
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (next++ < total) await call();
    }));
    console.log(`  ${label.padEnd(50)} ${(total / ((performance.now() - began) / 1000)).toFixed(0).padStart(6)} /s`);
  }
} finally {
  await plain.close(0);
  await stack.stop();
}
