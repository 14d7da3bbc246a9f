import { parseTransaction, type Address, type Hex, type PublicClient } from "viem";
import { initialFees, neededFee, quoteForCap, readFeeQuote, type FeeQuote } from "../fees.js";
import { sendNew } from "./admission.js";
import { feesOf, InFlight, RelayerKey, signedOf } from "./key.js";
import { tendKey } from "./lifecycle.js";
import type { AdoptedTransaction, KeyLease, RelayerContext, RelayerEvent, RelayHooks, RelayRequest, SentTransaction } from "./types.js";

/** Parameters of {@link Relayer}. */
export interface RelayerParameters {
  client: PublicClient;
  chainId: number;
  /** One or more keys, used in turn (the least busy first). */
  privateKeys: readonly Hex[];
  /** `MAX_FEE_PER_GAS_GWEI` in wei: nothing is sent above it. Default: no cap. */
  maxFeePerGasWei?: bigint;
  /** A transaction not mined within this many seconds of chain time is replaced (or re-broadcast). Default 3. */
  replaceAfterSeconds?: number;
  /** How often the lifecycle looks at the transactions in flight (and how long a fee quote is reused). Default 250 ms. */
  pollingIntervalMs?: number;
  /** How long a send the node refuses for now (a lagging backend, a full pool) is tried again, when its caller gives no deadline. Default 10 s. */
  sendBudgetMs?: number;
  /** Told of every replacement, drop, gap filled, refusal, nonce adopted and replacement withheld at the cap. */
  onEvent?: (event: RelayerEvent) => void;
  /**
   * Keys send only under a lease ({@link Relayer.adopt} gives it, {@link Relayer.revoke} takes it back):
   * instances that share the keys through a ledger. Default false: the keys are this process's alone.
   */
  leased?: boolean;
}

const NO_CAP = 2n ** 256n - 1n;

/**
 * Nonce-safe transaction sender, and keeper of its transactions until they are mined. Each key hands
 * out nonces locally and sends strictly in order, one broadcast answered before the next goes out (a
 * Cronos node refuses a nonce above a missing one). A refusal is read from the one table of node errors
 * ({@link ../node-errors.ts}) and answered by what it means ({@link sendNew}); a refused send never takes a nonce.
 *
 * The lifecycle ({@link start}): every `pollingIntervalMs` it reads each busy key's mined nonce and
 * looks at its transactions still in flight. One not mined within `replaceAfterSeconds` of chain time
 * is sent again at the same nonce: re-broadcast as signed when the node no longer knows it (dropped),
 * else re-signed with fees raised by at least 12.5 % (or to what the network asks now), never above
 * `maxFeePerGasWei`; a transaction whose call would now revert (its authorization expired, used or
 * cancelled) gives its nonce to a zero-value self-transfer instead. A nonce missing below transactions
 * that wait on it (a gap) is filled the same way, so the key's pipeline moves again. Receipts are
 * awaited by the caller, over every version's hash ({@link SentTransaction.hashes}).
 */
export class Relayer {
  readonly #client: PublicClient;
  readonly #chainId: number;
  readonly #keys: RelayerKey[];
  readonly #cap: bigint;
  readonly #replaceAfter: bigint;
  readonly #pollingIntervalMs: number;
  readonly #onEvent: (event: RelayerEvent) => void;
  readonly #lifecycle: RelayerContext;
  readonly #sendBudgetMs: number;
  #quote: { at: number; value: Promise<FeeQuote> } | undefined;
  #lastNeeded: bigint | undefined;
  #cursor = 0;
  #timer: NodeJS.Timeout | undefined;
  #tending: Promise<void> | undefined;

