// Floods and hung dependencies (issue 29), at the sizes, against `npm run facilitator` processes
// on a local chain served over HTTP. Prints figures; asserts nothing (the flood suite under test/floods/
// does, at small sizes). Sections: streams, database, rpc, connections (all by default):
//
//   npm run bench:floods                  # every section
//   npm run bench:floods -- streams rpc   # some
//
// BENCH_FLOOD_SECONDS (60) is the streams flood's length, BENCH_FREEZE_SECONDS (20) the database freeze's.
import { Agent } from "node:http";
import { connect, type Socket } from "node:net";
import { appendPaymentIdentifierToExtensions, declarePaymentIdentifierExtension, generatePaymentId } from "@x402/extensions/payment-identifier";
import { startLocalChain, type LocalChain } from "../src/harness/chain.js";
import type { FacilitatorProcess } from "../src/harness/cluster.js";
import { startTestPostgres } from "../src/harness/postgres.js";
import { startPgFaultProxy } from "../test/helpers/pg-fault-proxy.js";
import { startFaultProxy } from "../test/helpers/rpc-proxy.js";
import { bodies, facilitatorOn, latencySummary, mb, ms, PAY_TO, relayerNonce, rss, send, series, sleep, used, type Answer } from "./floods-tools.js";

const SECTIONS = ["streams", "database", "rpc", "connections"] as const;
type Section = (typeof SECTIONS)[number];
const asked = process.argv.slice(2).filter((a) => a !== "--");
const unknown = asked.filter((a) => !SECTIONS.includes(a as Section));
if (unknown.length > 0) throw new Error(`unknown section(s) ${unknown.join(", ")}; known: ${SECTIONS.join(", ")}`);
const sections: readonly Section[] = asked.length > 0 ? (asked as Section[]) : SECTIONS;

// ---- streams: 100 clients that never read, a flood of refused and forged requests ---------------------------------

async function streams(chain: LocalChain): Promise<void> {
  const seconds = Number(process.env.BENCH_FLOOD_SECONDS ?? 60);
  const total = Math.round((22_000 * seconds) / 60);
  // Room for the 100 silent streams and the reader.
  const facilitator = await facilitatorOn(chain, { DASHBOARD: "true", DASHBOARD_MAX_STREAMS: "200" });
  try {
    const pid = facilitator.child.pid!;
    const { hostname, port } = new URL(facilitator.url);
    // 100 streams that read nothing, each from an address of its own (one client each).
    const silent: Socket[] = Array.from({ length: 100 }, (_, i) => {
      const socket = connect({ host: hostname, port: Number(port), localAddress: `127.0.1.${i + 1}` });
      socket.on("error", () => {});
      socket.pause();
      socket.write("GET /dashboard/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n");
      return socket;
    });
    // One reader, counting rows and the longest wait between two.
    const reading = { rows: 0, lastAt: 0, longestGapMs: 0 };
    const reader = connect({ host: hostname, port: Number(port), localAddress: "127.0.0.3" });
    reader.on("error", () => {});
    reader.setEncoding("utf8");
    reader.on("data", (chunk: string) => {
      const rows = chunk.split("event: outcome").length - 1;
      if (rows === 0) return;
      const now = performance.now();
      if (reading.lastAt > 0) reading.longestGapMs = Math.max(reading.longestGapMs, now - reading.lastAt);
      reading.lastAt = now;
      reading.rows += rows;
    });
    reader.write("GET /dashboard/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n");
    await sleep(2_000);
    const idle = rss(pid);
    const forged = bodies(chain, 2_000, { wrongKey: true });
    const agent = new Agent({ keepAlive: true, maxSockets: 32 });
    let peak = idle;
    const sampler = setInterval(() => (peak = Math.max(peak, rss(pid))), 250);
    const statuses = new Map<number, number>();
    const started = performance.now();
    let sent = 0;
    const rowsBefore = reading.rows;
    reading.longestGapMs = 0;
    // Paced: `total` requests spread over `seconds`, half text/plain (415), half forged signatures (verify says no).
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (sent < total) {
          const index = sent++;
          const due = started + (index / total) * seconds * 1_000;
          if (due > performance.now()) await sleep(due - performance.now());
          const body = forged[index % forged.length]!;
          const answer = await send(facilitator.url, "/v2/x402/verify", { body, type: index % 2 === 0 ? "text/plain" : "application/json", agent, localAddress: "127.0.0.2" }).catch(() => ({ status: 0 }) as Answer);
          statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        }
      }),
    );
    const floodMs = performance.now() - started;
    await sleep(1_000);
    clearInterval(sampler);
    const after = rss(pid);
    const stalled = await series(facilitator, 'x402_dashboard_streams_total{event="stalled"}');
    console.log(`streams: ${total} requests in ${(floodMs / 1000).toFixed(1)} s (${JSON.stringify(Object.fromEntries(statuses))}) with 100 streams that never read`);
    console.log(`  facilitator RSS: idle ${mb(idle)}, peak ${mb(peak)} (+${mb(peak - idle)}), after ${mb(after)}`);
    console.log(`  the reading client: ${reading.rows - rowsBefore} rows during the flood, longest wait between two ${ms(reading.longestGapMs)}; silent streams closed as stalled: ${stalled}`);
    agent.destroy();
    silent.forEach((socket) => socket.destroy());
    reader.destroy();
  } finally {
    await facilitator.stop();
  }
}

