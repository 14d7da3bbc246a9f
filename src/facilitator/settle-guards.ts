import type { Address, Hex } from "viem";

/**
 * What settle checks before it lets the relayer pay for a transaction that a simulation cannot
 * vouch for: that the payer's settles in flight do not promise more than its balance, and that the
 * payer (or its wallet's code) has not just made a settlement revert on chain.
 *
 * The in-memory implementation serves one instance. Several instances share one through this
 * interface (the settlement ledger): every method is async, reservations are keyed by chain id +
 * token + payer, penalties by chain id + token + subject, and times are the chain's (unix seconds of
 * its blocks), so instances need not agree on a wall clock.
 */
export interface SettleGuards {
  /**
   * Reserves `reservation.amount` of the payer's balance for a settle about to be sent. False, and
   * nothing reserved, when the payer's reservations that the balance does not yet reflect plus this
   * amount exceed `reservation.balance`.
   */
  reserve(account: PayerAccount, reservation: Reservation): Promise<boolean>;
  /**
   * Ends a reservation. `spentAt`: the block that mined the transfer; the reservation keeps counting
   * against balances read at earlier blocks (until it lapses). Omitted: nothing was spent (not sent,
   * or reverted). A settle whose outcome is unknown (no receipt by the deadline) does not release: its
   * reservation lapses after its `ttlMs`.
   */
  release(account: PayerAccount, id: Hex, spentAt?: bigint): Promise<void>;
  /** Whether any of `subjects` is under a revert penalty at chain time `now`. */
  penalized(scope: TokenScope, subjects: readonly PenaltySubject[], now: bigint): Promise<boolean>;
  /** Puts `subjects` under a revert penalty until chain time `until` (a later penalty extends an earlier one). */
  penalize(scope: TokenScope, subjects: readonly PenaltySubject[], until: bigint): Promise<void>;
}

/** One token on one chain. */
export interface TokenScope {
  chainId: number;
  token: Address;
}

/** The account a settlement spends from. */
export interface PayerAccount extends TokenScope {
  payer: Address;
}

/** A settle's claim on the payer's balance. */
export interface Reservation {
  /** The authorization's nonce: one reservation per authorization (reserving it again replaces it). */
  id: Hex;
  amount: bigint;
  /** The payer's balance, and the block it was read at (settle's fresh head). */
  balance: bigint;
  block: bigint;
  /** A reservation never ended (a crashed instance, an unknown outcome) lapses after this long. */
  ttlMs: number;
}

/** Who answers for a reverted settlement: the payer, and for a contract wallet every wallet with the same code. */
export type PenaltySubject = { kind: "payer"; address: Address } | { kind: "code"; hash: Hex };

/** The penalty subjects of a payer: its address, and its code hash when it is a contract wallet. */
export function penaltySubjects(payer: Address, codeHash: Hex | undefined): PenaltySubject[] {
  return codeHash ? [{ kind: "payer", address: payer }, { kind: "code", hash: codeHash }] : [{ kind: "payer", address: payer }];
}

interface Held {
  amount: bigint;
  expiresAt: number;
  spentAt?: bigint;
}

/** The guards of a single facilitator process. `now` (ms) is injectable for tests of lapsing. */
export class MemorySettleGuards implements SettleGuards {
  /** How long a spent reservation keeps counting against balances read before its block. */
  static readonly SPENT_RETENTION_MS = 60_000;
  readonly #reservations = new Map<string, Map<string, Held>>();
  readonly #penalties = new Map<string, bigint>();
  readonly #now: () => number;
  #sweepAt = 0;

  constructor(options: { now?: () => number } = {}) {
    this.#now = options.now ?? Date.now;
  }

  async reserve(account: PayerAccount, reservation: Reservation): Promise<boolean> {
    const key = accountKey(account);
    const now = this.#now();
    this.#sweep(now);
    const held = this.#reservations.get(key) ?? new Map<string, Held>();
    const id = reservation.id.toLowerCase();
    let committed = 0n;
    for (const [other, entry] of held) {
      if (entry.expiresAt <= now) held.delete(other);
      // Spent at or before the block the balance was read at: the balance already shows it.
      else if (other !== id && (entry.spentAt === undefined || entry.spentAt > reservation.block)) committed += entry.amount;
    }
    if (committed + reservation.amount > reservation.balance) {
      if (held.size === 0) this.#reservations.delete(key);
      return false;
    }
    held.set(id, { amount: reservation.amount, expiresAt: now + reservation.ttlMs });
    this.#reservations.set(key, held);
    return true;
  }

  async release(account: PayerAccount, id: Hex, spentAt?: bigint): Promise<void> {
    const key = accountKey(account);
    const held = this.#reservations.get(key);
    const entry = held?.get(id.toLowerCase());
    if (!held || !entry) return;
    if (spentAt === undefined) held.delete(id.toLowerCase());
    else {
      // Only balances read before `spentAt` need it, and those are read moments before: keep it briefly.
      entry.spentAt = spentAt;
      entry.expiresAt = Math.min(entry.expiresAt, this.#now() + MemorySettleGuards.SPENT_RETENTION_MS);
    }
    if (held.size === 0) this.#reservations.delete(key);
  }

  /** Drops lapsed reservations and penalties of every account, at most once a minute. */
  #sweep(now: number): void {
    if (now < this.#sweepAt) return;
    this.#sweepAt = now + 60_000;
    for (const [key, held] of this.#reservations) {
      for (const [id, entry] of held) if (entry.expiresAt <= now) held.delete(id);
      if (held.size === 0) this.#reservations.delete(key);
    }
  }

  async penalized(scope: TokenScope, subjects: readonly PenaltySubject[], now: bigint): Promise<boolean> {
    let found = false;
    for (const subject of subjects) {
      const key = penaltyKey(scope, subject);
      const until = this.#penalties.get(key);
      if (until === undefined) continue;
      if (until > now) found = true;
      else this.#penalties.delete(key);
    }
    return found;
  }

  async penalize(scope: TokenScope, subjects: readonly PenaltySubject[], until: bigint): Promise<void> {
    for (const subject of subjects) {
      const key = penaltyKey(scope, subject);
      const current = this.#penalties.get(key);
      if (current === undefined || current < until) this.#penalties.set(key, until);
    }
  }
}

function accountKey(account: PayerAccount): string {
  return `${account.chainId}:${account.token}:${account.payer}`.toLowerCase();
}

function penaltyKey(scope: TokenScope, subject: PenaltySubject): string {
  return `${scope.chainId}:${scope.token}:${subject.kind}:${subject.kind === "payer" ? subject.address : subject.hash}`.toLowerCase();
}
