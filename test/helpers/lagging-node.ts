import { hexToBigInt, numberToHex, type Hex } from "viem";

// Helpers only: importing this file runs nothing.

// A node behind: the chain as it was at `height`. Requests are rewritten before they reach the chain (a block tag of
// the head names `height`), and answers after (nothing of a later block is shown): what a fallback RPC minutes behind
// answers, its head, blocks, receipts, logs and state all of that height.

/** One JSON-RPC request (rpc-proxy.ts's `JsonRpcRequest`). */
interface JsonRpcRequest {
  id?: unknown;
  method?: unknown;
  params?: unknown;
}

const HEAD_TAGS = new Set(["latest", "pending", "safe", "finalized"]);
/** Methods whose last parameter is a block tag. */
const STATE_READS = new Set(["eth_call", "eth_getBalance", "eth_getCode", "eth_getTransactionCount", "eth_getStorageAt", "eth_estimateGas"]);

const beyond = (value: unknown, height: bigint) => typeof value === "string" && value.startsWith("0x") && hexToBigInt(value as Hex) > height;

/** The request as a node at `height` would serve it: block tags of the head (or beyond it) name `height`. */
export function lagRequest(item: JsonRpcRequest, height: bigint): JsonRpcRequest {
  if (!Array.isArray(item.params)) return item;
  const params = [...(item.params as unknown[])];
  const at = numberToHex(height);
  const tag = (value: unknown) => (typeof value === "string" && (HEAD_TAGS.has(value) || beyond(value, height)) ? at : value);
  if (item.method === "eth_getBlockByNumber") params[0] = HEAD_TAGS.has(String(params[0])) ? at : params[0];
  else if (STATE_READS.has(String(item.method)) && params.length > 0) params[params.length - 1] = tag(params[params.length - 1]);
  else if (item.method === "eth_getLogs" && typeof params[0] === "object" && params[0] !== null) {
    const filter = { ...(params[0] as Record<string, unknown>) };
    if (filter.toBlock === undefined || HEAD_TAGS.has(String(filter.toBlock))) filter.toBlock = at;
    params[0] = filter;
  }
  return { ...item, params };
}

/** One answer as a node at `height` gives it: no block, receipt, transaction or log after `height`; its head is `height`. */
export function lagResult(item: JsonRpcRequest, result: unknown, height: bigint): unknown {
  switch (item.method) {
    case "eth_blockNumber":
      return numberToHex(height);
    case "eth_getBlockByNumber":
    case "eth_getBlockByHash":
      return result && beyond((result as { number?: unknown }).number, height) ? null : result;
    case "eth_getTransactionReceipt":
    case "eth_getTransactionByHash":
      return result && beyond((result as { blockNumber?: unknown }).blockNumber, height) ? null : result;
    case "eth_getLogs":
      return Array.isArray(result) ? result.filter((log: { blockNumber?: unknown }) => !beyond(log.blockNumber, height)) : result;
    default:
      return result;
  }
}
