// The token state index in memory: `npm run bench:state-index`. A local chain runs in another process; a TokenIndex
// in this one is loaded with BENCH_NONCES (1,000,000) spent authorizations (as from the ledger after a long backfill),
// twice: without a bound (from a stand-in store), and bounded to BENCH_MAX_NONCES (100,000, `STATE_INDEX_MAX_NONCES`)
// on a real embedded ledger file holding the same nonces. Prints the load time and the heap each spent nonce costs in
// both, and what an answer costs: from memory (a fresh nonce; with the bound, the filter says "not spent"), and for a
// spent nonce forgotten from memory (a point read of the ledger's indexed_nonces).
// First, what the proof of a log read costs (issue 38): BENCH_PROOF_BLOCKS (20,000) blocks mined, then each
// STATE_INDEX_LOG_RANGE-sized range (2,000) read alone (`eth_getLogs`) and with its proof (the headers of its last and
// first blocks in the same batch), alternately, BENCH_PROOF_ROUNDS (5) times; and a fresh backfill of those blocks with
// the HTTP round trips and JSON-RPC items it sent: the ranges, and the last 256 blocks read one by one.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { createPublicClient, http, numberToHex, toHex, type Address, type Hex, type PublicClient } from "viem";
import { openSqliteLedger } from "../src/ledger/sqlite.js";
import { MEMORY } from "../src/ledger/sqlite.js";
import { TokenIndex, type NonceProgress, type NonceStore, type StoredNonce } from "../src/state/index.js";
import { TAIL_BLOCKS } from "../src/state/nonce-backfill.js";
import { provenNonceLogs } from "../src/state/proven-logs.js";
import { percentile, startStackProcess } from "./stack.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const NONCES = Number(process.env.BENCH_NONCES ?? 1_000_000);
const MAX_NONCES = Number(process.env.BENCH_MAX_NONCES ?? 100_000);
const ASKS = Number(process.env.BENCH_ASKS ?? 100_000);
const PROOF_BLOCKS = Number(process.env.BENCH_PROOF_BLOCKS ?? 20_000);
const PROOF_ROUNDS = Number(process.env.BENCH_PROOF_ROUNDS ?? 5);
const RANGE = 2_000;
const AUTHORIZERS = Array.from({ length: 1_000 }, (_, i) => toHex(i + 1, { size: 20 }) as Address);

/** Spent nonce `i`: one of 1,000 authorizers, nonce i. */
const spent = (i: number): StoredNonce => ({ authorizer: AUTHORIZERS[i % 1_000]!, nonce: toHex(i, { size: 32 }) as Hex, blockNumber: 1n });

/** A store holding `count` spent nonces, progress through `through` (no database: the index's own cost alone). */
function standInStore(count: number, through: bigint): NonceStore {
  let progress: NonceProgress = { fromBlock: 0n, throughBlock: through };
  return {
    nonceIndexProgress: async () => progress,
    openNonceIndex: async () => progress,
    recordIndexedNonces: async (_scope, _nonces, range) => (progress = { ...progress, throughBlock: range.throughBlock > progress.throughBlock ? range.throughBlock : progress.throughBlock }),
    async indexedNonces(_scope, { after, limit }) {
      const start = after ? Number(BigInt(after.nonce)) + 1 : 0;
      const page: StoredNonce[] = [];
      for (let i = start; i < Math.min(count, start + limit); i++) page.push(spent(i));
      return page;
    },
    indexedNonce: async () => undefined,
  };
}

const fmt = (ms: number) => `${(ms * 1000).toFixed(1)} µs`;

