import type { Address, Hex, PublicClient, TransactionReceipt } from "viem";
import { KitError } from "../../protocol/errors.js";
import type { FeeQuote } from "../fees.js";
import type { SendRefusal } from "../node-errors.js";

/** What a key's sends and its lifecycle work with: the chain, the fee cap and the shared quote, the replacement delay, where events go. */
export interface RelayerContext {
  client: PublicClient;
  chainId: number;
  /** Nothing is sent above this fee per gas (wei). */
  cap: bigint;
  /** Chain seconds a transaction may wait before it is replaced (or re-broadcast). */
  replaceAfter: bigint;
  /** What the network asks now (one quote shared for a polling interval); `fresh` reads it anew. */
  quote(fresh?: boolean): Promise<FeeQuote>;
  onEvent(event: RelayerEvent): void;
}

/** A transaction the relayer sends: the call is already simulated and its gas known. */
export interface RelayRequest {
  to: Address;
  data: Hex;
  gas: bigint;
}

/** A signed transaction about to be broadcast (for a write-ahead record). */
export interface SignedRelay {
  hash: Hex;
  /** The signed raw transaction: it can be broadcast again as it is. */
  raw: Hex;
  from: Address;
  nonce: number;
  /** maxFeePerGas, or gasPrice for a legacy transaction (wei). */
  feeCap: bigint;
  /** maxPriorityFeePerGas (wei); absent for a legacy transaction. */
  priorityFee?: bigint;
  /** The hash of the transaction this one replaces at the same nonce (a re-priced version). */
  replaces?: Hex;
  /** The generation of the key's lease it was signed under (absent for a key used without a lease): its write-ahead record names it. */
  epoch?: number;
}

/**
 * The lease under which this instance may send from a key, when several instances share the keys
 * through a ledger: one sender per key at a time. Given with {@link Relayer.adopt}, taken back with
 * {@link Relayer.revoke}.
 */
export interface KeyLease {
  /** The lease's generation: it grows each time the key changes hands, and each write-ahead record names it (the ledger's fence). */
  readonly epoch: number;
  /** Whether this instance may still send from the key now (its lease held, and not about to lapse): asked right before each broadcast. */
  valid(): boolean;
  /** The ledger's part in each broadcast of a gap filler (a self-transfer of no settlement): its own write-ahead record. */
  readonly fillers: RelayHooks;
}

/** Nothing was broadcast: the key is not (or no longer) leased to this instance, or its lease is about to lapse. */
export class KeyNotLeasedError extends KitError<"key_not_leased"> {
  override name = "KeyNotLeasedError";
  constructor(readonly address: Address) {
    super("key_not_leased", `relayer key ${address} is not leased to this instance now`);
  }
}

/** Hooks around each broadcast of a transaction: its first, and every replacement of it. */
export interface RelayHooks {
  /**
   * Called after signing and before the broadcast (e.g. to record the transaction first). When it
   * throws, nothing is broadcast: a first send rejects with a {@link RelaySendError} (`maybeSent`
   * false, the nonce stays free) whose cause is the hook's error; a replacement is not sent, and the
   * relayer stops following the transaction (it is no longer this process's to re-price).
   */
  beforeBroadcast?(tx: SignedRelay): Promise<void>;
  /** What the node said: it took the transaction (or had it), refused it outright, or did not answer. */
  afterBroadcast?(tx: SignedRelay, outcome: "accepted" | "refused" | "unknown"): void;
}

/** A transaction the relayer sent (or may have), followed until its nonce is mined. */
export interface SentTransaction {
  /** The first version's hash. */
  hash: Hex;
  from: Address;
  nonce: number;
  /** Every version broadcast at this nonce, oldest first: replacements add to it. */
  hashes(): readonly Hex[];
  /** True once a gap filler took this nonce (the call no longer succeeds): none of `hashes()` will be mined. */
  readonly superseded: boolean;
  /**
   * The receipt asked in the same batch as the send (one round trip), with the latest block: present when
   * the chain mined it at once (a local node); undefined otherwise, and never rejected.
   */
  readonly early?: Promise<EarlyReceipt | undefined>;
}

/** A receipt read right after the send, and the latest block read with it. */
export interface EarlyReceipt {
  receipt: TransactionReceipt;
  latest?: { number: bigint; timestamp: bigint };
}

/** A send that failed after the transaction may have reached the node: the caller must report `hash`. */
export class RelaySendError extends KitError<"relay_send_failed"> {
  override name = "RelaySendError";
  /** When it may have been sent: the transaction, which the relayer follows like any other. */
  readonly transaction?: SentTransaction;
  constructor(
    readonly hash: Hex,
    /** True when the node may hold the transaction (a transport failure, not a refusal). */
    readonly maybeSent: boolean,
    options: { cause: unknown; transaction?: SentTransaction },
  ) {
    super("relay_send_failed", `relayer could not send ${hash}`, { cause: options.cause });
    if (options.transaction) this.transaction = options.transaction;
  }
}

/** What the relayer did to keep a key's transactions moving (metrics and logs). */
export type RelayerEvent =
  /** Not mined within `replaceAfterSeconds`: sent again at the same nonce with higher fees. */
  | { kind: "replaced"; from: Address; nonce: number; hash: Hex; replaces: Hex; feeCapWei: bigint }
  /** The node no longer knows a transaction that is not mined (dropped from its pool, or the node restarted). */
  | { kind: "dropped"; from: Address; nonce: number; hash: Hex }
  /** A dropped transaction broadcast again as it was signed (the node took it anew). */
  | { kind: "rebroadcast"; from: Address; nonce: number; hash: Hex }
  /**
   * A node refused a broadcast (a first send, a replacement, a re-broadcast or a gap filler): `refusal` says
   * why ({@link SendRefusal}). Nothing of it is out there; the key's next nonce does not move for it.
   */
  | { kind: "refused"; from: Address; nonce: number; hash: Hex; refusal: SendRefusal["kind"] }
  /** The node expects another nonce than the key's local one (`expected`): the key sends from there on. */
  | { kind: "nonceAdopted"; from: Address; nonce: number; expected: number }
  /** A nonce of the key was mined by a transaction this relayer did not send there: none of `hash`'s versions can be mined now. */
  | { kind: "nonceTaken"; from: Address; nonce: number; hash: Hex }
  /** A nonce missing below transactions that wait on it, filled by the missing transaction or a zero-value self-transfer. */
  | { kind: "gapFilled"; from: Address; nonce: number; hash: Hex; by: "resend" | "selfTransfer" }
  /** A replacement withheld: the network needs more than the fee cap allows; the transaction keeps its price. */
  | { kind: "capped"; from: Address; nonce: number; hash: Hex; capWei: bigint; neededWei: bigint }
  /** A round of the lifecycle failed (an RPC fault); the next round tries again. */
  | { kind: "roundFailed"; from: Address; error: unknown };

/** A previously recorded transaction to follow (after a restart, or a key taken over from another instance). */
export interface AdoptedTransaction {
  /** Every signed version recorded at its nonce, oldest first: nonce, call and fees are read from them. */
  raws: readonly Hex[];
  /** The ledger's part in each further version's broadcast. */
  hooks: RelayHooks;
  /** A gap filler: it holds its nonce over any settlement's transaction recorded there (the one it superseded). */
  filler?: boolean;
}