// ---- database: PostgreSQL frozen (as SIGSTOP does) for 20 s ----------------------------------------------------------

async function database(chain: LocalChain): Promise<void> {
  const freezeMs = Number(process.env.BENCH_FREEZE_SECONDS ?? 20) * 1_000;
  const postgres = await startTestPostgres();
  const proxy = await startPgFaultProxy(postgres.url);
  // The shared rate-limit store is in the database: verify's limit is on (a large quota), as in production.
  const facilitator = await facilitatorOn(chain, { DATABASE_URL: proxy.url, RATE_LIMIT_VERIFY_PER_MINUTE: "1000000", RATE_LIMIT_SETTLE_PER_MINUTE: "1000000" });
  try {
    const verifyBodies = bodies(chain, 200);
    const settleBodies = bodies(chain, 40, { value: 2_000n });
    const identified = JSON.parse(bodies(chain, 1)[0]!) as { paymentHeader: string };
    const { signature, from, to, value, validAfter, validBefore, nonce } = JSON.parse(Buffer.from(identified.paymentHeader, "base64").toString()).payload as Record<string, string>;
    const authorization = { signature, authorization: { from, to, value, validAfter: String(validAfter), validBefore: String(validBefore), nonce } };
    const identifiedV2 = JSON.stringify({
      x402Version: 2,
      paymentPayload: {
        x402Version: 2,
        resource: { url: "http://seller.test/paid" },
        accepted: { scheme: "exact", network: "eip155:338", asset: chain.token, amount: "1000", payTo: PAY_TO, maxTimeoutSeconds: 300, extra: chain.domain },
        payload: authorization,
        extensions: appendPaymentIdentifierToExtensions({ "payment-identifier": declarePaymentIdentifierExtension(true) }, generatePaymentId()),
      },
      paymentRequirements: { scheme: "exact", network: "eip155:338", asset: chain.token, amount: "1000", payTo: PAY_TO, maxTimeoutSeconds: 300, extra: chain.domain },
    });
    const agent = new Agent({ keepAlive: true, maxSockets: 64 });
    // Warm: the pool's connections open, a settle recorded.
    await send(facilitator.url, "/v2/x402/verify", { body: verifyBodies[0]!, agent });
    const nonceBefore = await relayerNonce(chain);
    proxy.freeze();
    const frozenAt = performance.now();
    const until = frozenAt + freezeMs;
    const verifies: number[] = [];
    const verifyStatuses = new Map<number, number>();
    const health: Answer[] = [];
    const identifiedAnswers: Answer[] = [];
    const settles: Array<{ body: string; answer: Answer }> = [];
    let nextSettle = 0;
    await Promise.all([
      (async () => {
        for (let i = 0; performance.now() < until; i++) {
          const answer = await send(facilitator.url, "/v2/x402/verify", { body: verifyBodies[i % verifyBodies.length]!, agent });
          verifies.push(answer.ms);
          verifyStatuses.set(answer.status, (verifyStatuses.get(answer.status) ?? 0) + 1);
        }
      })(),
      (async () => {
        while (performance.now() < until) {
          health.push(await send(facilitator.url, "/healthcheck", { agent }));
          await sleep(500);
        }
      })(),
      (async () => {
        while (performance.now() < until) {
          identifiedAnswers.push(await send(facilitator.url, "/v2/x402/verify", { body: identifiedV2, agent }));
          await sleep(1_000);
        }
      })(),
      // Ten settles at once when it freezes, then one every second.
      ...Array.from({ length: 10 }, async () => {
        const body = settleBodies[nextSettle++]!;
        settles.push({ body, answer: await send(facilitator.url, "/v2/x402/settle", { body, agent }) });
      }),
      (async () => {
        while (performance.now() < until - 1_000 && nextSettle < settleBodies.length) {
          await sleep(1_000);
          const body = settleBodies[nextSettle++]!;
          settles.push({ body, answer: await send(facilitator.url, "/v2/x402/settle", { body, agent }) });
        }
      })(),
    ]);
    proxy.thaw();
    const thawedAt = performance.now();
    let back = 0;
    while ((await send(facilitator.url, "/healthcheck", { agent })).status !== 200) await sleep(100);
    back = performance.now() - thawedAt;
    await sleep(2_000);
    const settled = settles.filter((s) => s.answer.status === 200 && s.answer.text.includes('"payment.settled"'));
    const refused = settles.filter((s) => s.answer.status === 503);
    const refusedUsed = (await Promise.all(refused.map((s) => used(chain, s.body)))).filter(Boolean).length;
    const settledUsed = (await Promise.all(settled.map((s) => used(chain, s.body)))).filter(Boolean).length;
    // Every 503 retried (as its Retry-After says) until it is a verdict.
    let retries = 0;
    for (const s of refused) {
      for (let attempt = 0; attempt < 10; attempt++) {
        retries++;
        const answer = await send(facilitator.url, "/v2/x402/settle", { body: s.body, agent });
        if (answer.status !== 503) {
          s.answer = answer;
          break;
        }
        await sleep(500);
      }
    }
    const finallySettled = settles.filter((s) => s.answer.text.includes('"payment.settled"')).length;
    const minedSends = (await relayerNonce(chain)) - nonceBefore;
    console.log(`database: PostgreSQL frozen for ${(freezeMs / 1000).toFixed(0)} s under one instance (the rate-limit store in it)`);
    console.log(`  verify without an identifier: ${latencySummary(verifies)} (${JSON.stringify(Object.fromEntries(verifyStatuses))})`);
    console.log(`  verify with a payment identifier: ${latencySummary(identifiedAnswers.map((a) => a.ms))} (statuses ${[...new Set(identifiedAnswers.map((a) => a.status))].join(", ")})`);
    console.log(`  /healthcheck: ${latencySummary(health.map((a) => a.ms))} (statuses ${[...new Set(health.map((a) => a.status))].join(", ")}); 200 again ${ms(back)} after the thaw`);
    console.log(`  settle: ${latencySummary(settles.map((s) => s.answer.ms))}; ${settled.length} settled, ${refused.length} answered 503, ${settles.length - settled.length - refused.length} other`);
    console.log(`  on chain after the thaw: settled ones used ${settledUsed}/${settled.length}; 503 ones used ${refusedUsed}/${refused.length} (must be 0)`);
    console.log(`  after retrying the 503s (${retries} requests): ${finallySettled}/${settles.length} settled; relayer transactions mined ${minedSends} (one per settlement)`);
    agent.destroy();
  } finally {
    proxy.thaw();
    await facilitator.stop();
    await proxy.close();
    await postgres.stop();
  }
}

