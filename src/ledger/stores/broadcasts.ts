import type { Address, Hex } from "viem";

/**
 * A transaction's known state. `signed`: recorded before its broadcast, acceptance unknown;
 * `accepted`: the node took it; `refused`: the node refused it outright (it never existed out there);
 * `mined` / `reverted`: its receipt; `dropped`: known to be gone (its nonce was used by another);
 * `replaced`: another version of it at the same relayer and nonce (re-priced) was mined instead.
 */
export type TransactionState = "signed" | "accepted" | "refused" | "mined" | "reverted" | "dropped" | "replaced";

/** One transaction broadcast (or about to be) for a settlement. Every one is kept. */
export interface BroadcastRecord {
  hash: Hex;
  relayer: Address;
  relayerNonce: number;
  /** The signed raw transaction: it can be broadcast again if the node forgets it. */
  raw: Hex;
  state: TransactionState;
  /** maxFeePerGas (EIP-1559) or gasPrice (legacy), in wei. */
  feeCap?: bigint;
  /** maxPriorityFeePerGas (EIP-1559), in wei. */
  priorityFee?: bigint;
  createdAt: number;
  updatedAt: number;
}

/** Parameters of {@link BroadcastStore.recordBroadcast}. */
export interface RecordBroadcastInput {
  id: number;
  /** The row's owner; the record is refused if the row changed hands. */
  owner: string;
  hash: Hex;
  relayer: Address;
  relayerNonce: number;
  raw: Hex;
  feeCap?: bigint;
  priorityFee?: bigint;
  /** When the reconciler may look at the row if its owner has not finished it (the owner follows it until then). */
  checkAfterMs: number;
  /**
   * The generation of the relayer key's lease it was signed under (`Lease.epoch`): when given, the
   * record is refused once the key changed hands since, even if it came back to the same instance.
   */
  leaseEpoch?: number;
}

/**
 * Parameters of {@link BroadcastStore.recordReplacement}: `relayer` and `relayerNonce` are those of the row's latest
 * transaction (a replacement takes the same nonce).
 */
export interface RecordReplacementInput extends Omit<RecordBroadcastInput, "owner" | "checkAfterMs"> {
  /** The instance that signs it: it must hold the lease of `relayer` (the key's single writer). */
  holder: string;
}

/**
 * Parameters of {@link BroadcastStore.recordFiller}: a gap filler, a zero-value self-transfer that takes a relayer
 * nonce which no settlement's transaction can use (nobody holds it, or its call can no longer succeed).
 */
export interface RecordFillerInput {
  chainId: number;
  /** The instance that signs it: it must hold the lease of `relayer`, of generation `leaseEpoch`. */
  holder: string;
  leaseEpoch: number;
  hash: Hex;
  raw: Hex;
  relayer: Address;
  relayerNonce: number;
  feeCap?: bigint;
  priorityFee?: bigint;
  /** The transaction it replaces at the nonce: a settlement's it supersedes, or an earlier version of the filler. */
  replaces?: Hex;
}

/** A gap filler as the ledger keeps it (written ahead of its broadcast, under the key's lease). */
export interface FillerRecord extends Omit<RecordFillerInput, "replaces"> {
  replaces?: Hex;
  /** `refused`: the node refused it, so it never existed out there. */
  state: "signed" | "refused";
  createdAt: number;
}

/**
 * The write-ahead of transactions: every signed transaction (a settlement's, its replacements, gap fillers)
 * is recorded under the relayer key's lease BEFORE it is broadcast, and what became of it after.
 */
export interface BroadcastStore {
  /**
   * Write-ahead: records a signed transaction BEFORE it is broadcast, moving the row to `sent`.
   * False (record nothing, broadcast nothing) when `owner` no longer owns the row, the row is final,
   * or `owner` does not hold the lease of `relayer` (of generation `leaseEpoch`, when given).
   */
  recordBroadcast(input: RecordBroadcastInput): Promise<boolean>;
  /**
   * Write-ahead for a new version of the row's latest transaction (re-priced, or re-signed) at the same
   * relayer and nonce, BEFORE it is broadcast; the row's `txHash` becomes it. False (record nothing,
   * broadcast nothing) when the row is final, its latest transaction is at another relayer or nonce, or
   * `holder` does not hold the relayer key's lease (of generation `leaseEpoch`, when given). Row ownership does not matter: whoever holds the
   * key keeps its transactions moving (after a restart, or a key taken over from another instance).
   */
  recordReplacement(input: RecordReplacementInput): Promise<boolean>;
  /**
   * Write-ahead for a gap filler (no settlement's transaction), BEFORE it is broadcast. False (record
   * nothing, broadcast nothing) unless `holder` holds the lease of `relayer` of generation `leaseEpoch`.
   */
  recordFiller(input: RecordFillerInput): Promise<boolean>;
  /** The node refused a recorded gap filler: it never existed out there. */
  markFillerRefused(hash: Hex): Promise<void>;
  /**
   * A key's recorded gap fillers at `fromNonce` (its mined transaction count) and above, not refused, by
   * nonce then age (at most `limit`): what its next holder follows.
   */
  pendingFillers(input: { chainId: number; relayer: Address; fromNonce: number; limit: number }): Promise<FillerRecord[]>;
  /** Updates what is known about one recorded transaction. */
  markTransaction(hash: Hex, state: TransactionState): Promise<void>;
}
