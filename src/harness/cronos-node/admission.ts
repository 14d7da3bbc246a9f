import { hexToBytes, keccak256, numberToHex, parseTransaction, serializeTransaction, type Address, type Hex, type TransactionSerializable } from "viem";
import { keccak256Bytes } from "../../chain/keccak.js";
import { recoverSigner } from "../../chain/signature.js";
import type { RequestProvider } from "../rpc-bridge.js";
import type { PoolRecord, SeenCache } from "./pool.js";
import {
  belowBaseFee,
  belowMinimumFee,
  invalidNonce,
  MEMPOOL_FULL,
  NODE_ERROR_CODE,
  PRIORITY_REDUCTION,
  replacementRefused,
  TX_IN_MEMPOOL,
} from "./texts.js";

/** What the node admits by: its replacement rule, its minimum gas price, replacement on or off. */
export interface AdmissionSettings {
  /** `mempool.feebump`, percent: a replacement needs priority ≥ old × (100 + feeBump) / 100. */
  feeBump: number;
  /** The chain's minimum gas price (wei); 0 = none. */
  minGasPrice: bigint;
  /** False: `cronos.disable-tx-replacement` (a same-nonce transaction gets the invalid-nonce answer). */
  replacement: boolean;
  /** CometBFT's `mempool.size`: transactions the pool holds before it answers `mempool is full`. */
  mempoolSize: number;
}

/** A backend behind the head this send may reach: `blocks` behind, and a refusal to spend. */
export interface LaggingBackend {
  blocks: number;
  /** Takes one refusal; false when none is left. */
  spend(): boolean;
}

/** A JSON-RPC error answer of the node (code -32000, as ethermint gives it), thrown by its provider. */
export function nodeError(message: string): Error & { code: number } {
  return Object.assign(new Error(message), { code: NODE_ERROR_CODE });
}

/** A signed transaction, read as the node's ante handler reads it. */
interface Incoming {
  raw: Hex;
  hash: Hex;
  sender: Address;
  nonce: bigint;
  gas: bigint;
  /** maxFeePerGas, or the gas price of a legacy or access-list transaction. */
  feeCap: bigint;
  tipCap: bigint;
  /** EIP-1559 fees (its fee is min(baseFee + tip, cap) × gas); false: a gas price. */
  dynamic: boolean;
}

/**
 * `eth_sendRawTransaction` as a Cronos node admits it, in front of EDR (which holds the pool and mines): one
 * send at a time (CheckTx is serial), checked in the node's order: pool full, CometBFT's cache (`tx already
 * in mempool`), the minimum global fee, the base fee, then the nonce against the node's check state (EDR's
 * pending nonce: with every gap refused, it is committed + admitted) or the replacement rule. EDR never sees
 * a gap, so it never queues one; a replacement Cronos accepts is put in EDR's pool in place of the old one.
 */
export class Admission {
  readonly #edr: RequestProvider;
  readonly #pool: PoolRecord;
  readonly #cache: SeenCache;
  readonly #settings: () => AdmissionSettings;
  readonly #lagging: () => LaggingBackend | undefined;
  #tail: Promise<unknown> = Promise.resolve();
  #waiting = 0;

  constructor(edr: RequestProvider, pool: PoolRecord, cache: SeenCache, settings: () => AdmissionSettings, lagging: () => LaggingBackend | undefined) {
    this.#edr = edr;
    this.#pool = pool;
    this.#cache = cache;
    this.#settings = settings;
    this.#lagging = lagging;
  }

