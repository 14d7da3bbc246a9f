import { keccak256, type Address, type Hex, type LocalAccount, type PublicClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";

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
}

/** Hooks around each broadcast of {@link Relayer.send}. */
export interface RelayHooks {
  /**
   * Called after signing and before the broadcast (e.g. to record the transaction first). When it
   * throws, nothing is broadcast, the nonce stays free, and `send` rejects with a {@link RelaySendError}
   * (`maybeSent` false) whose cause is the hook's error.
   */
  beforeBroadcast?(tx: SignedRelay): Promise<void>;
  /** What the node said: it took the transaction (or had it), refused it outright, or did not answer. */
  afterBroadcast?(tx: SignedRelay, outcome: "accepted" | "refused" | "unknown"): void;
}

/** A send that failed after the transaction may have reached the node: the caller must report `hash`. */
export class RelaySendError extends Error {
  override name = "RelaySendError";
  constructor(
    readonly hash: Hex,
    /** True when the node may hold the transaction (a transport failure, not a refusal). */
    readonly maybeSent: boolean,
    options: { cause: unknown },
  ) {
    super(`relayer could not send ${hash}`, options);
  }
}

type Fees = { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } | { gasPrice: bigint };

const FEE_TTL_MS = 2_000;

/** One relayer key: sends one at a time so nonces are handed out in order, locally. */
class RelayerKey {
  readonly account: LocalAccount;
  #nonce: number | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  pending = 0;

  constructor(privateKey: Hex) {
    this.account = privateKeyToAccount(privateKey);
  }

  /** Runs `task` after every earlier task of this key. */
  exclusive<T>(task: () => Promise<T>): Promise<T> {
    this.pending++;
    const run = this.#queue.then(task, task);
    this.#queue = run.catch(() => undefined);
    return run.finally(() => this.pending--);
  }

  async nonce(client: PublicClient): Promise<number> {
    this.#nonce ??= await client.getTransactionCount({ address: this.account.address, blockTag: "pending" });
    return this.#nonce;
  }

  advance(): void {
    if (this.#nonce !== undefined) this.#nonce++;
  }

  /** Forget the local nonce: the next send asks the node again. */
  resync(): void {
    this.#nonce = undefined;
  }

  /** The nonce this key will use next, if known. */
  get localNonce(): number | undefined {
    return this.#nonce;
  }
}

/** Parameters of {@link Relayer}. */
export interface RelayerParameters {
  client: PublicClient;
  chainId: number;
  /** One or more keys, used in turn (the least busy first). */
  privateKeys: readonly Hex[];
}

/**
 * Nonce-safe transaction sender. Each key hands out nonces locally and sends strictly in order;
 * when the node refuses a nonce (or a send fails midway), the key re-reads its pending nonce from
 * the node and retries once, so one failure does not wedge the pipeline. Receipts are awaited
 * by the caller, concurrently, outside the per-key queue.
 */
export class Relayer {
  readonly #client: PublicClient;
  readonly #chainId: number;
  readonly #keys: RelayerKey[];
  #fees: { at: number; value: Promise<Fees> } | undefined;
  #cursor = 0;

  constructor(parameters: RelayerParameters) {
    if (parameters.privateKeys.length === 0) throw new Error("Relayer needs at least one private key");
    this.#client = parameters.client;
    this.#chainId = parameters.chainId;
    this.#keys = parameters.privateKeys.map((key) => new RelayerKey(key));
  }

  /** The relayer accounts' addresses (public; the keys never leave this object). */
  get addresses(): Address[] {
    return this.#keys.map((key) => key.account.address);
  }

  /** Next local nonce and queue depth of each key, for metrics and health. */
  status(): Array<{ address: Address; localNonce: number | undefined; pending: number }> {
    return this.#keys.map((key) => ({ address: key.account.address, localNonce: key.localNonce, pending: key.pending }));
  }

  /**
   * The account to send the next transaction from (simulate with it as `from`): the least busy key,
   * taking keys in turn on ties, so settles that arrive together spread over the keys. With `among`
   * (the keys this instance may send from now), only those; undefined when none of them is ours.
   */
  pick(among?: readonly Address[]): Address | undefined {
    return this.#leastBusy(among)?.account.address;
  }

