/**
 * What a node's error means: the one table of every known refusal of `eth_sendRawTransaction` (Cronos EVM —
 * ethermint ante handler, cosmos-sdk and CometBFT mempools —, go-ethereum, Hardhat's EDR), and the texts of a
 * call or estimate that ran out of gas. The relayer's sends, its lifecycle, the settlement's re-broadcasts and
 * the reconciler read node errors only through here. Each row names where its text comes from; the test
 * (test/chain/node-errors.test.ts) holds a real text of each, verbatim, with its source.
 */

/** The least a refused fee must reach: per gas (a base fee or a minimum gas price), or for the whole gas limit (Cronos's minimum global fee). */
export interface FeeFloor {
  perGasWei?: bigint;
  /** A fee for the transaction's whole gas limit: divide by it for a price per gas. */
  totalWei?: bigint;
}

/**
 * A refusal: the node did not take the transaction, and says why.
 * - `known`: it holds this very transaction already (sent before, or still in its cache after mining);
 * - `nonceBehind`: the nonce is below the node's next one (`expected` when it says): the slot is used;
 * - `nonceAhead`: the nonce is above the node's next one: that node lacks the sender's earlier transactions
 *   (a Cronos node never queues a gap; a backend behind a load balancer may simply lag);
 * - `replacementRefused`: another transaction holds the nonce in the pool and this one does not out-bid it
 *   by the node's bump (or the node does not replace at all);
 * - `feeTooLow`: under the block's base fee or the chain's minimum gas price (`atLeast` when it says);
 * - `poolFull`: the pool (or the sender's share of it) is full: later, perhaps;
 * - `fundsLow`: the sender cannot pay gas × fee cap (+ value);
 * - `invalid`: never admissible as signed (intrinsic gas, over the block gas limit, tip above the fee cap, …).
 */
export type SendRefusal =
  | { kind: "known" }
  | { kind: "nonceBehind"; expected?: number }
  | { kind: "nonceAhead"; expected?: number }
  | { kind: "replacementRefused" }
  | { kind: "feeTooLow"; atLeast?: FeeFloor }
  | { kind: "poolFull" }
  | { kind: "fundsLow" }
  | { kind: "invalid" };

/** How a send's error reads: a refusal, or `unknown` (no answer, or an answer not in the table): it may have been sent. */
export type SendErrorClass = SendRefusal | { kind: "unknown" };

/** The nodes whose texts the table knows. */
export type NodeFamily = "cronos" | "geth" | "edr";

/** One row of the table: a text (a pattern over the node's message) and what it means. */
export interface RefusalRule {
  nodes: readonly NodeFamily[];
  /** Where the text is made (the node's source file, or the version it was read from). */
  source: string;
  text: RegExp;
  means(match: RegExpExecArray): SendRefusal;
}

const int = (text: string | undefined): number | undefined => (text === undefined ? undefined : Number(text));
// Cronos prints cosmos-sdk decimals ("2100000000000000.000000000000000000"): the whole part, rounded up.
const wei = (text: string): bigint => {
  const [whole, fraction = ""] = text.split(".");
  return BigInt(whole!) + (/[1-9]/.test(fraction) ? 1n : 0n);
};
/** `got` against the node's `expected`: behind (the slot is used) or ahead (the node lacks earlier ones). */
const nonceAgainst = (got: number, expected: number): SendRefusal => (got < expected ? { kind: "nonceBehind", expected } : { kind: "nonceAhead", expected });

/**
 * Every known refusal, first match wins (a more specific text before a more general one it contains).
 * Matching ignores case: nodes have changed the case of a text between versions.
 */
