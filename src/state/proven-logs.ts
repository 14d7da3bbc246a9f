// Log reads that prove what they cover: a range of the token's nonce logs with the node's proof that it holds the
// range's blocks, and what a node's refusal of a range says about its caps.
import { numberToHex, toEventSelector, type Address, type Hex, type PublicClient } from "viem";
import { InconsistentChainError } from "./block-reader.js";
import { NONCE_EVENTS, type RawLog } from "./token-events.js";
import { KitErrorOf } from "../protocol/errors.js";

/** The topics of the two events that spend a nonce: the filter of a range read. */
const NONCE_TOPICS = NONCE_EVENTS.map((event) => toEventSelector(event));

/**
 * The node answered a range of logs without proving it holds the range's blocks (the header of its first or last
 * block was missing from the same batch, or was another block): the answer may be cut short, and nothing of it counts.
 */
export class UnprovenLogsError extends KitErrorOf("UnprovenLogsError", "unproven_logs") {}

/** A log as JSON-RPC answers it (numbers in hex). */
interface RpcLog {
  address: Address;
  topics: Hex[];
  data: Hex;
  blockHash: Hex | null;
  blockNumber: Hex | null;
  logIndex: Hex | null;
  removed?: boolean;
}

/** A block header as JSON-RPC answers it (the fields the proof reads). */
interface RpcHeader {
  number: Hex | null;
  hash: Hex | null;
}

/**
 * The token's `AuthorizationUsed` and `AuthorizationCanceled` logs of blocks `from`..`to`, proven complete: one
 * JSON-RPC batch asks, in this order, for the header of `to`, the logs, and the header of `from`.
 *
 * Why that proves the range: an ethermint node answers a range by walking its blocks and, at the first block whose
 * results it lacks (a backend behind the head, a pruned node), returns what it has **without error**; the same node
 * answers a header only when it holds that block's results (`eth_getBlockByNumber` reads them). A node holds the
 * results of one stretch of blocks (it prunes from the bottom, it adds at the top). The header of `to` answered
 * before the walk shows the walk could reach `to`; the header of `from` answered after it shows `from` was not pruned
 * during it; so the walk went through every block. The proof holds where one HTTP request is answered by one node,
 * in order: a node's own server (a batch is served in order by one process) and any HTTP load balancer (it routes a
 * request, never the items of its body). It does **not** hold behind a JSON-RPC gateway that splits a batch across
 * backends: their heads are another node's word. That is why the blocks nearest the head, the only ones a backend
 * merely behind lacks, are not read this way at all: the backfill reads them block by block, each proven by its own
 * content ({@link BlockReader}). `toHash`: the hash `to` must have (the block the index started at): another one
 * is another history, not proven either.
 *
 * Throws {@link UnprovenLogsError} when the proof is missing, the node's refusal of the logs as it came (see
 * {@link logRefusal}), and {@link InconsistentChainError} for a log outside the range or of another contract.
 */
export async function provenNonceLogs(client: PublicClient, token: Address, from: bigint, to: bigint, toHash?: Hex): Promise<RawLog[]> {
  const request = client.request as unknown as (args: { method: string; params: unknown[] }) => Promise<unknown>;
  // Asked together, in this order: one batch (the transport batches calls made together, in call order).
  const [last, logs, first] = await Promise.allSettled([
    request({ method: "eth_getBlockByNumber", params: [numberToHex(to), false] }) as Promise<RpcHeader | null>,
    request({ method: "eth_getLogs", params: [{ address: token, topics: [NONCE_TOPICS], fromBlock: numberToHex(from), toBlock: numberToHex(to) }] }) as Promise<RpcLog[]>,
    request({ method: "eth_getBlockByNumber", params: [numberToHex(from), false] }) as Promise<RpcHeader | null>,
  ]);
  if (logs.status === "rejected") throw logs.reason;
  const held = (header: PromiseSettledResult<RpcHeader | null>, number: bigint) =>
    header.status === "fulfilled" && header.value !== null && header.value.number !== null && BigInt(header.value.number) === number ? header.value : undefined;
  const lastHeld = held(last, to);
  if (!lastHeld || !held(first, from)) {
    throw new UnprovenLogsError(`eth_getLogs of blocks ${from}..${to} came without the node's header of block ${lastHeld ? from : to} in the same batch: it may be cut short`);
  }
  if (toHash !== undefined && lastHeld.hash?.toLowerCase() !== toHash.toLowerCase()) {
    throw new UnprovenLogsError(`block ${to} came back as ${lastHeld.hash}, not the ${toHash} the index started at`);
  }
  return logs.value.filter((log) => log.removed !== true).map((log) => rawLog(log, token, from, to));
}

function rawLog(log: RpcLog, token: Address, from: bigint, to: bigint): RawLog {
  const blockNumber = log.blockNumber === null ? null : BigInt(log.blockNumber);
  if (log.address.toLowerCase() !== token.toLowerCase() || blockNumber === null || blockNumber < from || blockNumber > to) {
    throw new InconsistentChainError(`eth_getLogs of blocks ${from}..${to} answered a log of block ${blockNumber} of ${log.address}`);
  }
  return { address: log.address, topics: log.topics, data: log.data, blockHash: log.blockHash, blockNumber, logIndex: log.logIndex === null ? null : Number(log.logIndex) };
}

/**
 * What a node's refusal of a range of logs says:
 * - `distance`: the node's block-range cap (ethermint: `maximum [from, to] blocks distance: 10000`, where the
 *   distance is `to - from`): a range of `blocks` blocks passes;
 * - `results`: too many logs (ethermint: `query returned more than 10000 results`; other providers' "too many",
 *   "response size exceeded", "limit exceeded"): the range is halved;
 * - `behind`: the node's head is below the range's end (ethermint: `block range extends beyond current head
 *   block`): the same range is asked again later, not narrowed;
 * - `other`: anything else, worded as providers word their caps in many ways: the range is halved too.
 */
export type LogRefusal = { kind: "distance"; blocks: bigint } | { kind: "results" } | { kind: "behind" } | { kind: "other" };

const DISTANCE_CAP = /maximum \[from, to\] blocks distance: (\d+)/;
const RESULTS_CAP = /query returned more than \d+ results|too many|response size (is )?(exceeded|too large)|limit exceeded|more than \d+ (logs|results)/i;
const BEYOND_HEAD = /beyond (the )?current head/i;

/** Reads a node's refusal of `eth_getLogs` over a range (see {@link LogRefusal}). */
export function logRefusal(error: unknown): LogRefusal {
  const text = error instanceof Error ? `${error.message} ${(error as { details?: string }).details ?? ""}` : String(error);
  const distance = DISTANCE_CAP.exec(text);
  if (distance) return { kind: "distance", blocks: BigInt(distance[1]!) };
  if (RESULTS_CAP.test(text)) return { kind: "results" };
  if (BEYOND_HEAD.test(text)) return { kind: "behind" };
  return { kind: "other" };
}
