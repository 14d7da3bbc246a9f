// The token state index in memory: `npm run bench:state-index`. A local chain runs in another process; one
// TokenIndex in this one is loaded with BENCH_NONCES (1,000,000) spent authorizations from a stand-in store (as
// from the ledger after a long backfill). Prints the load time, the heap each spent nonce costs, and what an
// answer from memory costs (a known payer, a fresh nonce).
import os from "node:os";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { createPublicClient, http, toHex, type Address, type Hex, type PublicClient } from "viem";
import { TokenIndex, type NonceProgress, type NonceStore, type StoredNonce } from "../src/state/index.js";
import { percentile, startStackProcess } from "./stack.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const NONCES = Number(process.env.BENCH_NONCES ?? 1_000_000);
const ASKS = Number(process.env.BENCH_ASKS ?? 100_000);

/** A store holding `count` spent nonces of 1,000 authorizers, progress through `through`. */
function standInStore(count: number, through: bigint): NonceStore {
  const authorizers = Array.from({ length: 1_000 }, (_, i) => toHex(i + 1, { size: 20 }) as Address);
  let progress: NonceProgress = { fromBlock: 0n, throughBlock: through };
  return {
    nonceIndexProgress: async () => progress,
    openNonceIndex: async () => progress,
    recordIndexedNonces: async (_scope, _nonces, range) => (progress = { ...progress, throughBlock: range.throughBlock > progress.throughBlock ? range.throughBlock : progress.throughBlock }),
    async indexedNonces(_scope, { after, limit }) {
      const start = after ? Number(BigInt(after.nonce)) + 1 : 0;
      const page: StoredNonce[] = [];
      for (let i = start; i < Math.min(count, start + limit); i++) page.push({ authorizer: authorizers[i % 1_000]!, nonce: toHex(i, { size: 32 }) as Hex, blockNumber: 1n });
      return page;
    },
    indexedNonce: async () => undefined,
  };
}

const stack = await startStackProcess(["--port", "0", "--testnet-rpc-port", "0", "--mainnet-rpc-port", "0", "--networks", "cronos-testnet", "--buyers", "1"]);
try {
  const net = stack.info.networks["cronos-testnet"]!;
  const client = createPublicClient({ transport: http(net.rpcUrl, { batch: { wait: 0 } }), cacheTime: 0 }) as PublicClient;
  const head = await client.getBlockNumber();
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, node ${process.version}; ${NONCES.toLocaleString("en")} spent nonces`);

  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  const started = performance.now();
  const index = new TokenIndex({
    network: "cronos-testnet",
    client,
    chainId: 338,
    token: net.token,
    store: standInStore(NONCES, head),
    startBlockVariable: "CRONOS_TESTNET_INDEX_START_BLOCK",
    logRangeBlocks: 2_000,
    pollingIntervalMs: 250,
    logger: { info() {}, warn() {}, debug() {} },
  });
  index.start();
  while (index.status().backfill.state !== "done") await new Promise((resolve) => setTimeout(resolve, 5));
  const loadMs = performance.now() - started;
  gc();
  const heapAfter = process.memoryUsage().heapUsed;
  console.log(`load: ${(loadMs / 1000).toFixed(2)} s for ${index.status().nonces.toLocaleString("en")} nonces; heap +${((heapAfter - heapBefore) / 1e6).toFixed(1)} MB, ${((heapAfter - heapBefore) / NONCES).toFixed(0)} bytes per spent nonce`);

  const payer = net.buyers[0]!.address;
  await index.payer(payer, toHex(1, { size: 32 }), 60_000); // the payer's balance read once
  const latencies: number[] = [];
  for (let i = 0; i < ASKS; i++) {
    const nonce = toHex(crypto.getRandomValues(new Uint8Array(32)));
    const t = performance.now();
    const answer = await index.payer(payer, nonce, 60_000);
    latencies.push(performance.now() - t);
    if (!answer || answer.used !== false) throw new Error("the index did not answer from memory");
  }
  latencies.sort((a, b) => a - b);
  console.log(`answer from memory (known payer, fresh nonce), ${ASKS.toLocaleString("en")} asks: p50 ${(percentile(latencies, 50) * 1000).toFixed(1)} µs, p99 ${(percentile(latencies, 99) * 1000).toFixed(1)} µs`);
  await index.stop();
} finally {
  await stack.stop();
}