export const SEND_REFUSALS: readonly RefusalRule[] = [
  // --- the nonce ---
  {
    nodes: ["cronos"],
    source: "ethermint app/ante/eth.go CheckAndSetEthSenderNonce (ErrInvalidSequence)",
    text: /invalid nonce; got (\d+), expected (\d+)/i,
    means: (m) => nonceAgainst(Number(m[1]), Number(m[2])),
  },
  {
    nodes: ["edr"],
    source: "Hardhat EDR 0.22 (eth_sendRawTransaction)",
    text: /nonce too low\. expected nonce to be (?:at least )?(\d+) but got (\d+)/i,
    means: (m) => ({ kind: "nonceBehind", expected: Number(m[1]) }),
  },
  {
    nodes: ["edr"],
    source: "Hardhat EDR 0.22 (eth_sendRawTransaction, automining)",
    text: /nonce too high\. expected nonce to be (\d+) but got (\d+)/i,
    means: (m) => ({ kind: "nonceAhead", expected: Number(m[1]) }),
  },
  {
    nodes: ["geth"],
    source: "go-ethereum core/txpool/validation.go (core.ErrNonceTooLow)",
    text: /nonce too low(?:: next nonce (\d+))?/i,
    means: (m) => ({ kind: "nonceBehind", ...(m[1] !== undefined ? { expected: int(m[1])! } : {}) }),
  },
  {
    nodes: ["geth"],
    source: "go-ethereum core/txpool/validation.go (core.ErrNonceTooHigh)",
    text: /nonce too high(?:: tx nonce \d+, gapped nonce (\d+))?/i,
    means: (m) => ({ kind: "nonceAhead", ...(m[1] !== undefined ? { expected: int(m[1])! } : {}) }),
  },
  // --- the very same transaction ---
  { nodes: ["cronos"], source: "cosmos-sdk ErrTxInMempoolCache (CometBFT's tx cache)", text: /tx already in mempool/i, means: () => ({ kind: "known" }) },
  { nodes: ["geth"], source: "go-ethereum core/txpool/errors.go (ErrAlreadyKnown)", text: /already known/i, means: () => ({ kind: "known" }) },
  { nodes: ["edr", "geth"], source: "Hardhat EDR 0.22; go-ethereum before 1.9.3 core/tx_pool.go", text: /known transaction: 0x[0-9a-f]*|known transaction: [0-9a-f]{64}/i, means: () => ({ kind: "known" }) },
  // --- another transaction at the nonce ---
  {
    nodes: ["cronos"],
    source: "cosmos-sdk types/mempool/priority_nonce.go (Cronos app.go TxReplacement, mempool.feebump)",
    text: /tx doesn't fit the replacement rule/i,
    means: () => ({ kind: "replacementRefused" }),
  },
  { nodes: ["geth", "edr"], source: "go-ethereum core/txpool/errors.go (ErrReplaceUnderpriced); Hardhat EDR 0.22", text: /replacement transaction underpriced/i, means: () => ({ kind: "replacementRefused" }) },
  { nodes: ["geth"], source: "go-ethereum core/txpool/errors.go (ErrFutureReplacePending)", text: /future transaction tries to replace pending/i, means: () => ({ kind: "replacementRefused" }) },
  // --- the fee ---
  {
    nodes: ["cronos"],
    source: "ethermint app/ante/fees.go CheckEthMinGasPrice (ErrInsufficientFee)",
    text: /provided fee < minimum global fee \(([\d.]+) < ([\d.]+)\)/i,
    means: (m) => ({ kind: "feeTooLow", atLeast: { totalWei: wei(m[2]!) } }),
  },
  {
    nodes: ["cronos"],
    source: "ethermint app/ante/eth.go CheckEthCanTransfer (ErrInsufficientFee)",
    text: /max fee per gas less than block base fee \((\d+) < (\d+)\)/i,
    means: (m) => ({ kind: "feeTooLow", atLeast: { perGasWei: BigInt(m[2]!) } }),
  },
  {
    nodes: ["geth"],
    source: "go-ethereum core/state_transition.go (core.ErrFeeCapTooLow)",
    text: /max fee per gas less than block base fee(?:: address 0x[0-9a-f]+, maxFeePerGas: \d+,? baseFee: (\d+))?/i,
    means: (m) => ({ kind: "feeTooLow", ...(m[1] !== undefined ? { atLeast: { perGasWei: BigInt(m[1]) } } : {}) }),
  },
  { nodes: ["geth"], source: "go-ethereum 1.10.4 core/error.go (ErrFeeCapTooLow)", text: /fee cap less than (?:block )?base fee/i, means: () => ({ kind: "feeTooLow" }) },
  {
    nodes: ["edr"],
    source: "Hardhat EDR 0.22 (eth_sendRawTransaction, automining)",
    text: /transaction (?:maxFeePerGas|gasPrice) \((\d+)\) is too low for the next block, which has a baseFeePerGas of (\d+)/i,
    means: (m) => ({ kind: "feeTooLow", atLeast: { perGasWei: BigInt(m[2]!) } }),
  },
  {
    nodes: ["geth"],
    source: "go-ethereum core/txpool/validation.go (ErrTxGasPriceTooLow: the node's minimum tip)",
    text: /transaction gas price below minimum/i,
    means: () => ({ kind: "feeTooLow" }),
  },
  { nodes: ["geth"], source: "go-ethereum core/txpool/errors.go (ErrUnderpriced)", text: /transaction underpriced/i, means: () => ({ kind: "feeTooLow" }) },
  { nodes: ["cronos"], source: "ethermint app/ante/fee_checker.go (ErrInsufficientFee)", text: /insufficient (?:gas prices|fees); got: /i, means: () => ({ kind: "feeTooLow" }) },
  { nodes: ["cronos"], source: "cosmos-sdk ErrInsufficientFee (ethermint app/ante/fees.go MinGasPriceDecorator, cosmos transactions)", text: /: insufficient fee\b/i, means: () => ({ kind: "feeTooLow" }) },
  // --- the pool ---
  { nodes: ["cronos"], source: "CometBFT mempool ErrMempoolIsFull (cosmos-sdk ErrMempoolIsFull)", text: /mempool is full/i, means: () => ({ kind: "poolFull" }) },
  { nodes: ["geth"], source: "go-ethereum core/txpool/legacypool/legacypool.go (ErrTxPoolOverflow)", text: /txpool is full/i, means: () => ({ kind: "poolFull" }) },
  { nodes: ["geth"], source: "go-ethereum core/txpool/errors.go (ErrAccountLimitExceeded)", text: /account limit exceeded/i, means: () => ({ kind: "poolFull" }) },
  // --- the sender's funds ---
  { nodes: ["geth"], source: "go-ethereum core/error.go (ErrInsufficientFunds, ErrInsufficientFundsForTransfer)", text: /insufficient funds for (?:gas \* price \+ value|transfer)/i, means: () => ({ kind: "fundsLow" }) },
  { nodes: ["edr"], source: "Hardhat EDR 0.22", text: /sender doesn't have enough funds to send tx/i, means: () => ({ kind: "fundsLow" }) },
  { nodes: ["cronos"], source: "ethermint x/evm/keeper/utils.go CheckSenderBalance (ErrInsufficientFunds)", text: /sender balance < tx cost|: insufficient funds\b/i, means: () => ({ kind: "fundsLow" }) },
  // --- never admissible as signed ---
  { nodes: ["geth"], source: "go-ethereum core/error.go (ErrIntrinsicGas)", text: /intrinsic gas too low/i, means: () => ({ kind: "invalid" }) },
  { nodes: ["edr"], source: "Hardhat EDR 0.22", text: /transaction requires at least \d+ gas but got \d+/i, means: () => ({ kind: "invalid" }) },
  { nodes: ["cronos"], source: "ethermint x/evm/keeper/utils.go CheckEthGasConsume (ErrOutOfGas)", text: /gas limit too low: \d+ \(gas limit\) < \d+ \(intrinsic gas\)/i, means: () => ({ kind: "invalid" }) },
  { nodes: ["cronos"], source: "ethermint app/ante/eth.go CheckEthGasConsume (ErrOutOfGas)", text: /tx gas \(\d+\) exceeds block gas limit \(\d+\)/i, means: () => ({ kind: "invalid" }) },
  { nodes: ["geth"], source: "go-ethereum core/txpool/errors.go (ErrGasLimit); core/error.go (ErrGasLimitTooHigh)", text: /exceeds block gas limit|transaction gas limit too high/i, means: () => ({ kind: "invalid" }) },
  { nodes: ["edr"], source: "Hardhat EDR 0.22", text: /transaction gas limit is \d+ and exceeds (?:block gas limit|transaction gas cap) of \d+/i, means: () => ({ kind: "invalid" }) },
  { nodes: ["geth"], source: "go-ethereum core/error.go (ErrTipAboveFeeCap)", text: /max priority fee per gas higher than max fee per gas/i, means: () => ({ kind: "invalid" }) },
  {
    nodes: ["geth"],
    source: "go-ethereum core/txpool/errors.go, core/error.go (ErrOversizedData, ErrInvalidSender, ErrNegativeValue, ErrNonceMax, ErrTxTypeNotSupported)",
    text: /oversized data|invalid sender|negative value|nonce has max value|transaction type not supported/i,
    means: () => ({ kind: "invalid" }),
  },
  { nodes: ["cronos"], source: "ethermint rpc/backend/call_tx.go SendRawTransaction", text: /only replay-protected \(EIP-155\) transactions allowed over RPC/i, means: () => ({ kind: "invalid" }) },
];

/** A node's error as text: the message and the node's own words (viem's `details`) of each error in its cause chain. */
export function nodeErrorText(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && current !== null && depth < 8; depth++) {
    if (!(current instanceof Error)) {
      parts.push(String(current));
      break;
    }
    parts.push(current.message);
    const details = (current as { details?: unknown }).details;
    if (typeof details === "string") parts.push(details);
    current = current.cause;
  }
  return parts.join(" | ");
}

