// How a Cronos EVM node (v1.7.x: Ethermint ante handler, CometBFT mempool, ethermint JSON-RPC) answers, as
// plain facts: its refusal texts, its caps and its defaults. Sources (read from the node's own code and
// integration tests): ethermint `app/ante/eth.go` (CheckAndSetEthSenderNonce, the fee decorators), cronos
// `app/app.go` (TxReplacement) and `integration_tests/test_mempool.py`, cosmos-sdk `types/mempool/
// priority_nonce.go` and `types/errors` (ErrTxInMempoolCache), CometBFT `mempool` (its cache and
// `UnconfirmedTxs` page), ethermint `rpc/namespaces/ethereum/eth/filters/filters.go` (the log caps) and
// `rpc/types/block.go` (block tags). docs/cronos-node.md names each beside what it says.

/** JSON-RPC error code of every refusal of `eth_sendRawTransaction` and of the log caps (ethermint answers -32000). */
export const NODE_ERROR_CODE = -32000;

/**
 * A nonce other than the node's next one (its check state: committed plus admitted to its pool). The ante
 * handler answers `invalid nonce; got N, expected E: invalid sequence`; the JSON-RPC layer wraps the ABCI
 * log in its registered error again, so the wire carries `: invalid sequence` twice.
 */
export function invalidNonce(got: bigint, expected: bigint): string {
  return `invalid nonce; got ${got}, expected ${expected}: invalid sequence: invalid sequence`;
}

/** The identical transaction in the pool, or still in CometBFT's cache after it was mined (cosmos-sdk ErrTxInMempoolCache). */
export const TX_IN_MEMPOOL = "tx already in mempool";

/** The pool holds its maximum number of transactions (CometBFT `mempool.size`). */
export const MEMPOOL_FULL = "mempool is full";

/**
 * A same-nonce transaction whose priority is under the replacement rule (cosmos-sdk's priority-nonce
 * mempool). The node prints its own dump of each transaction after `oldTx:` and `newTx:`; this chain
 * prints their hashes.
 */
export function replacementRefused(oldPriority: bigint, newPriority: bigint, oldTx: string, newTx: string): string {
  return `tx doesn't fit the replacement rule, oldPriority: ${oldPriority}, newPriority: ${newPriority}, oldTx: ${oldTx}, newTx: ${newTx}`;
}

/** The fee (effective gas price × gas limit) under the chain's minimum gas price × gas limit (ethermint's global minimum). */
export function belowMinimumFee(fee: bigint, required: bigint): string {
  return `provided fee < minimum global fee (${fee} < ${required}). Please increase the priority tip (for EIP-1559 txs) or the gas prices (for access list or legacy txs): insufficient fee`;
}

/** The fee cap (or a legacy gas price) under the block's base fee. */
export function belowBaseFee(feeCap: bigint, baseFee: bigint): string {
  return `max fee per gas less than block base fee (${feeCap} < ${baseFee}): insufficient fee`;
}

/** `eth_getLogs` over a [from, to] distance above the cap (ethermint `block-range-cap`). */
export function logRangeTooWide(cap: number): string {
  return `maximum [from, to] blocks distance: ${cap}`;
}

/** `eth_getLogs` matching more logs than the cap (ethermint `logs-cap`). */
export function tooManyLogs(cap: number): string {
  return `query returned more than ${cap} results`;
}

/** ethermint's `block-range-cap`: the largest `to - from` of an `eth_getLogs` range. */
export const LOG_BLOCK_RANGE_CAP = 10_000;
/** ethermint's `logs-cap`: the most logs one `eth_getLogs` answers. */
export const LOG_RESULTS_CAP = 10_000;

/** CometBFT's `UnconfirmedTxs` default page: what `pending` counts and where a pending transaction is looked up. */
export const PENDING_VIEW = 30;
/** CometBFT's `mempool.size` default: transactions a node's pool holds. */
export const MEMPOOL_SIZE = 5_000;
/** CometBFT's `mempool.cache_size` default: hashes it remembers, mined ones included. */
export const MEMPOOL_CACHE_SIZE = 10_000;

/** ethermint's priority reduction: a transaction's priority is its effective tip divided by this. */
export const PRIORITY_REDUCTION = 1_000_000n;

/**
 * The replacement rule's `mempool.feebump` (percent) the local chain starts with. The node's config template
 * sets none (0 unless an operator sets it); the node's own tests use 10, the stricter rule, taken here.
 */
export const DEFAULT_FEE_BUMP = 10;
/** The largest fee bump the local chain takes, in percent. */
export const MAX_FEE_BUMP = 1_000;

/** Block tags the node reads as `latest` (ethermint `rpc/types/block.go`): it has no pending block and instant finality. */
export const LATEST_ALIASES: ReadonlySet<string> = new Set(["pending", "safe", "finalized"]);
