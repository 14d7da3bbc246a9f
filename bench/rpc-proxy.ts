// Benchmark tool: a JSON-RPC proxy that makes a local node look remote. Every HTTP request waits
// `delayMs` (the round trip of a hosted RPC) before it is forwarded; each request and each JSON-RPC
// call in it (a batch counts each item) is counted by method, as a provider that bills per call would.
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** What went through the proxy since the last {@link LatencyProxy.reset}. */
export interface ProxyCounts {
  /** HTTP requests: round trips to the RPC. */
  requests: number;
  /** JSON-RPC calls (a batch of n counts n), by method. */
  calls: Record<string, number>;
}

export interface LatencyProxy {
  url: string;
  counts(): ProxyCounts;
  reset(): void;
  close(): Promise<void>;
}

/** Starts a proxy on 127.0.0.1 (a free port) in front of `upstream` (an http:// JSON-RPC URL). */
export async function startLatencyProxy(upstream: string, delayMs: number): Promise<LatencyProxy> {
  const target = new URL(upstream);
  let requests = 0;
  let calls: Record<string, number> = {};
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      requests++;
      try {
        const parsed = JSON.parse(body.toString("utf8")) as { method?: string } | Array<{ method?: string }>;
        if (process.env.BENCH_TRACE) process.stderr.write(`[rpc ${performance.now().toFixed(0)}] ${(Array.isArray(parsed) ? parsed : [parsed]).map((c) => c.method === "eth_getTransactionCount" ? `${c.method}(${JSON.stringify((c as { params?: unknown }).params)})` : c.method).join(" + ")}\n`);
        for (const call of Array.isArray(parsed) ? parsed : [parsed]) calls[call.method ?? "?"] = (calls[call.method ?? "?"] ?? 0) + 1;
      } catch {
        calls["(unreadable)"] = (calls["(unreadable)"] ?? 0) + 1;
      }
      setTimeout(() => {
        const forward = httpRequest(
          { hostname: target.hostname, port: target.port, path: target.pathname, method: "POST", headers: { "Content-Type": "application/json", "Content-Length": body.length } },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, { "Content-Type": "application/json" });
            answer.pipe(res);
          },
        );
        forward.on("error", () => {
          res.writeHead(502).end();
        });
        forward.end(body);
      }, delayMs);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    counts: () => ({ requests, calls: { ...calls } }),
    reset() {
      requests = 0;
      calls = {};
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