  constructor(parameters: RelayerParameters) {
    if (parameters.privateKeys.length === 0) throw new Error("Relayer needs at least one private key");
    this.#client = parameters.client;
    this.#chainId = parameters.chainId;
    this.#keys = parameters.privateKeys.map((key) => new RelayerKey(key, parameters.leased ?? false));
    this.#cap = parameters.maxFeePerGasWei ?? NO_CAP;
    this.#replaceAfter = BigInt(parameters.replaceAfterSeconds ?? 3);
    this.#pollingIntervalMs = parameters.pollingIntervalMs ?? 250;
    this.#onEvent = parameters.onEvent ?? (() => {});
    this.#sendBudgetMs = parameters.sendBudgetMs ?? 10_000;
    this.#lifecycle = {
      client: this.#client,
      chainId: this.#chainId,
      cap: this.#cap,
      replaceAfter: this.#replaceAfter,
      quote: (fresh) => this.#currentQuote(fresh),
      onEvent: this.#onEvent,
    };
  }

  /** The relayer accounts' addresses (public; the keys never leave this object). */
  get addresses(): Address[] {
    return this.#keys.map((key) => key.address);
  }

  /** Next local nonce, queue depth and transactions in flight of each key, for metrics and health. */
  status(): Array<{ address: Address; localNonce: number | undefined; pending: number; inFlight: number }> {
    return this.#keys.map((key) => ({ address: key.address, localNonce: key.localNonce, pending: key.pending, inFlight: key.inFlight.size }));
  }

  /** The fee cap, and what the network asked per gas at the last quote (base fee plus tip, or the gas price). */
  feeStatus(): { capWei: bigint | undefined; neededWei: bigint | undefined } {
    return { capWei: this.#cap === NO_CAP ? undefined : this.#cap, neededWei: this.#lastNeeded };
  }

  /**
   * The account to send the next transaction from (simulate with it as `from`): the least busy key,
   * taking keys in turn on ties, so settles that arrive together spread over the keys. With `among`
   * (the keys this instance may send from now), only those; undefined when none of them is ours.
   */
  pick(among?: readonly Address[]): Address | undefined {
    return this.#leastBusy(among)?.address;
  }

  #leastBusy(among?: readonly Address[]): RelayerKey | undefined {
    const allowed = among && new Set(among.map((a) => a.toLowerCase()));
    const count = this.#keys.length;
    let best: RelayerKey | undefined;
    for (let i = 0; i < count; i++) {
      const key = this.#keys[(this.#cursor + i) % count]!;
      if (allowed && !allowed.has(key.address.toLowerCase())) continue;
      if (!best || key.pending < best.pending) best = key;
    }
    this.#cursor = (this.#cursor + 1) % count;
    return best;
  }

  #key(address: Address): RelayerKey | undefined {
    return this.#keys.find((k) => k.address.toLowerCase() === address.toLowerCase());
  }

  /** Forgets `address`'s local nonce: its next send reads it from the node (a key taken over from another instance). */
  resync(address: Address): void {
    this.#key(address)?.resync();
  }

  /** Whether `address` has a send queued or in progress, or transactions not yet mined. */
  busy(address: Address): boolean {
    const key = this.#key(address);
    return key !== undefined && (key.pending > 0 || key.inFlight.size > 0);
  }

  /**
   * Takes over recorded transactions of `address` (a restart, or a key leased from another instance),
   * under `lease` when keys are leased: before any further send of that key, forgets its local nonce and
   * follows what `load` returns like its own, so a stuck one is replaced and a dropped one re-broadcast.
   * A gap filler holds its nonce over the settlement's transaction it superseded. Its next nonce comes after them.
   */
  adopt(address: Address, load: () => Promise<readonly AdoptedTransaction[]>, lease?: KeyLease): Promise<void> {
    const key = this.#key(address);
    if (!key) return Promise.resolve();
    return key.exclusive(async () => {
      if (lease) key.lease = lease;
      key.resync();
      const loaded = await load();
      // Taken back while the records were read: they are the next holder's.
      if (lease && key.lease !== lease) return;
      for (const tx of loaded) {
        const adopted = adoptedOf(tx, key.address);
        if (!adopted) continue;
        const there = key.inFlight.get(adopted.nonce);
        if (there && (there.filler || !adopted.filler)) continue;
        if (there) there.superseded = true;
        key.inFlight.set(adopted.nonce, adopted);
      }
    });
  }

  /**
   * Takes `address`'s lease back (lost to another instance, or released): from now on nothing is
   * broadcast from it (no send, replacement, re-broadcast or gap filler) until it is adopted again. Its
   * transactions in flight are forgotten here: each is recorded in the ledger, where the key's next
   * holder adopts it. The receipt waits over them go on (they only read). Returns how many it forgot.
   */
  revoke(address: Address): number {
    const key = this.#key(address);
    if (!key) return 0;
    const handedOver = key.inFlight.size;
    key.lease = undefined;
    key.inFlight.clear();
    key.resync();
    return handedOver;
  }

  /** What the network asks now; one quote is shared for a polling interval (`fresh`: read anew). */
  #currentQuote(fresh = false): Promise<FeeQuote> {
    const now = performance.now();
    if (fresh || !this.#quote || now - this.#quote.at > this.#pollingIntervalMs) {
      const value = readFeeQuote(this.#client).then((quote) => {
        this.#lastNeeded = neededFee(quote);
        return quote;
      });
      this.#quote = { at: now, value };
      value.catch(() => (this.#quote = undefined));
    }
    return this.#quote.value;
  }

  /** Throws {@link FeeCapError} when the network needs more per gas than the cap: nothing would be sent. */
  async checkFees(): Promise<void> {
    initialFees(await quoteForCap(this.#currentQuote.bind(this), this.#cap), this.#cap);
  }

  /**
   * Signs and sends `request` from `from` (one of {@link addresses}; default the least busy key), and
   * follows it until its nonce is mined. Resolves once the node took it. Throws {@link FeeCapError}
   * before signing anything when the network needs more than the fee cap (or, the node refusing its fee,
   * once a price it would take is above the cap: nothing is left in the key's sequence). `hooks` see each
   * signed version before its broadcast (replacements too) and what the node said. A send the node refuses
   * for now (a lagging backend, a full pool) is tried again until `deadline` (`performance.now()` time;
   * default `sendBudgetMs` from now). A leased key not leased to this instance now rejects with
   * {@link KeyNotLeasedError} before signing.
   */
  send(request: RelayRequest, from?: Address, hooks: RelayHooks = {}, deadline?: number): Promise<SentTransaction> {
    const key = (from && this.#key(from)) || this.#leastBusy()!;
    const until = deadline ?? performance.now() + this.#sendBudgetMs;
    return key.exclusive(() => sendNew(this.#lifecycle, key, request, hooks, until));
  }

  /** Starts the lifecycle: every `pollingIntervalMs`, a round over the keys with transactions in flight. */
  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.tend(), this.#pollingIntervalMs);
    this.#timer.unref();
  }

  /** Stops the lifecycle (the transactions in flight stay on the node). */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#tending;
  }

  /** One lifecycle round (also run by {@link start}'s timer); a round already running is joined. */
  tend(): Promise<void> {
    this.#tending ??= this.#round().finally(() => (this.#tending = undefined));
    return this.#tending;
  }

  async #round(): Promise<void> {
    const busy = this.#keys.filter((key) => key.inFlight.size > 0);
    if (busy.length === 0) return;
    let head: bigint;
    try {
      head = (await this.#client.getBlock({ blockTag: "latest" })).timestamp;
    } catch (error) {
      for (const key of busy) this.#onEvent({ kind: "roundFailed", from: key.address, error });
      return;
    }
    await Promise.all(
      busy.map((key) =>
        tendKey(this.#lifecycle, key, head).catch((error: unknown) => this.#onEvent({ kind: "roundFailed", from: key.address, error })),
      ),
    );
  }
}

/** A recorded transaction as the key follows it (its versions, the call to re-sign); undefined when the records do not make one. */
function adoptedOf(tx: AdoptedTransaction, from: Address): InFlight | undefined {
  const versions = tx.raws.map((raw) => signedOf(raw, from));
  const latest = versions.at(-1);
  if (!latest || versions.some((v) => v.nonce !== latest.nonce)) return undefined;
  const parsed = parseTransaction(latest.raw);
  if (!parsed.to || parsed.gas === undefined) return undefined;
  const request = { to: parsed.to, data: parsed.data ?? "0x", gas: parsed.gas, ...(tx.filler ? { value: parsed.value ?? 0n } : {}) };
  const adopted = new InFlight(latest.nonce, request, versions[0]!, feesOf(latest), tx.hooks, tx.filler ?? false);
  adopted.versions.push(...versions.slice(1));
  return adopted;
}
