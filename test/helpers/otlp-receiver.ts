import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// An OTLP/HTTP trace receiver on loopback, as a collector's: POST /v1/traces with a JSON body
// (ExportTraceServiceRequest), its spans parsed and kept in arrival order.

/** One span as received, its attributes flattened to plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a trace's root. */
  parentSpanId: string;
  name: string;
  /** OTLP's enum: 1 internal, 2 server, 3 client. */
  kind: number;
  /** Nanoseconds since the epoch, as a bigint (OTLP/JSON sends them as strings). */
  start: bigint;
  end: bigint;
  attributes: Record<string, unknown>;
  /** 0 unset, 1 ok, 2 error; `message` as sent. */
  status: { code: number; message?: string };
  /** The exporting process's resource attributes (`service.name`, …). */
  resource: Record<string, unknown>;
  /** The instrumentation scope's name. */
  scope: string;
}

export interface OtlpReceiver {
  /** The traces URL to give an exporter: `http://127.0.0.1:PORT/v1/traces`. */
  url: string;
  spans: ReceivedSpan[];
  /** Export requests answered, and refused (not JSON, wrong path, too large). */
  requests: number;
  refused: number;
  /** While true, export requests are read and never answered (a collector that hangs); `held` counts them. */
  hang: boolean;
  held: number;
  /** Resolves with the spans once `done(spans)` holds; fails naming what arrived when `timeoutMs` passes first. */
  waitFor(done: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

/** The most one export request may carry. */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

interface AnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: AnyValue[] };
  kvlistValue?: { values?: KeyValue[] };
  bytesValue?: string;
}
interface KeyValue {
  key: string;
  value?: AnyValue;
}

function plain(value: AnyValue | undefined): unknown {
  if (value === undefined) return undefined;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(plain);
  if (value.kvlistValue !== undefined) return attributesOf(value.kvlistValue.values);
  return value.bytesValue;
}

function attributesOf(list: KeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, plain(value)]));
}

interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: Array<{
      scope?: { name?: string };
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind?: number;
        startTimeUnixNano: string | number;
        endTimeUnixNano: string | number;
        attributes?: KeyValue[];
        status?: { code?: number; message?: string };
      }>;
    }>;
  }>;
}

/** The spans of one export request's body. */
export function spansOf(request: ExportRequest): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of request.resourceSpans ?? []) {
    const resource = attributesOf(resourceSpans.resource?.attributes);
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        spans.push({
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId ?? "",
          name: span.name,
          kind: span.kind ?? 0,
          start: BigInt(span.startTimeUnixNano),
          end: BigInt(span.endTimeUnixNano),
          attributes: attributesOf(span.attributes),
          status: { code: span.status?.code ?? 0, ...(span.status?.message ? { message: span.status.message } : {}) },
          resource,
          scope: scopeSpans.scope?.name ?? "",
        });
      }
    }
  }
  return spans;
}

/** Starts a receiver on a free loopback port. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const receiver = { spans: [] as ReceivedSpan[], requests: 0, refused: 0, hang: false, held: 0 } as OtlpReceiver;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const refuse = (status: number) => {
      receiver.refused++;
      res.writeHead(status, { "Content-Type": "application/json", Connection: "close" }).end("{}");
    };
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        refuse(413);
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (res.headersSent) return;
      if (receiver.hang) {
        receiver.held++;
        return;
      }
      if (req.method !== "POST" || req.url !== "/v1/traces" || !String(req.headers["content-type"]).startsWith("application/json")) return refuse(400);
      let body: ExportRequest;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ExportRequest;
      } catch {
        return refuse(400);
      }
      receiver.spans.push(...spansOf(body));
      receiver.requests++;
      res.writeHead(200, { "Content-Type": "application/json" }).end("{}");
    });
  });
  server.listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  const { port } = server.address() as AddressInfo;
  receiver.url = `http://127.0.0.1:${port}/v1/traces`;
  receiver.waitFor = async (done, timeoutMs = 20_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!done(receiver.spans)) {
      if (Date.now() > deadline) {
        throw new Error(`the OTLP receiver did not get the spans waited for within ${timeoutMs} ms; it has: ${receiver.spans.map((s) => s.name).join(", ") || "none"}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    return receiver.spans;
  };
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return receiver;
}
