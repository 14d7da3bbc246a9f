import type { IncomingMessage, ServerResponse } from "node:http";

// JSON-RPC 2.0 over HTTP POST for the bridge (rpc-bridge.ts): one request or a batch, read within a limit, answered by the provider.

/** A JSON-RPC request id. */
export type JsonRpcId = string | number | null;
/** A JSON-RPC error answer. */
export interface JsonRpcError {
  jsonrpc: "2.0";
  id: JsonRpcId;
  error: { code: number; message: string; data?: unknown };
}
/** A JSON-RPC answer: a result or an error. */
export type JsonRpcResponse = JsonRpcError | { jsonrpc: "2.0"; id: JsonRpcId; result: unknown };

const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INTERNAL_ERROR = -32603;
// geth/anvil put raw revert data in error.data under this code; viem decodes reverts from it.
const REVERT_ERROR_CODE = 3;

/** How a request reaches the provider: directly over HTTP, through a socket's subscription book over WebSocket. */
export type Call = (args: { method: string; params: unknown }) => Promise<unknown>;

/** Answers one HTTP request to the bridge: POST only, a body within `limit`, one call or a batch. */
export async function handle(call: Call, req: IncomingMessage, res: ServerResponse, limit: number): Promise<void> {
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
  const reply = await answer(call, raw);
  if (reply === undefined) send(res, 204);
  else send(res, 200, reply);
}

/**
 * The answer to one HTTP body or WebSocket message (a request or a batch); undefined when there is
 * nothing to answer (only notifications).
 */
export async function answer(call: Call, raw: string): Promise<JsonRpcResponse | JsonRpcResponse[] | undefined> {
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch (error) {
    return errorResponse(null, PARSE_ERROR, `Parse error: ${(error as Error).message}`);
  }
  if (!Array.isArray(body)) return handleOne(call, body);
  if (body.length === 0) return errorResponse(null, INVALID_REQUEST, "Invalid request: empty batch");
  const responses: JsonRpcResponse[] = [];
  // In order, one at a time: later calls in a batch may depend on earlier ones (nonces, snapshots).
  for (const item of body) {
    const response = await handleOne(call, item);
    if (response) responses.push(response);
  }
  return responses.length === 0 ? undefined : responses;
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
async function handleOne(call: Call, payload: unknown): Promise<JsonRpcResponse | undefined> {
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
    const result = await call({ method: request.method, params: params ?? [] });
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

/** A JSON-RPC error object for `id`. */
export function errorResponse(id: JsonRpcId, code: number, message: string, data?: unknown): JsonRpcError {
  return { jsonrpc: "2.0", id, error: data === undefined ? { code, message } : { code, message, data } };
}

/** Writes `body` as JSON with `status` (no body: an empty answer). */
export function send(res: ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(status).end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) }).end(text);
}
