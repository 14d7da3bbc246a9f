// Settlement under load: `npm run bench:settle`. 100 distinct authorizations fired at once at a
// chain that mines a block every second (interval mining); prints how many settled, over how many
// blocks, the settles per second and the latency distribution. The relayer's local nonce pipeline is
// what is exercised. BENCH_NODE=cronos (default) or ethereum: the chain admits as a Cronos node or as
// EDR alone; BENCH_BLOCK_TIME_MS the block time (500: the real networks' pace); BENCH_LEDGER=embedded
// runs one `npm run instances` facilitator holding three relayer keys (the local stack has one). The
// Cronos pool beside geth's at 0.5 s blocks, one key then three:
//   BENCH_NODE=cronos BENCH_BLOCK_TIME_MS=500 npm run bench:settle; BENCH_NODE=ethereum BENCH_BLOCK_TIME_MS=500 npm run bench:settle
//   BENCH_LEDGER=embedded BENCH_NODE=cronos BENCH_BLOCK_TIME_MS=500 npm run bench:settle (and BENCH_NODE=ethereum)
import os from "node:os";
import type { Address } from "viem";
import { signBodies } from "./sign.js";
import { benchNode, fireSettles, percentile, startBenchTarget, tallySettles } from "./stack.js";

const COUNT = Number(process.env.BENCH_SETTLES ?? 100);
const BLOCK_TIME_MS = Number(process.env.BENCH_BLOCK_TIME_MS ?? 1_000);
const PAY_TO: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

const stack = await startBenchTarget(BLOCK_TIME_MS, 10, { RATE_LIMIT_VERIFY_PER_MINUTE: "0", RATE_LIMIT_SETTLE_PER_MINUTE: "0", RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "0", MAX_CONNECTIONS_PER_CLIENT: "0", POLLING_INTERVAL_MS: "100" });
try {
  const net = stack.info.networks["cronos-testnet"]!;
  const keys = (process.env.BENCH_LEDGER ?? "memory") === "memory" ? 1 : 3;
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, node ${process.version}, load ${os.loadavg().map((load) => load.toFixed(1)).join(" ")}; ledger: ${process.env.BENCH_LEDGER ?? "memory"}; stack ready in ${stack.readyMs.toFixed(0)} ms`);
  console.log(`chain: ${benchNode() === "cronos" ? "a Cronos node (strict nonces)" : "EDR alone (geth's pool)"}, a block every ${BLOCK_TIME_MS} ms; relayer keys: ${keys}`);
  const bodies = signBodies({
    count: COUNT, buyers: net.buyers, network: "cronos-testnet", chainId: 338, token: net.token, domain: net.domain,
    payTo: PAY_TO, value: 10_000n, validBefore: BigInt(Math.floor(Date.now() / 1000) + 3_600),
  });
  const head = async () => {
    const res = await fetch(net.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] }) });
    return Number(BigInt(((await res.json()) as { result: string }).result));
  };
  const startBlock = await head();
  const started = performance.now();
  const burst = fireSettles(stack.info.facilitatorUrl, bodies);
  const results = await Promise.all(burst.answers);
  const wall = performance.now() - started;
  burst.close();
  const { settled, failed, blocks, lastBlock: last, latencies } = tallySettles(results);
  console.log(`${COUNT} settles at once, blocks every ${BLOCK_TIME_MS} ms:`);
  console.log(`  settled ${settled.length}/${COUNT} in ${blocks} block(s), the last ${last - startBlock} block(s) after the burst began; failed: ${failed}`);
  console.log(`  ${((settled.length * 1000) / wall).toFixed(1)} settles per second (settled over the whole burst's wall time)`);
  console.log(`  latency p50 ${percentile(latencies, 50).toFixed(0)} ms, p99 ${percentile(latencies, 99).toFixed(0)} ms, max ${latencies.at(-1)!.toFixed(0)} ms; all answered in ${wall.toFixed(0)} ms`);
} finally {
  await stack.stop();
}
