import { numberToHex, type Hex } from "viem";
import type { FaultProxy, JsonRpcAnswer, JsonRpcRequest } from "./rpc-proxy.js";

// Helpers only: importing this file runs nothing.
// How a Cronos (ethermint) node's eth_getLogs answers, put in front of the local chain by a test's own RPC proxy:
// its caps with their texts, and a backend whose results lag behind (it answers what it has, without error).

/** Options of {@link cutLogsShort}. */
export interface CutLogsOptions {
  /**
   * A range `eth_getLogs` answers only the logs of blocks up to `lagBlocks` below the requested `toBlock` (see
   * `below`), without error (`[]` when `fromBlock` is above that); the `blockHash` form answers `[]` for a block within `lagBlocks` of
   * the chain's head.
   */
  lagBlocks: number;
  /**
   * What the range's cut is below: the requested `toBlock` (default: every range loses its last `lagBlocks` blocks),
   * or the chain's head (a backend that is merely behind: ranges ending lower are answered whole).
   */
  below?: "to" | "head";
  /**
   * How the other items of an HTTP request that carries a cut range are answered:
   * - `same-backend`: by that lagging backend too (one HTTP request, one node: a node's own server, an HTTP load
   *   balancer): a header or receipt of a block above its head is `null`, `eth_blockNumber` is its head;
   * - `split`: by an up-to-date backend (a JSON-RPC gateway that sends each item of a batch to a backend of its own).
   */
  batch: "same-backend" | "split";
  /** Receipts of blocks within `lagBlocks` of the head are `null` in every request (the node's tx indexer behind too). */
  receiptsLag?: boolean;
}

/** A {@link cutLogsShort} rule in place. */
export interface LogCut {
  /** Answers it changed so far (a log list cut or emptied, a header or receipt made null). */
  readonly changed: number;
  /** The node answers honestly from now on. */
  end(): void;
}

type Filter = { fromBlock?: Hex | string; toBlock?: Hex | string; blockHash?: Hex };
type RpcLog = { blockNumber: Hex };

const isRange = (request: JsonRpcRequest) => request.method === "eth_getLogs" && (request.params as [Filter])[0].blockHash === undefined;
const isByHash = (request: JsonRpcRequest) => request.method === "eth_getLogs" && (request.params as [Filter])[0].blockHash !== undefined;
const isReceipt = (request: JsonRpcRequest) => request.method === "eth_getTransactionReceipt" || request.method === "eth_getBlockReceipts";
const isHeader = (request: JsonRpcRequest) => request.method === "eth_getBlockByNumber" || request.method === "eth_getBlockByHash";
/** A block tag of a filter as a number (`latest` and the like: the head). */
const blockOf = (tag: Hex | string | undefined, head: bigint) => (tag === undefined || !tag.startsWith("0x") ? head : BigInt(tag));
/** The block number an answer names (a header, a receipt, a list of logs), if any. */
const numberIn = (result: unknown): bigint | undefined => {
  const named = Array.isArray(result) ? (result[0] as { blockNumber?: Hex } | undefined) : (result as { number?: Hex; blockNumber?: Hex } | null);
  const hex = (named as { number?: Hex } | null)?.number ?? named?.blockNumber;
  return typeof hex === "string" ? BigInt(hex) : undefined;
};

/** Puts a backend whose results lag behind in front of the chain (see {@link CutLogsOptions}), until `end`. */
export function cutLogsShort(proxy: FaultProxy, options: CutLogsOptions): LogCut {
  let active = true;
  let changed = 0;
  const lag = BigInt(options.lagBlocks);
  proxy.rewriteBatch(async (requests, answers, chain) => {
    if (!active || !requests.some((r) => r.method === "eth_getLogs" || (options.receiptsLag && isReceipt(r)))) return undefined;
    const head = BigInt(await chain.call<Hex>("eth_blockNumber"));
    let backendHead: bigint | undefined;
    const out: JsonRpcAnswer[] = answers.map((answer, i) => {
      const request = requests[i]!;
      if (answer.error) return answer;
      if (isRange(request)) {
        const [filter] = request.params as [Filter];
        const to = blockOf(filter.toBlock, head);
        const reach = (options.below === "head" ? head : to) - lag;
        if (backendHead === undefined || reach < backendHead) backendHead = reach;
        const logs = answer.result as RpcLog[];
        const kept = blockOf(filter.fromBlock, head) > reach ? [] : logs.filter((log) => BigInt(log.blockNumber) <= reach);
        if (kept.length === logs.length) return answer;
        changed++;
        return { result: kept };
      }
      if (isByHash(request)) {
        const block = numberIn(answer.result);
        if (block === undefined || block <= head - lag) return answer;
        changed++;
        return { result: [] };
      }
      if (options.receiptsLag && isReceipt(request)) {
        const block = numberIn(answer.result);
        if (block === undefined || block <= head - lag) return answer;
        changed++;
        return { result: null };
      }
      return answer;
    });
    // The rest of the request from the backend that answered its range, when one node answers a whole request.
    if (options.batch === "same-backend" && backendHead !== undefined) {
      const reach = backendHead;
      out.forEach((answer, i) => {
        const request = requests[i]!;
        if (answer.error) return;
        if (request.method === "eth_blockNumber") out[i] = { result: numberToHex(reach < 0n ? 0n : reach) };
        else if (isHeader(request) || isReceipt(request)) {
          const block = numberIn(answer.result);
          if (block !== undefined && block > reach) {
            changed++;
            out[i] = { result: null };
          }
        }
      });
    }
    return out;
  });
  return {
    get changed() {
      return changed;
    },
    end() {
      active = false;
    },
  };
}

/** Options of {@link capLogs}: an ethermint node's `block-range-cap` and `logs-cap` (10,000 each by default on a node). */
export interface LogCaps {
  /** A range whose `toBlock - fromBlock` is above this is refused: `maximum [from, to] blocks distance: <blocks>`. */
  blocks: number;
  /** A range answering more logs than this is refused: `query returned more than <results> results`. */
  results: number;
}

/** The refusals {@link capLogs} answered so far, by text; and the ranges it let through (`[from, to]`). */
export interface CappedLogs {
  refused: { distance: number; results: number };
  passed: Array<[bigint, bigint]>;
}

/** Caps the chain's `eth_getLogs` ranges as an ethermint node does, with its texts (JSON-RPC code -32000). */
export function capLogs(proxy: FaultProxy, caps: LogCaps): CappedLogs {
  const record: CappedLogs = { refused: { distance: 0, results: 0 }, passed: [] };
  proxy.rewrite((request, answer) => {
    if (!isRange(request) || answer.error) return undefined;
    const [filter] = request.params as [Filter];
    const from = BigInt(filter.fromBlock!);
    const to = BigInt(filter.toBlock!);
    if (to - from > BigInt(caps.blocks)) {
      record.refused.distance++;
      return { error: { code: -32000, message: `maximum [from, to] blocks distance: ${caps.blocks}` } };
    }
    if ((answer.result as unknown[]).length > caps.results) {
      record.refused.results++;
      return { error: { code: -32000, message: `query returned more than ${caps.results} results` } };
    }
    record.passed.push([from, to]);
    return undefined;
  });
  return record;
}
