// The token state index's balances: payers read once, then kept current from the token's Transfer logs.
import type { Address, PublicClient } from "viem";
import { tokenAbi } from "../chain/token-abi.js";
import type { TokenEvent } from "./token-events.js";

/** Transfers of this many recent blocks are kept, to bring a balance read at an older block up to the head. */
const RECENT_BLOCKS = 256;
/** Payers whose balance is held at most; the oldest is forgotten first (read again when it comes back). */
const PAYER_LIMIT = 100_000;

/** A token transfer as the index applies it. */
export type IndexedTransfer = Extract<TokenEvent, { kind: "transfer" }>;

/**
 * Balances of the payers the index has seen, true at its head: a payer seen for the first time is read once (at the
 * index's block) and then kept current from the Transfer logs of each block applied; when the index goes back, the
 * transfers of the blocks forgotten are undone (or, when they are not all known, every balance is read again).
 */
export class PayerBalances {
  readonly #client: PublicClient;
  readonly #token: Address;
  /** The index's head: the block held balances are true at. */
  readonly #head: () => bigint;
  readonly #payers = new Map<string, bigint>();
  readonly #reads = new Map<string, { block: bigint; value: Promise<bigint> }>();
  #recent: Array<{ number: bigint; transfers: IndexedTransfer[] }> = [];
  /** Grows each time the index goes back or starts over: reads begun before are not kept. */
  #generation = 0;

  constructor(client: PublicClient, token: Address, head: () => bigint) {
    this.#client = client;
    this.#token = token;
    this.#head = head;
  }

  /** Payers whose balance is held. */
  get size(): number {
    return this.#payers.size;
  }

  /** The payer's balance at the head, when held. */
  held(payer: Address): bigint | undefined {
    return this.#payers.get(payer.toLowerCase());
  }

  /** The payer's balance at `block` (the index's head when asked): held, or read once and then kept current. */
  async balance(payer: Address, block: bigint): Promise<bigint> {
    const key = payer.toLowerCase();
    const held = this.#payers.get(key);
    if (held !== undefined && this.#head() === block) return held;
    let read = this.#reads.get(key);
    if (!read || read.block !== block) {
      const value = this.#client.readContract({ address: this.#token, abi: tokenAbi, functionName: "balanceOf", args: [payer], blockNumber: block });
      read = { block, value };
      const entry = read;
      const generation = this.#generation;
      this.#reads.set(key, entry);
      value.then(
        (balance) => {
          if (this.#reads.get(key) === entry) this.#reads.delete(key);
          if (generation === this.#generation) this.#keep(key, balance, block);
        },
        () => {
          if (this.#reads.get(key) === entry) this.#reads.delete(key);
        },
      );
    }
    return read.value;
  }

  /** Applies the transfers of block `number`, the next one after the head. */
  apply(number: bigint, transfers: IndexedTransfer[]): void {
    for (const transfer of transfers) this.#transfer(transfer);
    this.#recent.push({ number, transfers });
    if (this.#recent.length > RECENT_BLOCKS) this.#recent.shift();
  }

  /** The index went back to `common`, forgetting `removed` blocks: their transfers are undone (all of them known: else every balance is read again). */
  rewind(common: bigint, removed: number): void {
    this.#generation++;
    const undone = this.#recent.filter((block) => block.number > common);
    if (undone.length === removed) {
      for (const block of undone.reverse()) for (const transfer of [...block.transfers].reverse()) this.#untransfer(transfer);
    } else this.#payers.clear();
    this.#recent = this.#recent.filter((block) => block.number <= common);
    this.#reads.clear();
  }

  /** Forgets every balance (the index starts over). */
  clear(): void {
    this.#generation++;
    this.#payers.clear();
    this.#reads.clear();
    this.#recent = [];
  }

  #transfer({ from, to, value }: { from: Address; to: Address; value: bigint }, payers = this.#payers): void {
    const sender = from.toLowerCase();
    const receiver = to.toLowerCase();
    const fromBalance = payers.get(sender);
    if (fromBalance !== undefined) {
      // Less than it sent: not a balance this index can vouch for; read again when asked.
      if (fromBalance < value) payers.delete(sender);
      else payers.set(sender, fromBalance - value);
    }
    const toBalance = payers.get(receiver);
    if (toBalance !== undefined) payers.set(receiver, toBalance + value);
  }

  /** Undoes a transfer applied to the held balances (a block forgotten). */
  #untransfer({ from, to, value }: { from: Address; to: Address; value: bigint }): void {
    const sender = from.toLowerCase();
    const receiver = to.toLowerCase();
    const toBalance = this.#payers.get(receiver);
    if (toBalance !== undefined) {
      if (toBalance < value) this.#payers.delete(receiver);
      else this.#payers.set(receiver, toBalance - value);
    }
    const fromBalance = this.#payers.get(sender);
    if (fromBalance !== undefined) this.#payers.set(sender, fromBalance + value);
  }

  /** Keeps a balance read at `block`, brought up to the head with the recent blocks' transfers (if they reach back that far). */
  #keep(key: string, balance: bigint, block: bigint): void {
    if (this.#payers.has(key)) return;
    const head = this.#head();
    if (block < head) {
      const first = this.#recent[0]?.number;
      if (first === undefined || first > block + 1n) return;
      const single = new Map([[key, balance]]);
      for (const recent of this.#recent) {
        if (recent.number <= block) continue;
        for (const transfer of recent.transfers) this.#transfer(transfer, single);
      }
      const current = single.get(key);
      if (current === undefined) return;
      balance = current;
    } else if (block > head) return;
    if (this.#payers.size >= PAYER_LIMIT) this.#payers.delete(this.#payers.keys().next().value!);
    this.#payers.set(key, balance);
  }
}
