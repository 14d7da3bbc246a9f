import type { Address, Hex, PublicClient } from "viem";
import type { AdoptedTransaction, KeyLease, RelayHooks, RelayRequest, SentTransaction } from "../chain/relayer/index.js";
import type { ClaimInput, Ledger, SettlementCall, SettlementRecord } from "../ledger/types.js";
import type { SettleErrorCode } from "../protocol/reasons.js";
import type { SettlementChain } from "./chain.js";
import { decideRow, type Applied } from "./apply-decision.js";
import type { RowCheckDeps } from "./reconcile-row.js";
import { paidTransferOf, type PaidTransfer } from "./decision.js";
import type { SettlementLogger } from "./logger.js";
import type { LedgerOutbox } from "./outbox.js";

export type { SettlementLogger } from "./logger.js";

/** What the settlement service needs of a relayer (the kit's {@link Relayer} is one). */
export interface RelayerPort {
  /** The key to send the next transaction from, among `among` (the keys this instance holds the lease of). */
  pick(among?: readonly Address[]): Address | undefined;
  /**
   * Sends and follows the transaction until its nonce is mined (replaced when stuck, re-broadcast when dropped);
   * a send the node refuses for now is tried again until `deadline` (`performance.now()` time).
   */
  send(request: RelayRequest, from: Address, hooks?: RelayHooks, deadline?: number): Promise<SentTransaction>;
  /** Follows recorded transactions of a key this instance just took (a restart, a key taken over), under its lease, before its next send. */
  adopt(address: Address, load: () => Promise<readonly AdoptedTransaction[]>, lease?: KeyLease): Promise<void>;
  /**
   * Stops sending from a key whose lease this instance lost (or gave up), at once; its transactions in
   * flight stay in the ledger's records for the key's next holder. Returns how many it was following.
   */
  revoke(address: Address): number;
}

/** One network as the settlement service sends on it. */
export interface SettlementNetwork {
  chainId: number;
  /** Canonical network name (metrics, logs). */
  name: string;
  client: PublicClient;
  relayer: RelayerPort;
  /** The chain reads of the payment decision and of a row's check (the reconciler's too). */
  chain: SettlementChain;
}

/** Which relayer keys this instance may send from now (the lease keeper). */
export interface KeyHolder {
  held(): Address[];
  /** Whether this instance may send from `address` now (under its lease of generation `epoch`, when given). */
  holds(address: Address, epoch?: number): boolean;
}

/** What became of a settle, for its answer. */
export type SettlementResult =
  /** Paid (by this settle's transaction, a copy of it, or the key holder it handed the send to): `transfer` as the paying receipt tells it. */
  | { kind: "settled"; record: SettlementRecord; transfer: PaidTransfer }
  /**
   * Another settle owns (or finished) the authorization: `Authorization already used`. `record` is that
   * settle's row: its transaction is named only once confirmed as this very payment's (the caller's part).
   */
  | { kind: "alreadyUsed"; record: SettlementRecord }
  /** `payment.failed` with `code` (and the hash of ours when it was sent; never another transaction's). */
  | { kind: "failed"; code: SettleErrorCode; txHash?: Hex }
  /** The payer's settles in flight already commit its balance. */
  | { kind: "overBalance" }
  /** Nothing was sent, and nothing will be: a fault (503). */
  | { kind: "notSent"; reason: string }
  /**
   * The chain cannot tell yet whether the payment was made (a read failed, or the authorization is used
   * and no log of it was found): a fault, 503, no verdict. The row stays sent for the reconciler, and a
   * retry gets its outcome. `txHash`: ours.
   */
  | { kind: "undecided"; reason: string; txHash?: Hex }
  /**
   * Ours was sent and is not mined by the settle's deadline, and nothing else used the authorization: it
   * may still be mined (the reconciler follows the row; the status lookup tells the outcome). `txHash`: ours.
   */
  | { kind: "pending"; txHash?: Hex };

/** Parameters of {@link SettlementService.settle}. */
export type SettleClaim = Omit<ClaimInput, "owner" | "ownerTtlMs" | "deadlineMs" | "call">;

/** The simulated call, or the settle error that refuses it before anything is sent. */
export type Simulation = { call: SettlementCall } | { refusal: SettleErrorCode };

/**
 * What each step of a settlement takes (claim, send, follow, hand-over): this instance's ledger, outbox
 * and settings. Built once by the {@link SettlementService}; every step is a function of it.
 */
export interface SettlementSteps extends RowCheckDeps {
  ledger: Ledger;
  instanceId: string;
  /** Outcomes answered while the ledger was unreachable, written when it is back. */
  outbox: LedgerOutbox;
  logger: SettlementLogger;
  confirmations: number;
  pollingIntervalMs: number;
  /** After this, the reconciler also looks at a sent row its owner is following. */
  reconcileAfterMs: number;
  /** A payer whose payment failed by its own doing is refused this long, in chain seconds; 0 = never. */
  revertPenaltySeconds: number;
  /** Told of a ledger call that failed (the database may be down): the outage watch. */
  onLedgerFault?: (error: unknown) => void;
  observe?: {
    confirmationWait?(network: string, seconds: number): void;
    revertedGas?(network: string, gas: bigint): void;
    rpcError?(network: string): void;
  };
}

/**
 * The answer a row gives a settle waiting on it: its outcome once final; still claimed or sent (at the
 * settle's deadline), what the payment decision makes of it now over the row's transactions: paid,
 * failed, undecided (503), or, unused, `pending` (ours may still be mined; the reconciler follows it).
 */
export async function answerOfRow(steps: SettlementSteps, network: SettlementNetwork, record: SettlementRecord): Promise<SettlementResult> {
  if (record.status === "settled") return { kind: "settled", record, transfer: paidTransferOf(record) };
  if (record.status === "failed") {
    if (record.errorCode === "notSent") return { kind: "notSent", reason: "the settlement was given up before anything was sent" };
    const code = record.errorCode ?? "failedOnChain";
    // Spent by something else: the row's hash is ours, which did not pay; the answer names none.
    const named = record.txHash && code !== "alreadyUsed" ? { txHash: record.txHash } : {};
    return { kind: "failed", code, ...named };
  }
  const applied = await decideRow(steps, network.chain, record, { ours: record.transactions.map((tx) => tx.hash) });
  if (applied.outcome === "settled" || applied.outcome === "failed") return decidedAnswer(applied);
  if (applied.outcome === "undecided") return { kind: "undecided", reason: applied.reason, ...(record.txHash ? { txHash: record.txHash } : {}) };
  // The hash lets the caller trace it (the status lookup tells the rest).
  return { kind: "pending", ...(record.txHash ? { txHash: record.txHash } : {}) };
}

/**
 * A settle's answer for a row the decision settled or failed: a failure names our reverted transaction;
 * spent by something else, none (ours did not pay, and the other is not this payment).
 */
export function decidedAnswer(applied: Extract<Applied, { outcome: "settled" | "failed" }>): SettlementResult {
  if (applied.outcome === "settled") return { kind: "settled", record: applied.record, transfer: applied.transfer };
  return { kind: "failed", code: applied.code, ...(applied.cause === "reverted" && applied.txHash ? { txHash: applied.txHash } : {}) };
}
