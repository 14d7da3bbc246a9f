import type { Address, Hex } from "viem";
import type { TokenScope } from "./scope.js";

/** Who a revert penalty falls on: a payer (`code`: a wallet code hash, written by earlier versions only). */
export interface PenaltySubject {
  kind: "payer" | "code";
  /** Lower-case address, or code hash. */
  subject: string;
}

/**
 * The penalty subject of a payer: its address, and nothing else. A penalty keyed by a wallet's code hash
 * would let anyone who deploys a wallet of the same code, and makes it revert once, lock out every other
 * wallet with that code; the relayer's exposure is bounded per payer instead (docs/operations.md). Rows of
 * kind `code` written by earlier versions are kept but no longer asked for.
 */
export function penaltySubject(payer: Address): PenaltySubject {
  return { kind: "payer", subject: payer.toLowerCase() };
}

/**
 * A revert penalty: settles from `subject` are refused until `until`, in the chain's time (Unix
 * seconds of its blocks), so instances need not agree on a wall clock.
 */
export interface Penalty extends PenaltySubject, TokenScope {
  until: bigint;
  txHash?: Hex;
}

/** Revert penalties: a payer whose settle reverted is refused for a while (in chain time). */
export interface PenaltyStore {
  /** Records a penalty (a later `until` wins over an earlier one). */
  penalize(penalty: Penalty): Promise<void>;
  /** The penalty among `subjects` that lasts longest past `now` (chain time), if any. */
  activePenalty(scope: TokenScope, subjects: readonly PenaltySubject[], now: bigint): Promise<Penalty | undefined>;
}
