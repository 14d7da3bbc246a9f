import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { isAddressInUse, PortInUseError, type PortRole } from "./errors.js";

/** The part of an EIP-1193 provider the bridge needs (Hardhat's EDR provider is one). */
export interface RequestProvider {
  request(args: { method: string; params?: unknown }): Promise<unknown>;
}

/** Options of {@link serveJsonRpc}. */
export interface ServeJsonRpcOptions {
  /** Address to bind; local stacks keep 127.0.0.1. */
  host?: string;
  /** 0 picks a free port. */
  port: number;
  /** Reported in {@link PortInUseError} when the port is taken. */
  role: PortRole;
  /** Largest accepted request body. */
  bodyLimitBytes?: number;
}

/** A running JSON-RPC-over-HTTP endpoint. */
export interface JsonRpcBridge {
  /** `http://host:port` */
  url: string;
  port: number;
  /** Stops accepting requests and drops open connections. */
  close(): Promise<void>;
}

type JsonRpcId = string | number | null;
interface JsonRpcError {
  jsonrpc: "2.0";
  id: JsonRpcId;
  error: { code: number; message: string; data?: unknown };
}
type JsonRpcResponse = JsonRpcError | { jsonrpc: "2.0"; id: JsonRpcId; result: unknown };

const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;
const INTERNAL_ERROR = -32603;
// geth/anvil put raw revert data in error.data under this code; viem decodes reverts from it.
const REVERT_ERROR_CODE = 3;

/**
 * Serves `provider` as JSON-RPC 2.0 over HTTP POST (single requests and batches), the way
 * `hardhat node` does, but in this process so the same provider can also be used directly.
 */
export async function serveJsonRpc(provider: RequestProvider, options: ServeJsonRpcOptions): Promise<JsonRpcBridge> {
  const host = options.host ?? "127.0.0.1";
  const limit = options.bodyLimitBytes ?? 32 * 1024 * 1024;
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    handle(provider, req, res, limit).catch((error: unknown) => {
      // Only reached if writing the response itself failed; nothing more can be sent.
      if (!res.headersSent) send(res, 500, errorResponse(null, INTERNAL_ERROR, String(error)));
      else res.destroy();
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await listen(server, host, options.port, options.role);
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}`,
    port,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      });
      return closing;
    },
  };
}

function listen(server: Server, host: string, port: number, role: PortRole): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => {
      server.off("listening", onListening);
      reject(isAddressInUse(error) ? new PortInUseError(port, role, host, { cause: error }) : error);
    };
    const onListening = () => {
      server.off("error", onError);
      resolve();
    };
    server.once("error", onError);
    server.once("listening", onListening);
    server.listen({ host, port, exclusive: true });
  });
}

async function handle(provider: RequestProvider, req: IncomingMessage, res: ServerResponse, limit: number): Promise<void> {
  if (req.method !== "POST") {
    res.setHeader("Allow", "POST");
    send(res, 405, errorResponse(null, INVALID_REQUEST, "JSON-RPC requests must be sent with POST"));
    return;
  }
  const raw = await readBody(req, limit);
  if (raw === undefined) {
    res.setHeader("Connection", "close");
    send(res, 413, errorResponse(null, INVALID_REQUEST, `request body larger than ${limit} bytes`));
    return;
  }
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch (error) {
    send(res, 200, errorResponse(null, PARSE_ERROR, `Parse error: ${(error as Error).message}`));
    return;
  }
  if (Array.isArray(body)) {
    if (body.length === 0) {
      send(res, 200, errorResponse(null, INVALID_REQUEST, "Invalid request: empty batch"));
      return;
    }
    const responses: JsonRpcResponse[] = [];
    // In order, one at a time: later calls in a batch may depend on earlier ones (nonces, snapshots).
    for (const item of body) {
      const response = await handleOne(provider, item);
      if (response) responses.push(response);
    }
    if (responses.length === 0) send(res, 204);
    else send(res, 200, responses);
    return;
  }
  const response = await handleOne(provider, body);
  if (response) send(res, 200, response);
  else send(res, 204);
}

/** The request body as text; undefined when it exceeds `limit` (the rest is discarded unread). */
function readBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) {
        chunks.push(chunk);
        return;
      }
      req.off("data", onData);
      req.resume();
      resolve(undefined);
    };
    req.on("data", onData);
    req.once("end", () => resolve(size <= limit ? Buffer.concat(chunks).toString("utf8") : undefined));
    req.once("error", reject);
  });
}

/** Runs one request; undefined for a notification (a request without an `id`). */
async function handleOne(provider: RequestProvider, payload: unknown): Promise<JsonRpcResponse | undefined> {
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) {
    return errorResponse(null, INVALID_REQUEST, "Invalid request: not an object");
  }
  const request = payload as Record<string, unknown>;
  const hasId = "id" in request;
  const rawId = request.id;
  const idValid = !hasId || rawId === null || typeof rawId === "string" || typeof rawId === "number";
  const id: JsonRpcId = idValid && hasId ? (rawId as JsonRpcId) : null;
  const params = request.params;
  if (!idValid || typeof request.method !== "string" || (params !== undefined && typeof params !== "object")) {
    return errorResponse(id, INVALID_REQUEST, "Invalid request: needs a string `method`, optional array or object `params`");
  }
  let response: JsonRpcResponse;
  try {
    const result = await provider.request({ method: request.method, params: params ?? [] });
    response = { jsonrpc: "2.0", id, result: result ?? null };
  } catch (error) {
    response = toErrorResponse(id, error);
  }
  return hasId ? response : undefined;
}

/** Maps a provider error to a JSON-RPC error object (revert data kept where clients look for it). */
function toErrorResponse(id: JsonRpcId, error: unknown): JsonRpcError {
  const e = (typeof error === "object" && error !== null ? error : { message: String(error) }) as {
    code?: unknown;
    message?: unknown;
    data?: unknown;
  };
  const message = typeof e.message === "string" ? e.message : "Internal error";
  const code = typeof e.code === "number" && Number.isInteger(e.code) ? e.code : INTERNAL_ERROR;
  const nested = typeof e.data === "object" && e.data !== null ? (e.data as Record<string, unknown>) : undefined;
  const returnData = typeof e.data === "string" ? e.data : typeof nested?.data === "string" ? nested.data : undefined;
  if (code === REVERT_ERROR_CODE) return errorResponse(id, code, message, returnData);
  const transactionHash = typeof nested?.transactionHash === "string" ? nested.transactionHash : undefined;
  const data = returnData === undefined && transactionHash === undefined ? undefined : { data: returnData, transactionHash };
  return errorResponse(id, code, message, data);
}

function errorResponse(id: JsonRpcId, code: number, message: string, data?: unknown): JsonRpcError {
  return { jsonrpc: "2.0", id, error: data === undefined ? { code, message } : { code, message, data } };
}

function send(res: ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(status).end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) }).end(text);
}
