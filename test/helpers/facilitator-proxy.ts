import { listen, readBody, type Listening } from "./http.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).

/** A call the proxy passed on to the facilitator. */
export interface ProxiedCall {
  path: string;
  body: unknown;
  status: number;
  answer: unknown;
}

/** An answer the proxy gives instead of the facilitator's (what a wrong facilitator would say). */
export interface ProxiedAnswer {
  status: number;
  contentType: string;
  body: string;
}

// Hop-by-hop and length headers: the proxy's own connection sets these.
const UNFORWARDED = new Set(["host", "connection", "content-length", "transfer-encoding", "keep-alive"]);

/**
 * A transparent proxy in front of the real facilitator, so a test can see which calls the seller
 * made, and act on the chain between verify and settle (what another party could do in that gap).
 */
export interface FacilitatorProxy extends Listening {
  calls: ProxiedCall[];
  /** Runs once before the next settle is passed on (then cleared). */
  beforeSettle?: (body: unknown) => Promise<void>;
  /** Answers instead of the facilitator when it returns an answer (the call is still made and recorded). */
  rewrite?: (call: ProxiedCall) => ProxiedAnswer | undefined;
  /** The paths called since the last reset. */
  paths(): string[];
  reset(): void;
}

export async function startFacilitatorProxy(target: string): Promise<FacilitatorProxy> {
  const calls: ProxiedCall[] = [];
  const proxy = {} as FacilitatorProxy;
  const listening = await listen((req, res) => {
    void (async () => {
      const text = await readBody(req);
      const path = req.url ?? "/";
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = text;
      }
      if (path.endsWith("/settle") && proxy.beforeSettle) {
        const hook = proxy.beforeSettle;
        proxy.beforeSettle = undefined;
        await hook(body);
      }
      const headers = Object.entries(req.headers).filter(([name]) => !UNFORWARDED.has(name)) as Array<[string, string]>;
      if (req.headers["content-type"] === undefined) headers.push(["content-type", "application/json"]);
      const upstream = await fetch(`${target}${path}`, {
        method: req.method,
        headers,
        ...(req.method === "GET" || req.method === "HEAD" ? {} : { body: text }),
      });
      const answerText = await upstream.text();
      let answer: unknown;
      try {
        answer = JSON.parse(answerText);
      } catch {
        answer = answerText;
      }
      const call = { path, body, status: upstream.status, answer };
      calls.push(call);
      const rewritten = proxy.rewrite?.(call);
      if (rewritten) {
        res.writeHead(rewritten.status, { "content-type": rewritten.contentType });
        res.end(rewritten.body);
        return;
      }
      const answerHeaders = [...upstream.headers].filter(([name]) => !UNFORWARDED.has(name) && name !== "content-encoding");
      res.writeHead(upstream.status, Object.fromEntries(answerHeaders));
      res.end(answerText);
    })().catch((error: unknown) => {
      res.writeHead(599, { "content-type": "text/plain" });
      res.end(`proxy failure: ${String(error)}`);
    });
  });
  return Object.assign(proxy, listening, {
    calls,
    paths: () => calls.map((call) => call.path),
    reset() {
      calls.length = 0;
      proxy.beforeSettle = undefined;
      proxy.rewrite = undefined;
    },
  });
}
