import { numberToHex, type Hex } from "viem";
import type { RequestProvider } from "../rpc-bridge.js";
import { Admission, type AdmissionSettings, type LaggingBackend } from "./admission.js";
import { PoolRecord, SeenCache } from "./pool.js";
import { isPending, pendingCount, readLogs, transactionByHash, withLatest } from "./reads.js";
import { DEFAULT_FEE_BUMP, MAX_FEE_BUMP, MEMPOOL_SIZE } from "./texts.js";

/** Options of {@link CronosNode}. */
export interface CronosNodeOptions {
  /** The replacement rule's `mempool.feebump`, percent (0 to 1000); default {@link DEFAULT_FEE_BUMP}. */
  feeBump?: number;
  /** The chain's minimum gas price in wei; default 0 (none). */
  minGasPrice?: bigint;
  /** CometBFT's `mempool.size`: transactions the pool holds (1 to 5000); default {@link MEMPOOL_SIZE}. */
  mempoolSize?: number;
}

/** What a fault holds the node to while it is in force. */
export interface NodeHold {
  /** A minimum gas price (wei) at least this high. */
  minGasPrice?: bigint;
  /** Replacement turned off (`cronos.disable-tx-replacement`). */
  replacement?: false;
  /** The endpoint reaches a backend `blocks` behind: its log reads end there, and `refusals` correct sends are refused. */
  lag?: { blocks: number; refusals: number };
}

/**
 * A Cronos v1.7 node in front of EDR: what the local chain's JSON-RPC (HTTP and WebSocket) and the stack's
 * facilitator link answer. EDR keeps the pool and mines; this decides admission (strict nonces, the
 * replacement rule, the minimum fee, `tx already in mempool`) and answers the reads the node answers its
 * own way (block tags, `eth_getLogs`, the `pending` views). Everything else reaches EDR unchanged. Faults
 * hold it to other settings ({@link hold}) or empty its pool ({@link losePool}).
 */
export class CronosNode implements RequestProvider {
  readonly #edr: RequestProvider;
  readonly #pool = new PoolRecord();
  readonly #cache = new SeenCache();
  readonly #admission: Admission;
  readonly #base: AdmissionSettings;
  readonly #holds = new Map<string, NodeHold & { refusalsLeft: number }>();
  readonly on?: RequestProvider["on"];
  readonly removeListener?: RequestProvider["removeListener"];

  /** @param edr - EDR's provider (or what stands for it); its subscription events pass through. */
  constructor(edr: RequestProvider, options: CronosNodeOptions = {}) {
    const feeBump = options.feeBump ?? DEFAULT_FEE_BUMP;
    if (!Number.isInteger(feeBump) || feeBump < 0 || feeBump > MAX_FEE_BUMP) throw new RangeError(`feeBump must be a whole percentage from 0 to ${MAX_FEE_BUMP}, got ${feeBump}`);
    const minGasPrice = options.minGasPrice ?? 0n;
    if (minGasPrice < 0n) throw new RangeError("minGasPrice must not be negative");
    const mempoolSize = options.mempoolSize ?? MEMPOOL_SIZE;
    if (!Number.isInteger(mempoolSize) || mempoolSize < 1 || mempoolSize > MEMPOOL_SIZE) throw new RangeError(`mempoolSize must be a whole number from 1 to ${MEMPOOL_SIZE}, got ${mempoolSize}`);
    this.#edr = edr;
    this.#base = { feeBump, minGasPrice, replacement: true, mempoolSize };
    this.#admission = new Admission(edr, this.#pool, this.#cache, () => this.settings, () => this.#lagging());
    if (edr.on && edr.removeListener) {
      this.on = (event, listener) => edr.on!(event, listener);
      this.removeListener = (event, listener) => edr.removeListener!(event, listener);
    }
  }

  /** What the node admits by now: its own settings, under the faults in force. */
  get settings(): AdmissionSettings {
    let { minGasPrice, replacement } = this.#base;
    for (const hold of this.#holds.values()) {
      if (hold.minGasPrice !== undefined && hold.minGasPrice > minGasPrice) minGasPrice = hold.minGasPrice;
      if (hold.replacement === false) replacement = false;
    }
    return { ...this.#base, minGasPrice, replacement };
  }

  /** Blocks the endpoint's log reads are behind the head (the deepest lag in force); 0 when none is. */
  get lagBlocks(): number {
    let blocks = 0;
    for (const hold of this.#holds.values()) if (hold.lag && hold.lag.blocks > blocks) blocks = hold.lag.blocks;
    return blocks;
  }

  async request(args: { method: string; params?: unknown }): Promise<unknown> {
    const params = args.params ?? [];
    const list = Array.isArray(params) ? params : [];
    switch (args.method) {
      case "eth_sendRawTransaction":
        return this.#admission.send(list[0]);
      case "eth_getLogs":
        return readLogs(this.#edr, params, this.lagBlocks);
      case "eth_getTransactionCount":
        if (isPending(list[1])) return pendingCount(this.#edr, this.#pool, list[0]);
        break;
      case "eth_getTransactionByHash":
        return transactionByHash(this.#edr, this.#pool, params);
      case "eth_gasPrice": {
        // The node suggests no less than the chain's minimum gas price.
        const price = BigInt((await this.#edr.request({ method: "eth_gasPrice", params: [] })) as Hex);
        const floor = this.settings.minGasPrice;
        return numberToHex(price > floor ? price : floor);
      }
      case "hardhat_dropTransaction": {
        const dropped = await this.#edr.request({ method: args.method, params });
        if (dropped === true && typeof list[0] === "string") this.#pool.remove(list[0].toLowerCase() as Hex);
        return dropped;
      }
      case "evm_revert":
      case "hardhat_reset": {
        // The chain went back (or anew): what the node knew of its pool is no longer true.
        const result = await this.#edr.request({ method: args.method, params });
        this.#forgetPool();
        return result;
      }
    }
    return this.#edr.request({ method: args.method, params: withLatest(args.method, params) });
  }

  /** Holds the node to `hold` until {@link release}d with the same `id`. */
  hold(id: string, hold: NodeHold): void {
    this.#holds.set(id, { ...hold, refusalsLeft: hold.lag?.refusals ?? 0 });
  }

  /** Ends the hold `id`; false when there was none. */
  release(id: string): boolean {
    return this.#holds.delete(id);
  }

  /** The correct sends the lag `id` still refuses. */
  refusalsLeft(id: string): number | undefined {
    const hold = this.#holds.get(id);
    return hold?.lag ? hold.refusalsLeft : undefined;
  }

  /**
   * The node loses its pool, as a restart does: every pending transaction dropped from EDR's pool, CometBFT's
   * cache emptied. Resolves to the hashes dropped.
   */
  async losePool(): Promise<Hex[]> {
    const pending = (await this.#edr.request({ method: "eth_pendingTransactions", params: [] })) as Array<{ hash: Hex }>;
    for (const { hash } of pending) await this.#edr.request({ method: "hardhat_dropTransaction", params: [hash] });
    this.#forgetPool();
    return pending.map(({ hash }) => hash);
  }

  #forgetPool(): void {
    this.#pool.clear();
    this.#cache.clear();
  }

  #lagging(): LaggingBackend | undefined {
    const blocks = this.lagBlocks;
    if (blocks === 0) return undefined;
    return {
      blocks,
      spend: () => {
        for (const hold of this.#holds.values()) {
          if (hold.lag && hold.refusalsLeft > 0) {
            hold.refusalsLeft--;
            return true;
          }
        }
        return false;
      },
    };
  }
}
