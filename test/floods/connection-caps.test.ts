import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { Agent, request } from "node:http";
import type { Socket } from "node:net";
import { expect } from "chai";
import { makePayment, startFacilitatorOnChain } from "../helpers/facilitator.js";
import { scrapeMetric } from "../helpers/metrics.js";

// Issue 29 item 6: a seller's backend verifying at 64 to 256 concurrent keep-alive requests from one
// address, under the production connection caps (MAX_CONNECTIONS 1000, 100 per client): not one request
// fails. Beyond its cap the client's connections wait for a place while its served ones close after their
// answers (Connection: close); none is reset. (The 1,000-socket flood of one client and the other caps:
// test/facilitator/listeners.test.ts.)

type Started = Awaited<ReturnType<typeof startFacilitatorOnChain>>;

/** Requests each worker of {@link load} sends, back to back. */
const PER_WORKER = 3;

/** `concurrency` workers sending {@link PER_WORKER} requests each, back to back; each answer's status, or the error that replaced it. */
async function load(send: () => Promise<number>, concurrency: number): Promise<{ ok: number; failed: string[] }> {
  let ok = 0;
  const failed: string[] = [];
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let sent = 0; sent < PER_WORKER; sent++) {
        try {
          const status = await send();
          if (status === 200) ok++;
          else failed.push(`HTTP ${status}`);
        } catch (error) {
          failed.push(String((error as { cause?: unknown }).cause ?? error));
        }
      }
    }),
  );
  return { ok, failed };
}

describe("floods: one seller's keep-alive pool under the production connection caps", function () {
  this.timeout(120_000);
  let started: Started;
  let body: string;

  before(async () => {
    // The production caps: MAX_CONNECTIONS 1000, MAX_CONNECTIONS_PER_CLIENT unset (100), CONNECTION_QUEUE_MS 5000.
    started = await startFacilitatorOnChain({ MAX_CONNECTIONS_PER_CLIENT: "" });
    expect(started.config.http).to.deep.include({ maxConnections: 1_000, maxConnectionsPerClient: 100, connectionQueueMs: 5_000 });
    body = JSON.stringify((await makePayment(started.chain)).body);
  });
  after(() => started?.running.close(0));

  const verify = `/v2/x402/verify`;

  it("node:http's keep-alive agent at 256 concurrent verifies (another client address): every one answered 200, the served connections of the client never more than 100", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
    const { hostname, port } = new URL(started.running.url);
    const send = () =>
      new Promise<number>((resolve, reject) => {
        const req = request({ host: hostname, port, path: verify, method: "POST", agent, localAddress: "127.0.0.5", headers: { "Content-Type": "application/json" } }, (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
        });
        req.on("error", reject);
        req.end(body);
      });
    // The client's connections with a request being served, counted at each request the service's HTTP server
    // begins and each answer it finishes (Node's diagnostics channels): every change is seen, none sampled. A
    // connection serving a request holds a place; more than 100 at once would be a breach of the cap.
    const serving = new Set<Socket>();
    let mostServed = 0;
    const ours = (socket: Socket) => socket.remoteAddress === "127.0.0.5" && String(socket.localPort) === port;
    const onRequest = (message: unknown) => {
      const { socket } = message as { socket: Socket };
      if (!ours(socket)) return;
      serving.add(socket);
      mostServed = Math.max(mostServed, serving.size);
    };
    const onAnswered = (message: unknown) => {
      const { socket } = message as { socket: Socket };
      if (ours(socket)) serving.delete(socket);
    };
    const queuedBefore = await scrapeMetric(started.running.metricsUrl!, 'x402_http_connections_waiting_total{listener="service",event="queued"}');
    subscribe("http.server.request.start", onRequest);
    subscribe("http.server.response.finish", onAnswered);
    try {
      const result = await load(send, 256);
      expect(result.failed).to.deep.equal([]);
      expect(result.ok).to.equal(256 * PER_WORKER);
      // The client held up to 256 sockets (one per request in flight); at most 100 were served at once, the rest waited.
      expect(mostServed).to.be.within(1, 100);
      expect(await scrapeMetric(started.running.metricsUrl!, 'x402_http_connections_waiting_total{listener="service",event="queued"}')).to.be.greaterThan(queuedBefore);
    } finally {
      unsubscribe("http.server.request.start", onRequest);
      unsubscribe("http.server.response.finish", onAnswered);
      agent.destroy();
    }
  });
  it("fetch (undici's pool) at 64 and at 256 concurrent verifies: every one answered 200; at 256 connections waited for a place and none was refused", async () => {
    const send = async () => {
      const response = await fetch(`${started.running.url}${verify}`, { method: "POST", headers: { "Content-Type": "application/json" }, body });
      await response.arrayBuffer();
      return response.status;
    };
    const queued = () => scrapeMetric(started.running.metricsUrl!, 'x402_http_connections_waiting_total{listener="service",event="queued"}');
    const retired = () => scrapeMetric(started.running.metricsUrl!, 'x402_http_connections_waiting_total{listener="service",event="retired"}');
    const before = { queued: await queued(), retired: await retired() };
    const at64 = await load(send, 64);
    expect(at64.failed).to.deep.equal([]);
    expect(at64.ok).to.equal(64 * PER_WORKER);
    // (Whether any of the 64 waited is undici's business: on a loaded machine its pool opens more sockets than
    // requests in flight when a freed one is not yet marked free, and may reach the 100 places. The cap itself:
    // the node:http test above, which counts the served connections.)

    const at256 = await load(send, 256);
    expect(at256.failed).to.deep.equal([]);
    expect(at256.ok).to.equal(256 * PER_WORKER);
    expect(await queued()).to.be.greaterThan(before.queued);
    expect(await retired()).to.be.greaterThan(before.retired);
    expect(await scrapeMetric(started.running.metricsUrl!, 'x402_http_connections_dropped_total{listener="service",reason="client"}')).to.equal(0);
  });

});