/** What a node's error to `eth_sendRawTransaction` means: the first row of {@link SEND_REFUSALS} it matches, else `unknown`. */
export function classifySendError(error: unknown): SendErrorClass {
  const text = nodeErrorText(error);
  for (const rule of SEND_REFUSALS) {
    const match = rule.text.exec(text);
    if (match) return rule.means(match);
  }
  return { kind: "unknown" };
}

/**
 * The least fee per gas a refused transaction of `gas` gas must offer, when the refusal says: a price per
 * gas as is, a fee for the whole gas limit divided by it (rounded up).
 */
export function leastFeePerGas(floor: FeeFloor | undefined, gas: bigint): bigint | undefined {
  if (floor?.perGasWei !== undefined) return floor.perGasWei;
  if (floor?.totalWei !== undefined && gas > 0n) return (floor.totalWei + gas - 1n) / gas;
  return undefined;
}

/**
 * A call or an estimate refused for the gas limit it was given: geth and Cronos "out of gas", "gas required
 * exceeds allowance (N)" (eth_estimateGas over its cap), Hardhat/EDR "Transaction ran out of gas".
 */
export const OUT_OF_GAS_TEXT = /out of gas|gas required exceeds|exceeds allowance/i;

/** A revert reason in a node's message, when it sent no revert data: Hardhat's form, then geth's and Cronos's. */
export const REVERT_REASON_TEXT = /reverted with reason string '([^']*)'|execution reverted: ([^\n"]+)/;