// ---- rpc: the first of two RPC URLs hangs mid-burst of 60 settles ---------------------------------------------------

async function rpc(chain: LocalChain): Promise<void> {
  const [first, second] = await Promise.all([startFaultProxy(chain.rpcUrl), startFaultProxy(chain.rpcUrl)]);
  const facilitator = await facilitatorOn(chain, { CRONOS_TESTNET_RPC_URL: `${first.url},${second.url}` });
  try {
    const timeoutMs = 10_000;
    const settleBodies = bodies(chain, 60, { value: 3_000n });
    const nonceBefore = await relayerNonce(chain);
    const agent = new Agent({ keepAlive: true, maxSockets: 60 });
    const settling = settleBodies.map((body) => send(facilitator.url, "/v2/x402/settle", { body, agent }));
    await sleep(150);
    first.fail({ kind: "hang" });
    const hungAt = performance.now();
    const health: Answer[] = [];
    const healthLoop = (async () => {
      while (performance.now() - hungAt < 12_000) {
        health.push(await send(facilitator.url, "/healthcheck"));
        await sleep(500);
      }
    })();
    const answers = await Promise.all(settling);
    await healthLoop;
    const settled = answers.filter((a) => a.text.includes('"payment.settled"'));
    const hashes = new Set(settled.map((a) => (JSON.parse(a.text) as { txHash: string }).txHash));
    const usedAll = (await Promise.all(settleBodies.map((body) => used(chain, body)))).filter(Boolean).length;
    console.log(`rpc: two RPC URLs, the first hangs 150 ms into a burst of 60 settles (RPC_TIMEOUT_MS ${timeoutMs})`);
    console.log(`  settle: ${latencySummary(answers.map((a) => a.ms))}; the bound is RPC_TIMEOUT_MS + 1 s = ${ms(timeoutMs + 1_000)}`);
    console.log(`  ${settled.length}/60 settled, ${hashes.size} distinct transactions, authorizations used on chain ${usedAll}, relayer transactions mined ${(await relayerNonce(chain)) - nonceBefore}`);
    console.log(`  /healthcheck meanwhile: ${latencySummary(health.map((a) => a.ms))} (statuses ${[...new Set(health.map((a) => a.status))].join(", ")})`);
    agent.destroy();
  } finally {
    await facilitator.stop();
    await Promise.all([first.close(), second.close()]);
  }
}

