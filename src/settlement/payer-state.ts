// What verify reads about a payer, fewest reads first: from the token state index's memory, the index, or the chain, all at one head.
import { bytesToHex, type Address, type Hex } from "viem";
import type { Head } from "../chain/cached-reads.js";
import type { PayerPayload } from "../protocol/payment.js";
import type { IndexedPayer } from "../state/index.js";
import type { NetworkRuntime } from "./runtime.js";
import { refuse, type RefusedPayment } from "./verify-outcome.js";

/** What verify reads from the chain about a payer, all at `head`. */
export interface PayerState {
  head: Head;
  codeHash: Hex | undefined;
  used: boolean;
  balance: bigint;
}

/**
 * Reads what the signature check and the state checks need, fewest reads first. `signedByPayer`
 * (the ECDSA signature recovers to `from`): code, nonce state and balance at one head. Otherwise only a
 * contract wallet can still accept the signature: the payer's code first (no code answers after that
 * one read), then the wallet's ERC-1271 answer at the head, then the state.
 */
export async function readPayerState(
  runtime: NetworkRuntime,
  authorization: PayerPayload["authorization"],
  digestBytes: Uint8Array,
  signedByPayer: boolean,
  options: ReadOptions,
): Promise<PayerState | RefusedPayment> {
  const { state } = runtime;
  const { from, nonce, signature } = authorization;
  const digest = bytesToHex(digestBytes);
  const invalid = (head?: Head) => refuse("signature", undefined, head ? { head } : {});
  if (signedByPayer) {
    // Settle's fresh reads go in one round trip with the head; verify's come from the index, or share a recent head and its cache.
    const { head, codeHash, used, balance } = options.fresh ? await state.latestPayerState(from, nonce) : await payerAtHead(runtime, from, nonce, options);
    // An EIP-7702 account has code: the token asks it through ERC-1271 as well.
    if (codeHash !== undefined && !(await state.isValidErc1271(from, digest, signature, head, options.erc1271GasLimit))) return invalid(head);
    return { head, codeHash, used, balance };
  }
  const codeHash = await state.codeHash(from);
  if (codeHash === undefined) return invalid();
  const indexed = options.fresh ? undefined : await indexedPayer(runtime, from, nonce, options);
  const head = indexed?.head ?? (await state.head(options.headAgeMs));
  if (!(await state.isValidErc1271(from, digest, signature, head, options.erc1271GasLimit))) return invalid(head);
  if (indexed) return { head, codeHash, used: await usedAt(runtime, indexed, from, nonce), balance: indexed.balance };
  const [used, balance] = await Promise.all([state.authorizationUsed(from, nonce, head), state.balanceOf(from, head)]);
  return { head, codeHash, used, balance };
}

/**
 * The payer's state from memory alone, for a payer whose ECDSA signature recovered and that has no code:
 * the index's answer (head, balance, nonce) and the payer's code read at that head already. Undefined when
 * any of it would need a read ({@link readPayerState} then reads it); the same state that would give.
 */
export function payerInMemory(runtime: NetworkRuntime, authorization: PayerPayload["authorization"], options: ReadOptions): PayerState | undefined {
  const { from, nonce } = authorization;
  const indexed = runtime.index?.payerInMemory(from, nonce, options.headAgeMs);
  // null: the code is not known at that head; a hash: a wallet (or EIP-7702 account) that ERC-1271 asks.
  if (!indexed || runtime.state.knownCodeHash(from, indexed.head) !== undefined) return undefined;
  options.source?.(runtime.config.network, "index");
  return { head: indexed.head, codeHash: undefined, used: indexed.used, balance: indexed.balance };
}

/** How verify reads the chain. */
export interface ReadOptions {
  /** A head confirmed (read) at most this long ago will do. */
  headAgeMs: number;
  erc1271GasLimit: bigint;
  /** Settle: everything read afresh at the latest block, never from the index or a cache. */
  fresh?: boolean;
  /** Told where the state came from (metrics). */
  source?: (network: string, source: "index" | "chain") => void;
}

/**
 * The payer's code, nonce state and balance at one head, for a payer whose ECDSA signature recovered:
 * from the token state index when it vouches for a head confirmed within `headAgeMs` (the code, cached per
 * block, and a nonce whose state the index has not proven are read at that head), else read at a head read
 * from the chain (`authorizationState`, `balanceOf`): an index that cannot prove its blocks (a node that
 * answered logs it did not show it holds) does not vouch.
 */
async function payerAtHead(runtime: NetworkRuntime, from: Address, nonce: Hex, options: ReadOptions): Promise<PayerState> {
  const { state } = runtime;
  const indexed = await indexedPayer(runtime, from, nonce, options);
  if (indexed) {
    const [codeHash, used] = await Promise.all([state.codeHash(from, indexed.head), usedAt(runtime, indexed, from, nonce)]);
    return { head: indexed.head, codeHash, used, balance: indexed.balance };
  }
  const head = await state.head(options.headAgeMs);
  const [codeHash, used, balance] = await Promise.all([state.codeHash(from, head), state.authorizationUsed(from, nonce, head), state.balanceOf(from, head)]);
  return { head, codeHash, used, balance };
}

/** What the token state index holds of the payer, when it can vouch for it (undefined: read the chain). */
async function indexedPayer(runtime: NetworkRuntime, from: Address, nonce: Hex, options: ReadOptions): Promise<IndexedPayer | undefined> {
  const indexed = runtime.index ? await runtime.index.payer(from, nonce, options.headAgeMs) : undefined;
  options.source?.(runtime.config.network, indexed ? "index" : "chain");
  return indexed;
}

/**
 * Whether the nonce is spent at the index's head: the index's answer when it proved it, else the chain's
 * (`authorizationState` at that head). The index says "unused" only once every block up to its head was read with
 * proof that the node held it; a log read cut short (a backend behind, a pruned node) leaves `used` undefined, never
 * false.
 */
async function usedAt(runtime: NetworkRuntime, indexed: IndexedPayer, from: Address, nonce: Hex): Promise<boolean> {
  if (indexed.used !== undefined) return indexed.used;
  const used = await runtime.state.authorizationUsed(from, nonce, indexed.head);
  if (used) runtime.index?.rememberUsed(from, nonce);
  return used;
}