  #leastBusy(among?: readonly Address[]): RelayerKey | undefined {
    const allowed = among && new Set(among.map((a) => a.toLowerCase()));
    const count = this.#keys.length;
    let best: RelayerKey | undefined;
    for (let i = 0; i < count; i++) {
      const key = this.#keys[(this.#cursor + i) % count]!;
      if (allowed && !allowed.has(key.account.address.toLowerCase())) continue;
      if (!best || key.pending < best.pending) best = key;
    }
    this.#cursor = (this.#cursor + 1) % count;
    return best;
  }

  /** Forgets `address`'s local nonce: its next send reads it from the node (a key taken over from another instance). */
  resync(address: Address): void {
    this.#keys.find((k) => k.account.address.toLowerCase() === address.toLowerCase())?.resync();
  }

  /** Whether `address` has a send queued or in progress. */
  busy(address: Address): boolean {
    return (this.#keys.find((k) => k.account.address.toLowerCase() === address.toLowerCase())?.pending ?? 0) > 0;
  }

  #currentFees(): Promise<Fees> {
    const now = Date.now();
    if (!this.#fees || now - this.#fees.at > FEE_TTL_MS) {
      const value: Promise<Fees> = this.#client
        .estimateFeesPerGas({ type: "eip1559", chain: null })
        .then((fees): Fees => ({ maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas }))
        .catch(async () => ({ gasPrice: await this.#client.getGasPrice() }));
      this.#fees = { at: now, value };
      value.catch(() => (this.#fees = undefined));
    }
    return this.#fees.value;
  }

  /**
   * Signs and sends `request` from `from` (one of {@link addresses}; default the least busy key).
   * Resolves with the transaction hash once the node accepted it. `hooks` see each signed
   * transaction before its broadcast and what the node said.
   */
  send(request: RelayRequest, from?: Address, hooks: RelayHooks = {}): Promise<{ hash: Hex; from: Address }> {
    const key = (from && this.#keys.find((k) => k.account.address === from)) || this.#leastBusy()!;
    return key.exclusive(async () => {
      const fees = await this.#currentFees();
      for (let attempt = 0; ; attempt++) {
        const nonce = await key.nonce(this.#client);
        const serialized = await key.account.signTransaction({
          chainId: this.#chainId,
          to: request.to,
          data: request.data,
          gas: request.gas,
          nonce,
          ...("gasPrice" in fees ? { gasPrice: fees.gasPrice, type: "legacy" as const } : { ...fees, type: "eip1559" as const }),
        });
        const signed: SignedRelay = {
          hash: keccak256(serialized),
          raw: serialized,
          from: key.account.address,
          nonce,
          ...("gasPrice" in fees ? { feeCap: fees.gasPrice } : { feeCap: fees.maxFeePerGas, priorityFee: fees.maxPriorityFeePerGas }),
        };
        const { hash } = signed;
        try {
          await hooks.beforeBroadcast?.(signed);
        } catch (error) {
          throw new RelaySendError(hash, false, { cause: error });
        }
        try {
          await this.#client.sendRawTransaction({ serializedTransaction: serialized });
          key.advance();
          hooks.afterBroadcast?.(signed, "accepted");
          return { hash, from: key.account.address };
        } catch (error) {
          const answer = sendErrorKind(error);
          if (answer === "known") {
            key.advance();
            hooks.afterBroadcast?.(signed, "accepted");
            return { hash, from: key.account.address };
          }
          key.resync();
          hooks.afterBroadcast?.(signed, answer === "refused" ? "refused" : "unknown");
          const retry = /nonce|replacement transaction underpriced/i.test(errorText(error));
          if (retry && attempt === 0) continue;
          // Refused outright: nothing was sent. Otherwise (time-out, connection lost) it may have been.
          throw new RelaySendError(hash, answer !== "refused", { cause: error });
        }
      }
    });
  }
}

function errorText(error: unknown): string {
  if (error instanceof Error) return `${error.message} ${(error as { details?: string }).details ?? ""}`;
  return String(error);
}

/**
 * How a node's error to `eth_sendRawTransaction` reads: it already had the transaction (`known`),
 * refused it outright (`refused`: nothing was sent), or something else (a transport fault: it may have been).
 */
export function sendErrorKind(error: unknown): "known" | "refused" | "unknown" {
  const message = errorText(error);
  if (/already known|known transaction|already imported/i.test(message)) return "known";
  if (/nonce|underpriced|insufficient funds|intrinsic gas|gas limit|execution reverted|invalid|rejected/i.test(message)) return "refused";
  return "unknown";
}
