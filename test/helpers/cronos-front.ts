import { keccak256, parseTransaction, recoverTransactionAddress, type Hex } from "viem";
import type { FaultProxy, JsonRpcError, JsonRpcRequest } from "./rpc-proxy.js";

// Helpers only: importing this file runs nothing.

/**
 * A Cronos EVM node's admission of `eth_sendRawTransaction` (v1.7: ethermint's ante handler, the cosmos-sdk
 * priority mempool, CometBFT's cache), put in front of a local EDR chain by a {@link FaultProxy}: strict nonces
 * (a gap is refused, never queued), the replacement rule by priority (effective tip) with a fee bump, or no
 * replacement at all, `tx already in mempool` for a transaction it holds or mined, the minimum gas price, and
 * the node's texts for EDR's own refusals. Faults a real endpoint has: a load-balanced backend that lags (it
 * refuses a correct nonce, expecting the one before), a node that loses its pool.
 *
 * A test helper of the relayer's tests: the same scenarios can be pointed at the harness's Cronos mode, which
 * answers this way on its own (src/harness), by giving them that chain's RPC URL instead of this front.
 */
export interface CronosFront {
  /**
   * The next `count` transactions sent at a correct nonce (above the sender's first) are each refused once (with
   * `every`: each try of them, until `count` refusals), as a backend that has not seen the one before would:
   * `invalid nonce; got N, expected N-1`; 0 stops it.
   */
  lag(count: number, options?: { every?: boolean }): void;
  /** `mempool.feebump` in percent (default 10); `false`: replacement disabled (`cronos.disable-tx-replacement`). */
  replacement(bump: number | false): void;
  /** The chain's minimum gas price (feemarket `min_gas_price`), in wei; undefined: none. */
  minGasPriceWei: bigint | undefined;
  /** The node loses its pool (a restart): every pending transaction is gone. Returns how many there were. */
  losePool(): Promise<number>;
  /** Every refusal the front answered, in order (its text). */
  readonly refusals: string[];
}

const SEQUENCE = ": invalid sequence: invalid sequence";

