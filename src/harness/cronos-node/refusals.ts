import type { Address, Hex } from "viem";

/**
 * Why the node refused a send, one word per case of its admission (docs/cronos-node.md): the pool full,
 * the transaction in CometBFT's cache, under the minimum fee or the base fee, a nonce above the node's next
 * (a gap) or below it (used), a same-nonce transaction under the replacement rule or while replacement is
 * off, and a lagging backend's refusal of a correct nonce.
 */
export type RefusalKind =
  | "mempool-full"
  | "in-mempool"
  | "minimum-fee"
  | "base-fee"
  | "nonce-gap"
  | "nonce-used"
  | "replacement-rule"
  | "replacement-off"
  | "lagging-backend";

export const REFUSAL_KINDS: readonly RefusalKind[] = ["mempool-full", "in-mempool", "minimum-fee", "base-fee", "nonce-gap", "nonce-used", "replacement-rule", "replacement-off", "lagging-backend"];

/** One refusal as the node answered it: its kind and text, and the transaction it refused (when it could read one). */
export interface Refusal {
  kind: RefusalKind;
  /** The JSON-RPC error's message, as sent. */
  message: string;
  sender?: Address;
  nonce?: bigint;
  hash?: Hex;
}

/** What the node refused since it started: a count per kind, and the latest refusals (oldest first). */
export interface RefusalRecord {
  counts: Record<RefusalKind, number>;
  recent: Refusal[];
}

/** Refusals kept in {@link RefusalRecord.recent}: the latest ones. */
export const RECENT_REFUSALS = 500;

/** The node's record of its refusals: counts never forget, the list keeps the latest {@link RECENT_REFUSALS}. */
export class RefusalLog {
  readonly #counts = Object.fromEntries(REFUSAL_KINDS.map((kind) => [kind, 0])) as Record<RefusalKind, number>;
  readonly #recent: Refusal[] = [];

  add(refusal: Refusal): void {
    this.#counts[refusal.kind]++;
    this.#recent.push(refusal);
    if (this.#recent.length > RECENT_REFUSALS) this.#recent.shift();
  }

  /** A copy: what the node refused so far. */
  snapshot(): RefusalRecord {
    return { counts: { ...this.#counts }, recent: this.#recent.map((refusal) => ({ ...refusal })) };
  }
}
