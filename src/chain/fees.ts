import { formatGwei, type PublicClient } from "viem";
import { KitError } from "../protocol/errors.js";

/** A transaction's fees: EIP-1559, or a legacy gas price. */
export type Fees = { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | { gasPrice: bigint };

/**
 * What the network asks now: the latest block's base fee and the node's suggested tip (EIP-1559), or a gas price;
 * `at` is that block's timestamp when the quote was read from the chain (the chain's clock at quoting). `room`:
 * the latest block used at most half its gas limit (the EIP-1559 target): the base fee is not rising, and every
 * transaction whose fee cap covers it gets into the next block, tip or not.
 */
export type FeeQuote = ({ baseFeePerGas: bigint; maxPriorityFeePerGas: bigint; room?: boolean } | { gasPrice: bigint }) & { at?: bigint };

/** What a replacement must offer over the transaction it replaces, on every fee: +12.5 % (nodes ask +10 %). */
export const REPLACEMENT_BUMP = { numerator: 1125n, denominator: 1000n } as const;

// The base fee may rise 12.5 % per full block: 20 % headroom is one and a half full blocks. The headroom
// costs nothing by itself (a node charges min(base fee + tip, fee cap) per gas, Cronos included), but the
// sender must hold gas limit × fee cap to be admitted.
const BASE_FEE_HEADROOM = { numerator: 12n, denominator: 10n } as const;

/** The network needs more per gas than `MAX_FEE_PER_GAS_GWEI` allows: nothing is sent. */
export class FeeCapError extends KitError<"fee_cap_exceeded"> {
  override name = "FeeCapError";
  constructor(
    /** Base fee plus tip (or the gas price) the network asks now, in wei. */
    readonly neededWei: bigint,
    readonly capWei: bigint,
  ) {
    super("fee_cap_exceeded", `the network asks ${formatGwei(neededWei)} gwei per gas, above MAX_FEE_PER_GAS_GWEI (${formatGwei(capWei)} gwei)`, {
      docsPath: "docs/operations.md#a-settlement-is-never-stranded-stuck-dropped-and-gapped-transactions",
    });
  }
}

/** The most one unit of gas may cost under `fees`: maxFeePerGas, or the gas price. */
export function feeCap(fees: Fees): bigint {
  return "gasPrice" in fees ? fees.gasPrice : fees.maxFeePerGas;
}

/** What a transaction must offer per gas to be mined now: base fee plus tip, or the gas price. */
export function neededFee(quote: FeeQuote): bigint {
  return "gasPrice" in quote ? quote.gasPrice : quote.baseFeePerGas + quote.maxPriorityFeePerGas;
}

/** Reads what the network asks now (the latest block's base fee and the node's suggested tip, or the gas price). */
export async function readFeeQuote(client: PublicClient): Promise<FeeQuote> {
  // Both at once: one round trip to a remote RPC (the transport batches them), not two.
  const [block, maxPriorityFeePerGas] = await Promise.all([
    client.getBlock({ blockTag: "latest" }),
    client.estimateMaxPriorityFeePerGas().catch(() => 0n),
  ]);
  if (block.baseFeePerGas === null || block.baseFeePerGas === undefined) return { gasPrice: await client.getGasPrice(), at: block.timestamp };
  return { baseFeePerGas: block.baseFeePerGas, maxPriorityFeePerGas, room: block.gasUsed * 2n <= block.gasLimit, at: block.timestamp };
}

/**
 * A quote to decide the fees of a new transaction by: `quote()` (shared for a polling interval), read anew
 * when it asks more than `capWei`. A refusal over the cap is then always from what the network asks now,
 * never from a quote of a moment the fees have since come down from.
 */
export async function quoteForCap(quote: (fresh?: boolean) => Promise<FeeQuote>, capWei: bigint): Promise<FeeQuote> {
  const shared = await quote();
  return neededFee(shared) > capWei ? quote(true) : shared;
}

/**
 * The fees of a new transaction: a fee cap of 1.2 × the base fee plus the node's suggested tip (or the gas
 * price), never above `capWei`. Throws {@link FeeCapError} when the network needs more than the cap.
 *
 * The tip itself is none while the latest block had room ({@link FeeQuote} `room`), else the node's suggestion;
 * the fee cap keeps the suggestion's room either way, so it covers what the network asks (base fee plus the
 * suggested tip) as a tipped one would, and the lifecycle's view of it (a price the network takes) is the same. A tip
 * only orders transactions within a block, and buys a place only in a full one; a node charges it on top of
 * the base fee (min(base fee + tip, fee cap) per gas), and a Cronos node suggests base fee ÷ 8 (its largest
 * base fee rise in one block): 11 % of what a settle pays, for nothing while blocks have room. Admission does
 * not need it (Cronos weighs min(base fee + tip, fee cap) against its minimum gas price, and its base fee never
 * falls under that minimum; a refusal names what is missing and the tip is raised to it). A transaction still
 * waiting after `REPLACE_AFTER_SECONDS` is replaced with the node's suggested tip ({@link replacementFees}).
 */
export function initialFees(quote: FeeQuote, capWei: bigint): Fees {
  const needed = neededFee(quote);
  if (needed > capWei) throw new FeeCapError(needed, capWei);
  if ("gasPrice" in quote) return { gasPrice: quote.gasPrice };
  const wanted = scale(quote.baseFeePerGas, BASE_FEE_HEADROOM) + quote.maxPriorityFeePerGas;
  const maxFeePerGas = wanted < capWei ? wanted : capWei;
  const tip = quote.room ? 0n : quote.maxPriorityFeePerGas;
  return { maxFeePerGas, maxPriorityFeePerGas: min(tip, maxFeePerGas) };
}

/**
 * The fees of a replacement of a transaction sent with `previous`, now that the network asks `quote`:
 * every fee at least +12.5 % over the previous one, and at least what a new transaction would get.
 * Undefined when the network needs more than `capWei`, or the least replacement would be above it:
 * nothing is sent above the cap, and the transaction keeps its last price.
 */
export function replacementFees(previous: Fees, quote: FeeQuote, capWei: bigint): Fees | undefined {
  if (neededFee(quote) > capWei) return undefined;
  if ("gasPrice" in previous || "gasPrice" in quote) {
    const least = scale(feeCap(previous), REPLACEMENT_BUMP);
    if (least > capWei) return undefined;
    return { gasPrice: min(max(least, neededFee(quote)), capWei) };
  }
  const leastFee = scale(previous.maxFeePerGas, REPLACEMENT_BUMP);
  const leastTip = scale(previous.maxPriorityFeePerGas, REPLACEMENT_BUMP);
  if (leastFee > capWei || leastTip > capWei) return undefined;
  const wanted = scale(quote.baseFeePerGas, BASE_FEE_HEADROOM) + quote.maxPriorityFeePerGas;
  const maxFeePerGas = min(max(leastFee, wanted), capWei);
  const maxPriorityFeePerGas = min(max(leastTip, quote.maxPriorityFeePerGas), maxFeePerGas);
  return { maxFeePerGas, maxPriorityFeePerGas };
}

/**
 * The fees of a transaction the node refused as under-priced (`feeTooLow`), signed again at the same nonce.
 * `least`, when the refusal named it, is what its effective price per gas (min(fee cap, base fee + tip), or
 * the gas price) must reach: a base fee (the fee cap rises to it, with the usual headroom) or the chain's
 * minimum gas price (Cronos weighs min(fee cap, base fee + tip) against it: the tip rises to make it up).
 * Unnamed, both fees rise by 12.5 %. Never above `capWei`: throws {@link FeeCapError} when the price the node
 * would take is above it (nothing is sent).
 */
export function feesAtLeast(previous: Fees, quote: FeeQuote, least: bigint | undefined, capWei: bigint): Fees {
  const base = "baseFeePerGas" in quote ? quote.baseFeePerGas : 0n;
  if ("gasPrice" in previous) {
    const gasPrice = least !== undefined && least > previous.gasPrice ? least : scale(previous.gasPrice, REPLACEMENT_BUMP);
    if (gasPrice > capWei) throw new FeeCapError(gasPrice, capWei);
    return { gasPrice };
  }
  const effective = min(previous.maxFeePerGas, base + previous.maxPriorityFeePerGas);
  // Named but already met (a quote older than the node's block): no progress without a bump.
  const named = least !== undefined && least > effective ? least : undefined;
  const target = named ?? scale(effective, REPLACEMENT_BUMP);
  if (target > capWei) throw new FeeCapError(target, capWei);
  const tip = named === undefined ? scale(previous.maxPriorityFeePerGas, REPLACEMENT_BUMP) : max(previous.maxPriorityFeePerGas, named > base ? named - base : 0n);
  const maxFeePerGas = min(capWei, max(max(previous.maxFeePerGas, target), scale(base, BASE_FEE_HEADROOM) + tip));
  return { maxFeePerGas, maxPriorityFeePerGas: min(tip, maxFeePerGas) };
}

/**
 * The default fee cap never goes below this: 10,000 gwei per gas, Cronos mainnet's minimum gas price in 2024
 * (the kit's default cap before it followed the chain). A chain that asks little (a local one) keeps it.
 */
export const DEFAULT_FEE_CAP_FLOOR_WEI = 10_000_000_000_000n;

/** The default fee cap is this many times what the chain asks at start-up (the base fee doubles in six full blocks). */
export const DEFAULT_FEE_CAP_MULTIPLE = 2n;

/** What a chain asks per gas at the least now: the latest block's base fee (none before London), and `eth_gasPrice`. */
export interface ChainFees {
  baseFeeWei: bigint | undefined;
  /** On Cronos: base fee plus the node's suggested tip, never below the chain's minimum gas price. */
  gasPriceWei: bigint;
}

/** Reads {@link ChainFees} (both in one round trip). */
export async function readChainFees(client: PublicClient): Promise<ChainFees> {
  const [block, gasPriceWei] = await Promise.all([client.getBlock({ blockTag: "latest" }), client.getGasPrice()]);
  return { baseFeeWei: block.baseFeePerGas ?? undefined, gasPriceWei };
}

/**
 * The least a transaction must offer per gas to be admitted now: the latest base fee (on Cronos it never falls
 * below the minimum gas price: feemarket keeps it there), or the gas price on a chain without a base fee.
 */
export function chainMinimum(fees: ChainFees): bigint {
  return fees.baseFeeWei ?? fees.gasPriceWei;
}

/**
 * The fee cap when `MAX_FEE_PER_GAS_GWEI` is unset: twice what the chain asks at start-up (the higher of its
 * base fee and its gas price), never below {@link DEFAULT_FEE_CAP_FLOOR_WEI}. Mainnet in 2024 (base fee ≈ 10,019
 * gwei, `eth_gasPrice` a little more) gets about 22,500 gwei: the old fixed default (10,000 gwei) sat under
 * its base fee, and every settle would have answered 503.
 */
export function defaultFeeCap(fees: ChainFees): bigint {
  const asked = max(fees.baseFeeWei ?? 0n, fees.gasPriceWei);
  return max(DEFAULT_FEE_CAP_FLOOR_WEI, asked * DEFAULT_FEE_CAP_MULTIPLE);
}

/** `value × ratio`, rounded up (a fee rounded down could miss the node's replacement threshold). */
function scale(value: bigint, ratio: { numerator: bigint; denominator: bigint }): bigint {
  return (value * ratio.numerator + ratio.denominator - 1n) / ratio.denominator;
}

function max(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}

function min(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}