/** Installs Cronos's admission in front of the chain behind `proxy` (on every `eth_sendRawTransaction` through it). */
export function cronosFront(proxy: FaultProxy): CronosFront {
  let lagging = 0;
  let lagEvery = false;
  /** The sends a lagging backend refused already (sender and nonce): each is refused once. */
  const lagged = new Set<string>();
  let bump: number | false = 10;
  const refusals: string[] = [];
  const refuse = (message: string): JsonRpcError => {
    refusals.push(message);
    return { code: -32000, message };
  };
  const count = async (from: Hex, tag: "latest" | "pending") => Number(BigInt(await proxy.chain.call<Hex>("eth_getTransactionCount", [from, tag])));
  const front: CronosFront = {
    lag(times, options = {}) {
      lagging = times;
      lagEvery = options.every ?? false;
    },
    replacement(value) {
      bump = value;
    },
    minGasPriceWei: undefined,
    async losePool() {
      const pending = await proxy.chain.pending();
      for (const hash of pending) await proxy.chain.dropTransaction(hash);
      return pending.length;
    },
    refusals,
  };

  // What this node admitted, by sender and nonce (its check state counts them, priced out of the next block or not).
  const admitted = new Map<string, Map<number, Hex>>();
  const inPool = async (raw: Hex) => {
    const found = await proxy.chain.call<{ blockNumber: Hex | null } | null>("eth_getTransactionByHash", [keccak256(raw)]);
    return found !== null && found.blockNumber === null;
  };
  /** The node's next nonce for `from`: past its mined ones, its pending ones, and every one it admitted still in its pool. */
  const nextNonce = async (from: Hex, latest: number): Promise<{ next: number; pooled?: Hex }[]> => {
    const ours = admitted.get(from.toLowerCase()) ?? new Map<number, Hex>();
    const held: { next: number; pooled?: Hex }[] = [];
    for (const [nonce, raw] of ours) if (nonce >= latest && (await inPool(raw))) held.push({ next: nonce + 1, pooled: raw });
    return held;
  };

  const admit = async (request: JsonRpcRequest): Promise<JsonRpcError | undefined> => {
    const raw = (request.params as [Hex])[0];
    const tx = parseTransaction(raw);
    const from = await recoverTransactionAddress({ serializedTransaction: raw as never });
    const nonce = tx.nonce ?? 0;
    const [known, latest, pendingCount, head] = await Promise.all([
      proxy.chain.call<unknown>("eth_getTransactionByHash", [keccak256(raw)]),
      count(from, "latest"),
      count(from, "pending"),
      proxy.chain.call<{ baseFeePerGas?: Hex }>("eth_getBlockByNumber", ["latest", false]),
    ]);
    // CometBFT's cache: the very same transaction, in the pool or mined.
    if (known) return refuse("tx already in mempool");
    const held = await nextNonce(from, latest);
    const pending = Math.max(pendingCount, ...held.map((h) => h.next));
    const invalidNonce = (expected: number) => refuse(`invalid nonce; got ${nonce}, expected ${expected}${SEQUENCE}`);
    if (lagging > 0 && nonce === pending && nonce > 0 && (lagEvery || !lagged.has(`${from.toLowerCase()}:${nonce}`))) {
      lagging--;
      lagged.add(`${from.toLowerCase()}:${nonce}`);
      return invalidNonce(nonce - 1);
    }
    if (nonce > pending || nonce < latest) return invalidNonce(pending);
    // The check state's base fee: the latest block's.
    const base = head.baseFeePerGas === undefined ? 0n : BigInt(head.baseFeePerGas);
    if (nonce < pending) {
      // A pool slot held: a replacement, weighed by priority (the tip, in units of 10^6 wei).
      if (bump === false) return invalidNonce(pending);
      const old = held.find((h) => h.next === nonce + 1)?.pooled;
      const parsed = old ? parseTransaction(old) : undefined;
      const oldPriority = parsed ? (parsed.maxPriorityFeePerGas ?? parsed.gasPrice ?? 0n) / 1_000_000n : 0n;
      const newPriority = (tx.maxPriorityFeePerGas ?? tx.gasPrice ?? 0n) / 1_000_000n;
      if (newPriority < (oldPriority * BigInt(100 + bump)) / 100n) {
        return refuse(`tx doesn't fit the replacement rule, oldPriority: ${oldPriority}, newPriority: ${newPriority}, oldTx: &{${old ? "pooled" : "?"}}, newTx: &{new}: unknown`);
      }
    }
    const feeCap = tx.maxFeePerGas ?? tx.gasPrice ?? 0n;
    if (tx.maxFeePerGas !== undefined && feeCap < base) return refuse(`max fee per gas less than block base fee (${feeCap} < ${base}): insufficient fee`);
    const min = front.minGasPriceWei;
    const effective = tx.maxFeePerGas !== undefined ? (feeCap < base + (tx.maxPriorityFeePerGas ?? 0n) ? feeCap : base + (tx.maxPriorityFeePerGas ?? 0n)) : feeCap;
    if (min !== undefined && effective < min) {
      const gas = tx.gas ?? 0n;
      return refuse(
        `provided fee < minimum global fee (${effective * gas}.000000000000000000 < ${min * gas}.000000000000000000). Please increase the priority tip (for EIP-1559 txs) or the gas prices (for access list or legacy txs): insufficient fee`,
      );
    }
    // Admitted: the check state counts it from now on (a replacement takes its predecessor's place).
    if (!admitted.has(from.toLowerCase())) admitted.set(from.toLowerCase(), new Map());
    admitted.get(from.toLowerCase())!.set(nonce, raw);
    return undefined;
  };
  proxy.fail({ kind: "rpcError", method: "eth_sendRawTransaction", error: admit });
  // EDR's own refusals of what passed the front, in Cronos's words.
  proxy.rewrite((request, answer) => {
    if (request.method !== "eth_sendRawTransaction") return undefined;
    if (!answer.error) return undefined;
    // Refused by the chain behind after all: the check state does not count it.
    const raw = (request.params as [Hex])[0];
    for (const byNonce of admitted.values()) for (const [nonce, held] of byNonce) if (held === raw) byNonce.delete(nonce);
    const text = answer.error.message;
    const low = /nonce too (?:low|high)\. expected nonce to be (?:at least )?(\d+) but got (\d+)/i.exec(text);
    if (low) return { error: refuse(`invalid nonce; got ${low[2]}, expected ${low[1]}${SEQUENCE}`) };
    if (/known transaction/i.test(text)) return { error: refuse("tx already in mempool") };
    if (/replacement transaction underpriced/i.test(text)) return { error: refuse("tx doesn't fit the replacement rule, oldPriority: ?, newPriority: ?, oldTx: &{pooled}, newTx: &{new}: unknown") };
    return undefined;
  });
  return front;
}