  /** Admits `raw` (answering its hash, as EDR does) or throws the node's refusal. */
  send(raw: unknown): Promise<unknown> {
    // A flood is bounded: no more sends wait their turn than the pool could take.
    if (this.#waiting >= this.#settings().mempoolSize) return Promise.reject(nodeError(MEMPOOL_FULL));
    this.#waiting++;
    const run = this.#tail.then(() => this.#admit(raw));
    this.#tail = run.catch(() => undefined).finally(() => this.#waiting--);
    return run;
  }

  async #admit(raw: unknown): Promise<unknown> {
    const tx = await read(raw);
    // Not a signed transaction the node can read: EDR answers it (its decoding or signature error).
    if (!tx) return this.#edr.request({ method: "eth_sendRawTransaction", params: [raw] });
    const settings = this.#settings();
    if (this.#pool.size >= settings.mempoolSize) {
      await this.#pool.pending((sender) => this.#count(sender, "latest"));
      if (this.#pool.size >= settings.mempoolSize) throw nodeError(MEMPOOL_FULL);
    }
    if (this.#cache.has(tx.hash)) throw nodeError(TX_IN_MEMPOOL);
    const latest = (await this.#edr.request({ method: "eth_getBlockByNumber", params: ["latest", false] })) as { number: Hex; baseFeePerGas?: Hex | null };
    const chainBaseFee = latest.baseFeePerGas ? BigInt(latest.baseFeePerGas) : 0n;
    // Cronos' fee market never lets the base fee under the minimum gas price: nor does this chain's next block.
    if (settings.minGasPrice > chainBaseFee) await this.#edr.request({ method: "hardhat_setNextBlockBaseFeePerGas", params: [numberToHex(settings.minGasPrice)] });
    const baseFee = chainBaseFee > settings.minGasPrice ? chainBaseFee : settings.minGasPrice;
    if (settings.minGasPrice > 0n) {
      const price = tx.dynamic ? least(baseFee + tx.tipCap, tx.feeCap) : tx.feeCap;
      const [fee, required] = [price * tx.gas, settings.minGasPrice * tx.gas];
      if (fee < required) throw nodeError(belowMinimumFee(fee, required));
    }
    if (tx.feeCap < baseFee) throw nodeError(belowBaseFee(tx.feeCap, baseFee));
    const [committed, next] = await Promise.all([this.#count(tx.sender, "latest"), this.#count(tx.sender, "pending")]);
    const priority = priorityOf(tx, baseFee);
    if (tx.nonce === next) {
      await this.#refuseIfLagging(tx, BigInt(latest.number));
      return this.#insert(tx, priority);
    }
    const old = tx.nonce >= committed && tx.nonce < next && settings.replacement ? this.#pool.at(tx.sender, tx.nonce) : undefined;
    if (old) {
      const threshold = ((100n + BigInt(settings.feeBump)) * old.priority) / 100n;
      if (priority < threshold) throw nodeError(replacementRefused(old.priority, priority, old.hash, tx.hash));
      // EDR's own rule (+10 % on every fee) must not stand in for Cronos': the old one leaves its pool first.
      await this.#edr.request({ method: "hardhat_dropTransaction", params: [old.hash] });
      try {
        const hash = await this.#insert(tx, priority);
        this.#pool.remove(old.hash);
        return hash;
      } catch (error) {
        await this.#edr.request({ method: "eth_sendRawTransaction", params: [old.raw] }).catch(() => undefined);
        throw error;
      }
    }
    throw nodeError(invalidNonce(tx.nonce, next));
  }

  /**
   * A lagging backend's check state is its state `blocks` back (it has not seen what the others admitted):
   * a correct nonce is refused there when that state is behind the sender's, spending one refusal.
   */
  async #refuseIfLagging(tx: Incoming, head: bigint): Promise<void> {
    const lagging = this.#lagging();
    if (!lagging) return;
    const height = head > BigInt(lagging.blocks) ? head - BigInt(lagging.blocks) : 0n;
    const behind = await this.#count(tx.sender, numberToHex(height));
    if (behind < tx.nonce && lagging.spend()) throw nodeError(invalidNonce(tx.nonce, behind));
  }

  async #insert(tx: Incoming, priority: bigint): Promise<unknown> {
    const hash = await this.#edr.request({ method: "eth_sendRawTransaction", params: [tx.raw] });
    this.#pool.add({ hash: tx.hash, sender: tx.sender, nonce: tx.nonce, priority, raw: tx.raw });
    this.#cache.add(tx.hash);
    return hash;
  }

  async #count(sender: Address, tag: string): Promise<bigint> {
    return BigInt((await this.#edr.request({ method: "eth_getTransactionCount", params: [sender, tag] })) as Hex);
  }
}

/** A transaction's priority at `baseFee`: its effective tip (min(tip, cap − base), or gas price − base) / 10^6. */
export function priorityOf(tx: { feeCap: bigint; tipCap: bigint; dynamic: boolean }, baseFee: bigint): bigint {
  const tip = tx.dynamic ? least(tx.tipCap, tx.feeCap - baseFee) : tx.feeCap - baseFee;
  return tip / PRIORITY_REDUCTION;
}

/** The signed transaction in `raw` with its sender; undefined when it is not one (EDR then answers it). */
async function read(raw: unknown): Promise<Incoming | undefined> {
  if (typeof raw !== "string" || !/^0x(?:[0-9a-fA-F]{2})+$/.test(raw)) return undefined;
  try {
    const { r, s, v, yParity, ...unsigned } = parseTransaction(raw as Hex);
    if (r === undefined || s === undefined) return undefined;
    // The signing hash is the unsigned transaction's (EIP-155's for a legacy one with a chain id), recovered
    // with the native secp256k1 (viem's JS recovery costs ~8 ms, and sends are admitted one at a time).
    const parity = yParity ?? (v === 27n || v === 28n ? Number(v - 27n) : v === undefined ? undefined : Number((v - 35n) % 2n));
    if (parity !== 0 && parity !== 1) return undefined;
    const digest = keccak256Bytes(hexToBytes(serializeTransaction(unsigned as TransactionSerializable)));
    const signer = recoverSigner(digest, `0x${r.slice(2).padStart(64, "0")}${s.slice(2).padStart(64, "0")}${(27 + parity).toString(16)}`);
    if (!signer) return undefined;
    const dynamic = unsigned.maxFeePerGas !== undefined;
    const feeCap = (dynamic ? unsigned.maxFeePerGas : unsigned.gasPrice) ?? 0n;
    const tipCap = (dynamic ? unsigned.maxPriorityFeePerGas : unsigned.gasPrice) ?? 0n;
    return { raw: raw as Hex, hash: keccak256(raw as Hex), sender: signer.toLowerCase() as Address, nonce: BigInt(unsigned.nonce ?? 0), gas: unsigned.gas ?? 0n, feeCap, tipCap, dynamic };
  } catch {
    return undefined;
  }
}

function least(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}
