import { once } from "node:events";
import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type RequestListener, type Server } from "node:http";
import { createServer as createTcpServer, type AddressInfo } from "node:net";
import { expect } from "chai";
import { closeAfter } from "./teardown.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// HTTP on loopback: servers on ephemeral ports, ports held or released, JSON over fetch, base64 JSON headers.

/** A server listening on an ephemeral 127.0.0.1 port. */
export interface Listening {
  url: string;
  port: number;
  server: Server;
  /** Closes the server and every open (e.g. hanging) connection. */
  close(): Promise<void>;
}

/** Serves `handler` (an Express app or a plain listener) on an ephemeral loopback port, closed with the scope that opens it (test/helpers/teardown.ts). */
export async function listen(handler: RequestListener): Promise<Listening> {
  const server = createServer(handler);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      if (!server.listening) return;
      const closed = once(server, "close");
      server.close();
      server.closeAllConnections();
      await closed;
    })();
    return closing;
  };
  closeAfter(`server on port ${port}`, close);
  return { url: `http://127.0.0.1:${port}`, port, server, close };
}

/** A loopback URL where nothing listens (a port that was bound, then released). */
export async function closedPortUrl(): Promise<string> {
  const server = await listen((_req, res) => res.end());
  await server.close();
  return server.url;
}

/** True when `port` can be bound on 127.0.0.1 right now. */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createTcpServer();
    probe.once("error", () => resolve(false));
    probe.listen({ port, host: "127.0.0.1", exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

/** Holds a port on 127.0.0.1 (0 = any) until `release` is called. */
export async function occupyPort(port = 0): Promise<{ port: number; release(): Promise<void> }> {
  const server = createTcpServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port, host: "127.0.0.1" }, () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  return { port: address.port, release: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** The whole body of a request, as text. */
export async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** An answer read by {@link fetchJson}. */
export interface JsonAnswer {
  status: number;
  headers: Headers;
  /** The parsed JSON answer (`undefined` for an empty one). */
  body: any;
}

/**
 * One request with fetch, like any client in another process: `body` goes as JSON (a string as it is),
 * the method is POST with a body and GET without unless `method` says. Resolves with the status, the
 * headers and the parsed answer; a dropped connection rejects.
 */
export async function fetchJson(url: string, options: { method?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<JsonAnswer> {
  const { body } = options;
  const response = await fetch(url, {
    method: options.method ?? (body === undefined ? "GET" : "POST"),
    headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), ...options.headers },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined };
}

/** POSTs `body` with {@link fetchJson}; resolves with the status and the parsed answer as `json`. */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: any }> {
  const answer = await fetchJson(url, { method: "POST", body, headers });
  return { status: answer.status, json: answer.body };
}

/** Asserts an answer's status and its exact JSON body. */
export async function expectAnswer(response: Response, status: number, body: unknown): Promise<void> {
  const text = await response.text();
  expect(response.status, text).to.equal(status);
  expect(JSON.parse(text)).to.deep.equal(body);
}

/** A `fetch` that records the `X-PAYMENT` header of each request it sends. */
export function recordingFetch(): { fetch: typeof fetch; paymentHeaders: string[] } {
  const paymentHeaders: string[] = [];
  const recording: typeof fetch = async (input, init) => {
    const header = new Headers(init?.headers).get("X-PAYMENT");
    if (header !== null) paymentHeaders.push(header);
    return fetch(input, init);
  };
  return { fetch: recording, paymentHeaders };
}

/** The JSON object inside a base64 header value (asserts the header is there). */
export function decodeBase64Json(value: string | null | undefined): Record<string, any> {
  expect(value, "header present").to.be.a("string");
  return JSON.parse(Buffer.from(value!, "base64").toString("utf8")) as Record<string, any>;
}

/** `value` as JSON in base64, as payment headers carry it. */
export function encodeBase64Json(value: unknown): string {
  return Buffer.from(JSON.stringify(value), "utf8").toString("base64");
}

/**
 * One request to `url` carrying exactly `headers` and, as `Host`, `host` (`null`: no Host header at all),
 * whatever the address connected to: what a browser sends under DNS rebinding (fetch cannot set `Host`).
 * Resolves with the status, the headers and the body (parsed when it is JSON).
 */
export function rawRequest(
  url: string,
  options: { host: string | null; method?: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; headers: IncomingHttpHeaders; body: any }> {
  const target = new URL(url);
  const headers: Record<string, string> = { ...(options.host === null ? {} : { Host: options.host }), ...options.headers };
  if (options.body !== undefined) headers["Content-Length"] = String(Buffer.byteLength(options.body));
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: target.hostname, port: target.port, path: `${target.pathname}${target.search}`, method: options.method ?? "GET", headers, setHost: false },
      (res) => {
        void readBody(res).then((text) => {
          let body: unknown = text;
          if ((res.headers["content-type"] ?? "").startsWith("application/json")) body = JSON.parse(text);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        }, reject);
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}