/** Loads an index from `store`; prints the load time and the heap it took. */
async function load(label: string, client: PublicClient, token: Address, store: NonceStore, maxNonces?: number): Promise<TokenIndex> {
  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  const started = performance.now();
  const index = new TokenIndex({
    network: "cronos-testnet",
    client,
    chainId: 338,
    token,
    store,
    startBlockVariable: "CRONOS_TESTNET_INDEX_START_BLOCK",
    logRangeBlocks: 2_000,
    pollingIntervalMs: 250,
    logger: { info() {}, warn() {}, debug() {} },
    ...(maxNonces ? { maxNonces } : {}),
  });
  index.start();
  while (index.status().backfill.state !== "done") await new Promise((resolve) => setTimeout(resolve, 5));
  const loadMs = performance.now() - started;
  gc();
  const heap = process.memoryUsage().heapUsed - heapBefore;
  const { nonces, evictedNonces } = index.status();
  console.log(
    `${label}: load ${(loadMs / 1000).toFixed(2)} s; ${nonces.toLocaleString("en")} held, ${evictedNonces.toLocaleString("en")} in the ledger only; ` +
      `heap +${(heap / 1e6).toFixed(1)} MB, ${(heap / NONCES).toFixed(0)} bytes per spent nonce (${(heap / NONCES).toFixed(0)} MB per million)`,
  );
  return index;
}

/** Asks `asks` times for `nonceOf(i)` (each answer must be `expected`); prints p50 and p99. */
async function ask(label: string, index: TokenIndex, payer: Address, asks: number, nonceOf: (i: number) => Hex, expected: boolean): Promise<void> {
  const latencies: number[] = [];
  for (let i = 0; i < asks; i++) {
    const nonce = nonceOf(i);
    const t = performance.now();
    const answer = await index.payer(payer, nonce, 60_000);
    latencies.push(performance.now() - t);
    if (!answer || answer.used !== expected) throw new Error(`${label}: the index answered ${JSON.stringify(answer?.used)} for ${nonce}`);
  }
  latencies.sort((a, b) => a - b);
  console.log(`  ${label}, ${asks.toLocaleString("en")} asks: p50 ${fmt(percentile(latencies, 50))}, p99 ${fmt(percentile(latencies, 99))}`);
}

/** The cost of a range read's proof, and of a fresh backfill with it (see the head of this file). */
async function proofCost(rpcUrl: string, token: Address): Promise<void> {
  const traffic = { requests: 0, items: 0 };
  const counted = http(rpcUrl, {
    batch: { wait: 0 },
    async onFetchRequest(request) {
      const body = (await request.clone().json()) as unknown;
      traffic.requests++;
      traffic.items += Array.isArray(body) ? body.length : 1;
    },
  });
  const client = createPublicClient({ transport: counted, cacheTime: 0 }) as PublicClient;
  await client.request({ method: "hardhat_mine" as never, params: [numberToHex(PROOF_BLOCKS)] as never });
  const head = await client.getBlockNumber();
  const first = head - BigInt(PROOF_BLOCKS) + 1n;
  const ranges: Array<[bigint, bigint]> = [];
  for (let from = first; from + BigInt(RANGE) - 1n <= head; from += BigInt(RANGE)) ranges.push([from, from + BigInt(RANGE) - 1n]);
  const plain: number[] = [];
  const proven: number[] = [];
  for (let round = 0; round < PROOF_ROUNDS; round++) {
    for (const [from, to] of ranges) {
      // Alternately first, so that neither always finds the node's caches warm.
      const order = round % 2 === 0 ? ["plain", "proven"] : ["proven", "plain"];
      for (const kind of order) {
        const t = performance.now();
        if (kind === "plain") await client.getLogs({ address: token, fromBlock: from, toBlock: to });
        else await provenNonceLogs(client, token, from, to);
        (kind === "plain" ? plain : proven).push(performance.now() - t);
      }
    }
  }
  plain.sort((a, b) => a - b);
  proven.sort((a, b) => a - b);
  const ms = (list: number[], p: number) => `${percentile(list, p).toFixed(2)} ms`;
  console.log(`proof of a range read (${RANGE.toLocaleString("en")} blocks, ${plain.length} reads each, alternately):`);
  console.log(`  eth_getLogs alone: p50 ${ms(plain, 50)}, p90 ${ms(plain, 90)}`);
  console.log(`  with its proof (+2 headers, same batch): p50 ${ms(proven, 50)}, p90 ${ms(proven, 90)}`);

  const ledger = openSqliteLedger({ location: MEMORY });
  const started = performance.now();
  const before = { ...traffic };
  const index = new TokenIndex({
    network: "cronos-testnet",
    client,
    chainId: 338,
    token,
    store: ledger,
    startBlock: first,
    startBlockVariable: "CRONOS_TESTNET_INDEX_START_BLOCK",
    logRangeBlocks: RANGE,
    pollingIntervalMs: 60_000,
    logger: { info() {}, warn() {}, debug() {} },
  });
  index.start();
  while (index.status().backfill.state !== "done") await new Promise((resolve) => setTimeout(resolve, 5));
  const took = performance.now() - started;
  await index.stop();
  await ledger.close();
  const target = index.status().backfill.targetBlock!;
  console.log(
    `  a fresh backfill of blocks ${first.toLocaleString("en")}..${target.toLocaleString("en")} (ranges of ${RANGE.toLocaleString("en")}, the last ${TAIL_BLOCKS} one by one): ` +
      `${(took / 1000).toFixed(2)} s, ${traffic.requests - before.requests} HTTP requests, ${traffic.items - before.items} JSON-RPC items`,
  );
}

