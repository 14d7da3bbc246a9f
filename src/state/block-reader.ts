import type { Address, Hex, PublicClient } from "viem";
import { bloomMayContain, tokenEvent, type RawLog, type TokenEvent } from "./token-events.js";
import { KitError } from "../protocol/errors.js";

/** A block as the index knows it: where it stands in the chain, its time and what the token did in it. */
export interface IndexedBlock {
  number: bigint;
  hash: Hex;
  /** Unix seconds. */
  timestamp: bigint;
  /** The token's events of this block, in log order. */
  events: TokenEvent[];
}

/** The block a range of new blocks must follow. */
export interface ParentBlock {
  number: bigint;
  hash: Hex;
}

/**
 * The RPC answered something that does not fit together: a block missing, a block whose parent is not
 * the block before it, a log of another block. On Cronos (no reorgs) this is an RPC fault (e.g. one
 * behind a load balancer answering from two nodes); nothing of the range is applied and it is asked again.
 */
export class InconsistentChainError extends KitError<"inconsistent_chain"> {
  override name = "InconsistentChainError";
  constructor(
    message: string,
    /** The first new block does not follow the parent it was asked after: the parent may have been replaced (a reorg). */
    readonly parentMismatch = false,
  ) {
    super("inconsistent_chain", message);
  }
}

/** How many times the logs of a block whose bloom names the token are asked while they come back empty. */
export const EMPTY_LOG_ASKS = 3;

/**
 * Reads new blocks for the index, checked as it goes: the headers of a range in one batch, each linked to the one
 * before by its parent hash; then, for each block whose `logsBloom` may hold a log of the token, `eth_getLogs` by that
 * block's hash. A block's logs count only for what the answer proves, whatever node of a load-balanced endpoint gave
 * it: logs are their own proof (each names its block), an empty list is none (an ethermint node answers `[]` for a
 * block whose results it lacks, as a backend behind the head does). So an empty answer for a block whose bloom names
 * the token is asked again ({@link EMPTY_LOG_ASKS} times in all), and an empty answer for a block whose bloom names
 * the token, or is all zeros while the block holds transactions (some nodes report a bloom they never computed), is
 * settled by the block's receipts: each names its block and carries its logs, and a node without the block has none
 * to give. Every receipt there: the token's logs among them are the block's (none: the bloom said "maybe" falsely).
 * A receipt missing: the block is not proven, {@link InconsistentChainError}, and nothing of the range is applied.
 */
export class BlockReader {
  readonly #client: PublicClient;
  readonly #token: Address;

  constructor(client: PublicClient, token: Address) {
    this.#client = client;
    this.#token = token;
  }

  /** The header of block `number` (or the latest), without its token events. */
  async header(number?: bigint): Promise<IndexedBlock> {
    const block = await this.#client.getBlock(number === undefined ? { blockTag: "latest" } : { blockNumber: number });
    if (block.hash === null || block.number === null) throw new InconsistentChainError(`block ${number ?? "latest"} came back without its hash`);
    return { number: block.number, hash: block.hash, timestamp: block.timestamp, events: [] };
  }

  /** Blocks `parent.number + 1` through `to`, with the token's events, checked against `parent` and each other. */
  blocksAfter(parent: ParentBlock, to: bigint): Promise<IndexedBlock[]> {
    return this.#blocks(parent.number + 1n, to, parent);
  }

  /**
   * Blocks `from` through `to` by number, with the token's events, not linked to one another (a local chain's
   * `hardhat_mine` leaves its blocks' parent hash empty): each block's events are proven by its own content all the same.
   */
  blocksIn(from: bigint, to: bigint): Promise<IndexedBlock[]> {
    return this.#blocks(from, to);
  }

