import { keccak256, parseTransaction, type Address, type Hex, type LocalAccount, type PublicClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { Fees } from "../fees.js";
import type { EarlyReceipt, KeyLease, RelayHooks, RelayRequest, SentTransaction, SignedRelay } from "./types.js";

/** One transaction of a key between its broadcast and its nonce being mined. */
export class InFlight implements SentTransaction {
  readonly versions: SignedRelay[];
  /** Chain time (block timestamp) of the latest broadcast; set by the first lifecycle round after it. */
  sentAt: bigint | undefined;
  superseded = false;
  early?: Promise<EarlyReceipt | undefined>;

  constructor(
    readonly nonce: number,
    /** What to sign again for a replacement; a self-transfer for a gap filler. */
    readonly request: RelayRequest & { value?: bigint },
    first: SignedRelay,
    public fees: Fees,
    readonly hooks: RelayHooks,
    /** A zero-value self-transfer that fills a nonce (never checked for validity, never recorded). */
    readonly filler = false,
  ) {
    this.versions = [first];
  }

  get hash(): Hex {
    return this.versions[0]!.hash;
  }

  get from(): Address {
    return this.versions[0]!.from;
  }

  get latest(): SignedRelay {
    return this.versions.at(-1)!;
  }

  hashes(): readonly Hex[] {
    return this.versions.map((v) => v.hash);
  }
}

/** One relayer key: sends one at a time so nonces are handed out in order, locally. */
export class RelayerKey {
  readonly account: LocalAccount;
  #nonce: number | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  pending = 0;
  /** Its transactions not known to be mined, by nonce. */
  readonly inFlight = new Map<number, InFlight>();
  /** The lease it sends under now; none: nothing may be sent (a leased key only). */
  lease: KeyLease | undefined;

  constructor(
    privateKey: Hex,
    /** Whether it sends only under a lease ({@link lease}); otherwise it is this process's alone. */
    readonly leased = false,
  ) {
    this.account = privateKeyToAccount(privateKey);
  }

  /** Whether it may broadcast now: always for a key of this process alone; under a valid lease otherwise. */
  maySend(): boolean {
    return !this.leased || (this.lease !== undefined && this.lease.valid());
  }

  /** Whether `signed` may be broadcast now: the key may send, under the very lease it was signed under. */
  mayBroadcast(signed: SignedRelay): boolean {
    return this.maySend() && this.stillLeased(signed);
  }

  /** Whether `signed` was signed under the lease the key still holds (false once it was revoked or changed hands). */
  stillLeased(signed: SignedRelay): boolean {
    return !this.leased || (this.lease !== undefined && this.lease.epoch === signed.epoch);
  }

  get address(): Address {
    return this.account.address;
  }

  /** Runs `task` after every earlier task of this key. */
  exclusive<T>(task: () => Promise<T>): Promise<T> {
    this.pending++;
    const run = this.#queue.then(task, task);
    this.#queue = run.catch(() => undefined);
    return run.finally(() => this.pending--);
  }

  /** The next nonce: the node's pending count, but never one of a transaction this key still follows. */
  async nonce(client: PublicClient): Promise<number> {
    if (this.#nonce === undefined) {
      const pending = await client.getTransactionCount({ address: this.account.address, blockTag: "pending" });
      this.#nonce = Math.max(pending, ...[...this.inFlight.keys()].map((nonce) => nonce + 1));
    }
    return this.#nonce;
  }

  /** The nonce just used is taken: the next is the one after it that no transaction this key follows holds. */
  advance(): void {
    if (this.#nonce !== undefined) this.moveTo(this.#nonce + 1);
  }

  /**
   * Adopts `nonce` as the next (the node said it expects it): never one a transaction this key follows
   * holds, so a send never replaces one of the key's own.
   */
  moveTo(nonce: number): void {
    let next = nonce;
    while (this.inFlight.has(next)) next++;
    this.#nonce = next;
  }

  /** Forget the local nonce: the next send asks the node again. */
  resync(): void {
    this.#nonce = undefined;
  }

  /** The nonce this key will use next, if known. */
  get localNonce(): number | undefined {
    return this.#nonce;
  }

  /** Forgets the transactions whose nonce is mined (below `mined`, the key's confirmed transaction count). */
  minedBelow(mined: number): void {
    for (const nonce of this.inFlight.keys()) if (nonce < mined) this.inFlight.delete(nonce);
  }
}

/** A recorded signed transaction of `from` as the relayer keeps it. */
export function signedOf(raw: Hex, from: Address): SignedRelay {
  const parsed = parseTransaction(raw);
  const fees: Fees =
    parsed.maxFeePerGas !== undefined
      ? { maxFeePerGas: parsed.maxFeePerGas, maxPriorityFeePerGas: parsed.maxPriorityFeePerGas ?? 0n }
      : { gasPrice: parsed.gasPrice ?? 0n };
  return { hash: keccak256(raw), raw, from, nonce: parsed.nonce ?? 0, ...feeFields(fees) };
}

export function feesOf(signed: SignedRelay): Fees {
  return signed.priorityFee !== undefined ? { maxFeePerGas: signed.feeCap, maxPriorityFeePerGas: signed.priorityFee } : { gasPrice: signed.feeCap };
}

export function feeFields(fees: Fees): { feeCap: bigint; priorityFee?: bigint } {
  return "gasPrice" in fees ? { feeCap: fees.gasPrice } : { feeCap: fees.maxFeePerGas, priorityFee: fees.maxPriorityFeePerGas };
}
