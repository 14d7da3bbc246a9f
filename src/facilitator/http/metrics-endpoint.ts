import type { RequestListener, ServerResponse } from "node:http";
import { RequestError } from "../../protocol/reasons.js";
import type { Logger } from "../logger.js";

/** Anything that renders Prometheus text (a prom-client `Registry`). */
export interface MetricsSource {
  contentType: string;
  metrics(): Promise<string>;
}

/**
 * The metrics listener's handler: `GET /metrics` in Prometheus text, anything else 404 JSON. It runs on
 * a listener of its own (loopback by default), never on the service port: the relayer gauges reveal
 * balances and cost RPC reads.
 */
export function metricsEndpoint(source: MetricsSource, logger: Logger): RequestListener {
  return (req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/metrics" || (req.method !== "GET" && req.method !== "HEAD")) {
      sendJson(res, 404, { error: RequestError.notFound });
      return;
    }
    source.metrics().then(
      (text) => {
        res.writeHead(200, { "Content-Type": source.contentType, "Content-Length": Buffer.byteLength(text) });
        res.end(req.method === "HEAD" ? undefined : text);
      },
      (error: unknown) => {
        logger.error({ err: error instanceof Error ? error.message : String(error) }, "metrics could not be rendered");
        sendJson(res, 500, { error: RequestError.internal });
      },
    );
  };
}

function sendJson(res: ServerResponse, status: number, body: object): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}