  async #blocks(from: bigint, to: bigint, parent?: ParentBlock): Promise<IndexedBlock[]> {
    const numbers: bigint[] = [];
    for (let n = from; n <= to; n++) numbers.push(n);
    const headers = await Promise.all(numbers.map((blockNumber) => this.#client.getBlock({ blockNumber })));
    let previous = parent;
    const blocks = headers.map((block, i) => {
      const number = numbers[i]!;
      if (!block || block.hash === null || block.number !== number) throw new InconsistentChainError(`block ${number} is missing from the RPC's answer`);
      if (parent && previous && block.parentHash.toLowerCase() !== previous.hash.toLowerCase()) {
        throw new InconsistentChainError(`block ${number}'s parent is ${block.parentHash}, not block ${previous.number} (${previous.hash})`, i === 0);
      }
      previous = { number, hash: block.hash };
      return { number, hash: block.hash, timestamp: block.timestamp, mayHold: mayHoldTokenLogs(block, this.#token), transactions: transactionHashes(block.transactions) };
    });
    return Promise.all(
      blocks.map(async ({ mayHold, transactions, ...block }) => ({ ...block, events: mayHold ? await this.#events(block, mayHold, transactions) : [] })),
    );
  }

  /** The token's events of `block`, proven (see the class): asked again while empty, then settled by its receipts. */
  async #events(block: { number: bigint; hash: Hex }, mayHold: "named" | "unknown", transactions: readonly Hex[]): Promise<TokenEvent[]> {
    let logs = await this.#logs(block);
    for (let asked = 1; logs.length === 0 && mayHold === "named" && asked < EMPTY_LOG_ASKS; asked++) logs = await this.#logs(block);
    if (logs.length === 0) logs = await this.#receiptLogs(block, transactions, mayHold);
    const events: TokenEvent[] = [];
    for (const log of logs) {
      const event = tokenEvent(log);
      if (event) events.push(event);
    }
    return events;
  }

  async #logs(block: { number: bigint; hash: Hex }): Promise<RawLog[]> {
    const logs = (await this.#client.getLogs({ address: this.#token, blockHash: block.hash })) as RawLog[];
    for (const log of logs) {
      if (log.blockHash?.toLowerCase() !== block.hash.toLowerCase() || log.address.toLowerCase() !== this.#token.toLowerCase()) {
        throw new InconsistentChainError(`eth_getLogs for block ${block.number} (${block.hash}) answered a log of another block or contract`);
      }
    }
    return [...logs].sort((a, b) => (a.logIndex ?? 0) - (b.logIndex ?? 0));
  }

  /** The token's logs in the receipts of `block`'s transactions, all of them there; else the block is not proven. */
  async #receiptLogs(block: { number: bigint; hash: Hex }, transactions: readonly Hex[], mayHold: "named" | "unknown"): Promise<RawLog[]> {
    const request = this.#client.request as unknown as (args: { method: string; params: unknown[] }) => Promise<RpcReceipt | null>;
    const receipts = await Promise.all(transactions.map((hash) => request({ method: "eth_getTransactionReceipt", params: [hash] }).catch(() => null)));
    const missing = receipts.filter((receipt) => receipt === null || receipt.blockHash?.toLowerCase() !== block.hash.toLowerCase()).length;
    if (missing > 0) {
      const why = mayHold === "named" ? `its bloom names the token, eth_getLogs answered none ${EMPTY_LOG_ASKS} times` : "its bloom is all zeros, eth_getLogs answered none";
      throw new InconsistentChainError(`block ${block.number} (${block.hash}) is not proven: ${why}, and ${missing} of its ${transactions.length} receipts are missing`);
    }
    const logs: RawLog[] = [];
    for (const receipt of receipts as RpcReceipt[]) {
      for (const log of receipt.logs) {
        if (log.address.toLowerCase() !== this.#token.toLowerCase() || log.removed === true) continue;
        logs.push({ address: log.address, topics: log.topics, data: log.data, blockHash: block.hash, blockNumber: block.number, logIndex: log.logIndex === null ? null : Number(log.logIndex) });
      }
    }
    return logs.sort((a, b) => (a.logIndex ?? 0) - (b.logIndex ?? 0));
  }
}

/** A transaction receipt as JSON-RPC answers it (the fields read here). */
interface RpcReceipt {
  blockHash: Hex | null;
  logs: Array<{ address: Address; topics: Hex[]; data: Hex; logIndex: Hex | null; removed?: boolean }>;
}

/** The hashes of a block's transactions (as hashes, or as objects when the block came with them). */
function transactionHashes(transactions: readonly unknown[]): Hex[] {
  return transactions.map((transaction) => (typeof transaction === "string" ? (transaction as Hex) : (transaction as { hash: Hex }).hash));
}

/**
 * Whether a block may hold a log of `token`: `named` when its `logsBloom` names the token, `unknown` when the bloom
 * cannot tell, false when the block certainly holds none. A bloom of all zeros in a block that holds transactions
 * is not believed (some nodes report an empty bloom they never computed; believed, it would blind the index): such
 * a block's logs are asked for. A block without transactions holds no logs at all.
 */
function mayHoldTokenLogs(block: { logsBloom: Hex | null; transactions: readonly unknown[] }, token: Address): "named" | "unknown" | false {
  if (block.logsBloom === null) return "unknown";
  if (/^0x0*$/.test(block.logsBloom)) return block.transactions.length > 0 ? "unknown" : false;
  return bloomMayContain(block.logsBloom, token) ? "named" : false;
}