const stack = await startStackProcess(["--port", "0", "--testnet-rpc-port", "0", "--mainnet-rpc-port", "0", "--networks", "cronos-testnet", "--buyers", "1"]);
const dir = mkdtempSync(join(os.tmpdir(), "x402-bench-index-"));
try {
  const net = stack.info.networks["cronos-testnet"]!;
  const client = createPublicClient({ transport: http(net.rpcUrl, { batch: { wait: 0 } }), cacheTime: 0 }) as PublicClient;
  const payer = net.buyers[0]!.address;
  const fresh = () => toHex(crypto.getRandomValues(new Uint8Array(32)));
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0]?.model}, node ${process.version}; ${NONCES.toLocaleString("en")} spent nonces; load ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  await proofCost(net.rpcUrl, net.token);
  const head = await client.getBlockNumber();

  const unbounded = await load("without a bound", client, net.token, standInStore(NONCES, head));
  await unbounded.payer(payer, fresh(), 60_000); // the payer's balance read once
  await ask("answer from memory (known payer, fresh nonce)", unbounded, payer, ASKS, fresh, false);
  await unbounded.stop();

  // The same nonces in an embedded ledger file, as a long backfill leaves them.
  const ledger = openSqliteLedger({ location: join(dir, "ledger.db") });
  const scope = { chainId: 338, token: net.token };
  const filling = performance.now();
  await ledger.openNonceIndex(scope, 0n);
  for (let at = 0; at < NONCES; at += 10_000) {
    const batch = Array.from({ length: Math.min(10_000, NONCES - at) }, (_, i) => spent(at + i));
    await ledger.recordIndexedNonces(scope, batch, { fromBlock: 0n, throughBlock: head });
  }
  console.log(`(the ledger file filled with ${NONCES.toLocaleString("en")} nonces in ${((performance.now() - filling) / 1000).toFixed(1)} s)`);
  let lookups = 0;
  const counted: NonceStore = {
    nonceIndexProgress: (of) => ledger.nonceIndexProgress(of),
    openNonceIndex: (of, from) => ledger.openNonceIndex(of, from),
    recordIndexedNonces: (of, nonces, range) => ledger.recordIndexedNonces(of, nonces, range),
    indexedNonces: (of, options) => ledger.indexedNonces(of, options),
    indexedNonce: (of, authorizer, nonce) => {
      lookups++;
      return ledger.indexedNonce(of, authorizer, nonce);
    },
  };
  const bounded = await load(`bounded to ${MAX_NONCES.toLocaleString("en")} (STATE_INDEX_MAX_NONCES)`, client, net.token, counted, MAX_NONCES);
  await bounded.payer(payer, fresh(), 60_000);
  lookups = 0;
  await ask("answer for a fresh nonce (the filter: not spent)", bounded, payer, ASKS, fresh, false);
  console.log(`  ledger reads for those: ${lookups} (the filter's false "maybe")`);
  // The first nonces loaded are the ones forgotten: (authorizer, nonce) order, the lowest authorizers first.
  const forgotten: Hex[] = [];
  for (let i = 0; i < NONCES; i += 1_000) forgotten.push(spent(i).nonce);
  lookups = 0;
  await ask("answer for a spent nonce forgotten from memory (a read of indexed_nonces)", bounded, AUTHORIZERS[0]!, forgotten.length, (i) => forgotten[i]!, true);
  console.log(`  ledger reads for those: ${lookups}`);
  await bounded.stop();
  await ledger.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
  await stack.stop();
}