// ---- connections: a seller's keep-alive pool at 64 and 256 concurrent requests under the production caps ----------

async function connections(chain: LocalChain): Promise<void> {
  const facilitator = await facilitatorOn(chain, {});
  try {
    const body = bodies(chain, 1)[0]!;
    for (const concurrency of [64, 256]) {
      for (const client of ["fetch", "node:http"] as const) {
        const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
        const localAddress = `127.0.2.${concurrency === 64 ? 1 : 2}${client === "fetch" ? 0 : 1}`;
        const oneRequest = async (): Promise<Answer> => {
          if (client === "node:http") return send(facilitator.url, "/v2/x402/verify", { body, agent, localAddress });
          const started = performance.now();
          const response = await fetch(`${facilitator.url}/v2/x402/verify`, { method: "POST", headers: { "Content-Type": "application/json" }, body });
          return { status: response.status, text: await response.text(), ms: performance.now() - started };
        };
        const waiting = (event: string) => series(facilitator, `x402_http_connections_waiting_total{listener="service",event="${event}"}`);
        const queuedBefore = await waiting("queued");
        const yieldedBefore = await waiting("yielded");
        const until = performance.now() + 6_000;
        const latencies: number[] = [];
        const failures = new Map<string, number>();
        await Promise.all(
          Array.from({ length: concurrency }, async () => {
            while (performance.now() < until) {
              try {
                const answer = await oneRequest();
                if (answer.status === 200) latencies.push(answer.ms);
                else failures.set(`HTTP ${answer.status}`, (failures.get(`HTTP ${answer.status}`) ?? 0) + 1);
              } catch (error) {
                const key = String((error as { cause?: unknown }).cause ?? error);
                failures.set(key, (failures.get(key) ?? 0) + 1);
              }
            }
          }),
        );
        const queued = (await waiting("queued")) - queuedBefore;
        const yielded = (await waiting("yielded")) - yieldedBefore;
        const failed = [...failures.values()].reduce((a, b) => a + b, 0);
        console.log(
          `connections: ${client} pool at ${concurrency} concurrent verifies for 6 s: ${latencies.length} answered 200, ${failed} failed ${failed ? JSON.stringify(Object.fromEntries(failures)) : ""}; ${latencySummary(latencies)}; connections that waited for a place ${queued}, idle ones that gave way to them ${yielded}`,
        );
        agent.destroy();
      }
    }
    const refused = await series(facilitator, 'x402_http_connections_dropped_total{listener="service",reason="client"}');
    console.log(`  connections refused (503) over the per-client cap: ${refused}`);
    await afterBurst(facilitator, body);
  } finally {
    await facilitator.stop();
  }
}

/**
 * Issue 39 item 8: a pool bursts to 128 keep-alive connections and keeps them (100 served, idle: its
 * client's cap); then another pool of the same client (another worker) sends 10 requests, each on a new
 * connection. Before the fix each waited CONNECTION_QUEUE_MS (5 s) and was answered 503.
 */
async function afterBurst(facilitator: FacilitatorProcess, body: string): Promise<void> {
  const burst = new Agent({ keepAlive: true, maxSockets: Infinity });
  const next = new Agent({ keepAlive: true, maxSockets: Infinity });
  const localAddress = "127.0.2.99";
  const waiting = (event: string) => series(facilitator, `x402_http_connections_waiting_total{listener="service",event="${event}"}`);
  try {
    const first = await Promise.all(Array.from({ length: 128 }, () => send(facilitator.url, "/v2/x402/verify", { body, agent: burst, localAddress })));
    const before = { yielded: await waiting("yielded"), expired: await waiting("expired") };
    const then = await Promise.all(Array.from({ length: 10 }, () => send(facilitator.url, "/v2/x402/verify", { body, agent: next, localAddress })));
    const statuses = (answers: Answer[]) => JSON.stringify(Object.fromEntries([...new Set(answers.map((a) => a.status))].map((s) => [s, answers.filter((a) => a.status === s).length])));
    console.log(
      `connections: after a burst of 128 keep-alive connections (${statuses(first)}), the same client's next 10 requests from another pool: ${statuses(then)}; ${latencySummary(then.map((a) => a.ms))}; idle connections that gave way ${(await waiting("yielded")) - before.yielded}, waits over CONNECTION_QUEUE_MS ${(await waiting("expired")) - before.expired}`,
    );
  } finally {
    burst.destroy();
    next.destroy();
  }
}

const chain = await startLocalChain({ network: "cronos-testnet", port: 0, buyers: 10 });
try {
  console.log(`bench:floods on Node ${process.version}, ${new Date().toISOString()}`);
  for (const section of sections) {
    if (section === "streams") await streams(chain);
    else if (section === "database") await database(chain);
    else if (section === "rpc") await rpc(chain);
    else await connections(chain);
  }
} finally {
  await chain.stop();
}
