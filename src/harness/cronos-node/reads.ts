import { numberToHex, type Address, type Hex } from "viem";
import type { RequestProvider } from "../rpc-bridge.js";
import { nodeError } from "./admission.js";
import type { PoolRecord } from "./pool.js";
import { LATEST_ALIASES, LOG_BLOCK_RANGE_CAP, LOG_RESULTS_CAP, logRangeTooWide, PENDING_VIEW, tooManyLogs } from "./texts.js";

// The node's reads that differ from geth's: block tags, `eth_getLogs` (its caps, and what a backend behind
// the head answers), and the `pending` views (the first page of its pool).

/** Where each method that takes a block takes it (the parameter's index). */
const BLOCK_PARAMETER: Readonly<Record<string, number>> = {
  eth_getBalance: 1,
  eth_getCode: 1,
  eth_getStorageAt: 2,
  eth_getTransactionCount: 1,
  eth_call: 1,
  eth_estimateGas: 1,
  eth_createAccessList: 1,
  eth_getProof: 2,
  eth_feeHistory: 1,
  eth_getBlockByNumber: 0,
  eth_getBlockReceipts: 0,
  eth_getBlockTransactionCountByNumber: 0,
  eth_getTransactionByBlockNumberAndIndex: 0,
  eth_getUncleCountByBlockNumber: 0,
  eth_getUncleByBlockNumberAndIndex: 0,
};

/** A block tag (or EIP-1898 `{ blockNumber }`) of `pending`, `safe` or `finalized` as `latest`; anything else as it is. */
function latestFor(block: unknown): unknown {
  if (typeof block === "string") return LATEST_ALIASES.has(block) ? "latest" : block;
  if (typeof block === "object" && block !== null && "blockNumber" in block) {
    const { blockNumber } = block as { blockNumber: unknown };
    if (typeof blockNumber === "string" && LATEST_ALIASES.has(blockNumber)) return { ...block, blockNumber: "latest" };
  }
  return block;
}

/** The params with every `pending`, `safe` and `finalized` block read as `latest`, as the node reads them. */
export function withLatest(method: string, params: unknown): unknown {
  if (!Array.isArray(params)) return params;
  const index = BLOCK_PARAMETER[method];
  if (index !== undefined && index < params.length) return params.map((value, i) => (i === index ? latestFor(value) : value));
  if (method === "eth_newFilter" && typeof params[0] === "object" && params[0] !== null) {
    const filter = params[0] as Record<string, unknown>;
    return [{ ...filter, fromBlock: latestFor(filter.fromBlock), toBlock: latestFor(filter.toBlock) }, ...params.slice(1)];
  }
  return params;
}

/** Whether a block parameter asks for `pending`. */
export function isPending(block: unknown): boolean {
  if (block === "pending") return true;
  return typeof block === "object" && block !== null && (block as { blockNumber?: unknown }).blockNumber === "pending";
}

/** A range end as a number against `head` (the node's head); undefined for what is not a block (EDR gives its error). */
function blockOf(value: unknown, head: bigint): bigint | undefined {
  if (value === undefined || value === null || value === "latest" || (typeof value === "string" && LATEST_ALIASES.has(value))) return head;
  if (value === "earliest") return 0n;
  if (typeof value === "string" && /^0x[0-9a-fA-F]{1,64}$/.test(value)) return BigInt(value);
  return undefined;
}

/**
 * `eth_getLogs` as ethermint answers it from a backend whose head is `lagBlocks` behind the chain's (0: the
 * chain's own head): a `[from, to]` distance over the cap is refused, a `from` above the head is `[]`, a
 * range is walked only up to the head (what it has, without error), the `blockHash` form of a block above
 * the head is `[]`, and more logs than the cap are refused.
 */
export async function readLogs(edr: RequestProvider, params: unknown, lagBlocks: number): Promise<unknown> {
  const filter: unknown = Array.isArray(params) ? params[0] : undefined;
  if (typeof filter !== "object" || filter === null || Array.isArray(filter)) return edr.request({ method: "eth_getLogs", params });
  const chainHead = BigInt((await edr.request({ method: "eth_blockNumber", params: [] })) as Hex);
  const head = chainHead > BigInt(lagBlocks) ? chainHead - BigInt(lagBlocks) : 0n;
  const { blockHash, fromBlock, toBlock } = filter as { blockHash?: unknown; fromBlock?: unknown; toBlock?: unknown };
  if (blockHash !== undefined) {
    if (lagBlocks > 0 && typeof blockHash === "string") {
      const block = (await edr.request({ method: "eth_getBlockByHash", params: [blockHash, false] })) as { number: Hex } | null;
      if (block && BigInt(block.number) > head) return [];
    }
    return capped(await edr.request({ method: "eth_getLogs", params }));
  }
  const from = blockOf(fromBlock, head);
  const to = blockOf(toBlock, head);
  if (from === undefined || to === undefined) return edr.request({ method: "eth_getLogs", params });
  if (to - from > BigInt(LOG_BLOCK_RANGE_CAP)) throw nodeError(logRangeTooWide(LOG_BLOCK_RANGE_CAP));
  const end = to > head ? head : to;
  if (from > end) return [];
  return capped(await edr.request({ method: "eth_getLogs", params: [{ ...filter, fromBlock: numberToHex(from), toBlock: numberToHex(end) }] }));
}

function capped(logs: unknown): unknown {
  if (Array.isArray(logs) && logs.length > LOG_RESULTS_CAP) throw nodeError(tooManyLogs(LOG_RESULTS_CAP));
  return logs;
}

/** The sender's committed nonce, read from EDR. */
export async function committedNonce(edr: RequestProvider, sender: Address): Promise<bigint> {
  return BigInt((await edr.request({ method: "eth_getTransactionCount", params: [sender, "latest"] })) as Hex);
}

/** The first page of the pool (CometBFT's `UnconfirmedTxs`): the first {@link PENDING_VIEW} still pending, in arrival order. */
export function firstPage(edr: RequestProvider, pool: PoolRecord) {
  return pool.pending((sender) => committedNonce(edr, sender), PENDING_VIEW);
}

/** `eth_getTransactionCount(address, "pending")`: committed, plus the address's transactions on the pool's first page. */
export async function pendingCount(edr: RequestProvider, pool: PoolRecord, address: unknown): Promise<unknown> {
  if (typeof address !== "string" || !/^0x[0-9a-fA-F]{40}$/.test(address)) return edr.request({ method: "eth_getTransactionCount", params: [address, "latest"] });
  const sender = address.toLowerCase() as Address;
  const committed = await committedNonce(edr, sender);
  const mine = (await firstPage(edr, pool)).filter((tx) => tx.sender === sender).length;
  return numberToHex(committed + BigInt(mine));
}

/** `eth_getTransactionByHash`: a pending transaction is found only on the pool's first page. */
export async function transactionByHash(edr: RequestProvider, pool: PoolRecord, params: unknown): Promise<unknown> {
  const found = (await edr.request({ method: "eth_getTransactionByHash", params })) as { hash?: string; blockNumber?: unknown } | null;
  if (!found || (found.blockNumber !== null && found.blockNumber !== undefined)) return found;
  const hash = String(found.hash).toLowerCase();
  return (await firstPage(edr, pool)).some((tx) => tx.hash === hash) ? found : null;
}
