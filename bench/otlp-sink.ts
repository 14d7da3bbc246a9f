// Benchmark helper: an OTLP/HTTP trace receiver on loopback that answers every export at once and counts
// what it got (spans, and the verify requests' server spans among them) without parsing more than that.
import { createServer } from "node:http";
import { once } from "node:events";
import type { AddressInfo } from "node:net";

export interface OtlpSink {
  /** The traces URL for OTEL_EXPORTER_OTLP_TRACES_ENDPOINT. */
  url: string;
  /** Spans received so far, and the `POST /v2/x402/verify` server spans among them. */
  counts(): { spans: number; verifies: number; bytes: number };
  close(): Promise<void>;
}

export async function startOtlpSink(): Promise<OtlpSink> {
  let spans = 0;
  let verifies = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      bytes += body.length;
      spans += body.split('"spanId":').length - 1;
      verifies += body.split('"name":"POST /v2/x402/verify"').length - 1;
      res.writeHead(200, { "Content-Type": "application/json" }).end("{}");
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1/traces`,
    counts: () => ({ spans, verifies, bytes }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
