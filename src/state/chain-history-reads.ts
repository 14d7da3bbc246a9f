import { BlockNotFoundError, type Hex, type PublicClient } from "viem";
import type { SettlementRecord } from "../ledger/types.js";
import { KitErrorOf } from "../protocol/errors.js";

/**
 * What the one payment decision (settlement's `decidePayment`, handed down by the room above) says of a settled row on
 * the chain now: `proven` (paid by the row's own transaction in the row's block), `disproven` (its transaction mined
 * without paying it, or elsewhere; its authorization spent by another transfer or canceled), `absent` (no receipt of its
 * transaction, and nothing spent its authorization: a node that has not seen it yet looks the same), `unknown` (the
 * chain cannot tell now).
 */
export type RowProof = "proven" | "disproven" | "absent" | "unknown";

/** Decides a settled row by the one payment decision; rejects when the row's receipt cannot be read. */
export type RowProver = (row: SettlementRecord) => Promise<RowProof>;

/** Why a check of the chain's history could not finish (an RPC or the ledger failed); nothing was changed. */
export class HistoryCheckError extends KitErrorOf("HistoryCheckError", "history_check_failed") {}

export function message(error: unknown): string {
  return error instanceof Error ? error.message.split("\n")[0]! : String(error);
}

export const sameHash = (a: string | undefined, b: string) => a !== undefined && a.toLowerCase() === b.toLowerCase();

/**
 * The chain's reads a history check makes, each answered only for what it proves: a block the node does not hold is
 * `undefined` (a node behind), never another block.
 */
export class HistoryReads {
  readonly #client: PublicClient;
  readonly #prove: RowProver;

  constructor(client: PublicClient, prove: RowProver) {
    this.#client = client;
    this.#prove = prove;
  }

  async head(): Promise<{ number: bigint; hash: Hex }> {
    const block = await this.#client.getBlock({ blockTag: "latest" });
    return { number: block.number, hash: block.hash };
  }

  /** Block `number`'s hash (lower-case); undefined when the node holds no such block. */
  async hashAt(number: bigint): Promise<Hex | undefined> {
    return (await this.#block(number))?.hash.toLowerCase() as Hex | undefined;
  }

  /** Block `number`'s time, in ms; undefined when the node holds no such block. */
  async timeOf(number: bigint): Promise<number | undefined> {
    const block = await this.#block(number);
    return block ? Number(block.timestamp) * 1000 : undefined;
  }

  /**
   * Whether the chain shows the settled row's payment now, by the one payment decision. A row neither proven nor
   * disproven by it (`absent`) is disproven only by its own block: at or below the head the node showed (`head`), held
   * by the node, without the row's transaction.
   */
  async verdict(row: SettlementRecord, head: bigint): Promise<"proven" | "disproven" | "unknown"> {
    if (!row.txHash || row.blockNumber === undefined) return "disproven";
    let proof: RowProof;
    try {
      proof = await this.#prove(row);
    } catch (error) {
      throw new HistoryCheckError(`cannot read the receipt of ${row.txHash}: ${message(error)}`, { cause: error });
    }
    if (proof !== "absent") return proof;
    if (row.blockNumber > head) return "unknown";
    const block = await this.#block(row.blockNumber);
    if (!block) return "unknown";
    return block.transactions.some((hash) => sameHash(hash, row.txHash!)) ? "unknown" : "disproven";
  }

  async #block(number: bigint) {
    try {
      return await this.#client.getBlock({ blockNumber: number });
    } catch (error) {
      if (error instanceof BlockNotFoundError) return undefined;
      throw new HistoryCheckError(`cannot read block ${number}: ${message(error)}`, { cause: error });
    }
  }
}
