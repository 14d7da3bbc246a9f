// A settle burst through a fee spike: `npm run bench:lifecycle`. 100 distinct authorizations fired at once
// at a chain mining one block per second, starting at a base fee of BENCH_BASE_FEE_GWEI (50); once half of
// their transactions are in the node's pool, the next block's base fee is set to 10× the latest
// (`hardhat_setNextBlockBaseFeePerGas`), above what every transaction priced before it offers. Prints how
// many settled, the blocks it took to settle them all, and the replacements sent (read back from the
// status lookup: every hash a settlement had).
import os from "node:os";
import type { Address, Hex } from "viem";
import { signBodies } from "./sign.js";
import { fireSettles, percentile, startBenchTarget, tallySettles } from "./stack.js";

const COUNT = Number(process.env.BENCH_SETTLES ?? 100);
const BLOCK_TIME_MS = Number(process.env.BENCH_BLOCK_TIME_MS ?? 1_000);
const SPIKE = BigInt(process.env.BENCH_SPIKE ?? 10);
const REPLACE_AFTER_SECONDS = process.env.REPLACE_AFTER_SECONDS ?? "3";
const BASE_FEE_GWEI = process.env.BENCH_BASE_FEE_GWEI ?? "50";
const PAY_TO: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

const stack = await startBenchTarget(BLOCK_TIME_MS, 10, {
  RATE_LIMIT_VERIFY_PER_MINUTE: "0",
  RATE_LIMIT_SETTLE_PER_MINUTE: "0",
  RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "0", MAX_CONNECTIONS_PER_CLIENT: "0",
  POLLING_INTERVAL_MS: "100",
  REPLACE_AFTER_SECONDS,
});
try {
  const net = stack.info.networks["cronos-testnet"]!;
  const load = os.loadavg().map((l) => l.toFixed(2)).join(" ");
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, node ${process.version}, load ${load}; ledger: ${process.env.BENCH_LEDGER ?? "memory"}`);
  const rpc = async <T>(method: string, params: unknown[] = []): Promise<T> => {
    const res = await fetch(net.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }) });
    const body = (await res.json()) as { result?: T; error?: { message: string } };
    if (body.error) throw new Error(`${method}: ${body.error.message}`);
    return body.result as T;
  };
  const nonceOf = async (tag: "pending" | "latest") => Number(BigInt(await rpc<Hex>("eth_getTransactionCount", [stack.info.relayer, tag])));
  const bodies = signBodies({
    count: COUNT, buyers: net.buyers, network: "cronos-testnet", chainId: 338, token: net.token, domain: net.domain,
    payTo: PAY_TO, value: 10_000n, validBefore: BigInt(Math.floor(Date.now() / 1000) + 3_600),
  });
  // The local chain's base fee has decayed to a fraction of the node's 1 gwei tip; on Cronos the base fee
  // dominates. Start from BENCH_BASE_FEE_GWEI so that a spike of the base fee is a spike of the price.
  const blockNumber = async () => Number(BigInt(await rpc<Hex>("eth_blockNumber")));
  await rpc("hardhat_setNextBlockBaseFeePerGas", [`0x${(BigInt(BASE_FEE_GWEI) * 10n ** 9n).toString(16)}`]);
  const set = await blockNumber();
  while ((await blockNumber()) <= set) await new Promise((r) => setTimeout(r, 20));
  const startBlock = await blockNumber();
  const startNonce = await nonceOf("pending");
  const started = performance.now();
  const burst = fireSettles(stack.info.facilitatorUrl, bodies);

  // The spike, once half of the burst's transactions reached the pool.
  let inPool = 0;
  while (inPool < COUNT / 2) {
    await new Promise((r) => setTimeout(r, 5));
    inPool = (await nonceOf("pending")) - startNonce;
  }
  const latest = await rpc<{ number: Hex; baseFeePerGas: Hex }>("eth_getBlockByNumber", ["latest", false]);
  const minedBefore = (await nonceOf("latest")) - startNonce;
  const baseFee = BigInt(latest.baseFeePerGas);
  await rpc("hardhat_setNextBlockBaseFeePerGas", [`0x${(baseFee * SPIKE).toString(16)}`]);
  const spikeBlock = Number(BigInt(latest.number)) + 1;

  const results = await Promise.all(burst.answers);
  const wall = performance.now() - started;
  burst.close();
  const { settled, failed, blocks, lastBlock: last, latencies } = tallySettles(results);
  // Every hash each settlement had, from the status lookup: the versions beyond the first are replacements.
  let replacements = 0;
  let replaced = 0;
  for (const r of settled) {
    const res = await fetch(`${stack.info.facilitatorUrl}/v2/x402/settlements/${r.answer.txHash}`);
    const versions = ((await res.json()) as { transactions: Hex[] }).transactions.length;
    replacements += versions - 1;
    if (versions > 1) replaced++;
  }
  console.log(`${COUNT} settles at once, blocks every ${BLOCK_TIME_MS} ms, REPLACE_AFTER_SECONDS=${REPLACE_AFTER_SECONDS}:`);
  console.log(`  spike: block ${spikeBlock - startBlock} of the burst asks ${SPIKE}× the base fee (${baseFee} → ${baseFee * SPIKE} wei), set with ${inPool} transactions in the pool, ${minedBefore} mined`);
  console.log(`  settled ${settled.length}/${COUNT} in ${blocks} block(s); all settled ${last - startBlock} block(s) after the burst began; failed: ${failed}`);
  console.log(`  replacements sent: ${replacements} (${replaced} settlements replaced at least once); mined nonces ${(await nonceOf("latest")) - startNonce}`);
  console.log(`  latency p50 ${percentile(latencies, 50).toFixed(0)} ms, p99 ${percentile(latencies, 99).toFixed(0)} ms, max ${latencies.at(-1)!.toFixed(0)} ms; all answered in ${wall.toFixed(0)} ms`);
} finally {
  await stack.stop();
}
