import { TransactionNotFoundError, TransactionReceiptNotFoundError, type Hex, type PublicClient, type TransactionReceipt } from "viem";

/** Whether the node knows the transaction (in its pool, or mined); a failed read throws. */
export async function knowsTransaction(client: PublicClient, hash: Hex): Promise<boolean> {
  try {
    await client.getTransaction({ hash });
    return true;
  } catch (error) {
    if (error instanceof TransactionNotFoundError) return false;
    throw error;
  }
}

/** Parameters of {@link waitForReceipt}. */
export interface WaitForReceiptParameters {
  /** The transaction, or its versions so far (a replaced transaction: whichever is mined). */
  hash: Hex | (() => readonly Hex[]);
  /** Blocks on top of (and including) the one that mined it; 1 = mined. */
  confirmations: number;
  /** The deadline, from the call. */
  timeoutMs: number;
  pollingIntervalMs: number;
  /** Told of each RPC error the wait rode out (metrics, logs). */
  onRpcError?: (error: unknown) => void;
  /** Ends the wait early (undefined) once true, checked after each poll: none of the hashes can be mined any more. */
  abandon?: () => boolean;
  /**
   * Given the latest block, read with each poll in the same round trip: the block that mined the
   * transaction is usually the latest when its receipt appears, so its time needs no request of its own.
   */
  onLatestBlock?: (block: { number: bigint; timestamp: bigint }) => void;
}

/**
 * Waits for the receipt of a sent transaction (of any of its versions) until the deadline, through RPC errors: a dropped
 * connection or a node that stumbles is asked again at the next poll, so only the deadline ends the
 * wait (a request hanging at the deadline does not extend it). The receipt is read again at every
 * poll until it has its confirmations, so one that a reorganisation drops is waited for anew.
 * Resolves `undefined` when the deadline passes first.
 */
export function waitForReceipt(client: PublicClient, parameters: WaitForReceiptParameters): Promise<TransactionReceipt | undefined> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (receipt: TransactionReceipt | undefined) => {
      done = true;
      clearTimeout(deadline);
      resolve(receipt);
    };
    const deadline = setTimeout(() => finish(undefined), parameters.timeoutMs);
    const hashes = typeof parameters.hash === "function" ? parameters.hash : () => [parameters.hash as Hex];
    const poll = async () => {
      while (!done) {
        try {
          const [receipt] = await Promise.all([
            firstReceipt(client, hashes()),
            parameters.onLatestBlock &&
              client.getBlock({ blockTag: "latest" }).then(
                (block) => parameters.onLatestBlock!({ number: block.number, timestamp: block.timestamp }),
                () => undefined,
              ),
          ]);
          const confirmed =
            receipt !== undefined &&
            (parameters.confirmations <= 1 ||
              (await client.getBlockNumber({ cacheTime: 0 })) - receipt.blockNumber + 1n >= BigInt(parameters.confirmations));
          if (confirmed && !done) return finish(receipt);
        } catch (error) {
          if (!done) parameters.onRpcError?.(error);
        }
        if (!done && parameters.abandon?.()) return finish(undefined);
        if (!done) await new Promise((wake) => setTimeout(wake, parameters.pollingIntervalMs));
      }
    };
    void poll();
  });
}

/** The receipt of whichever of `hashes` is mined (at most one can be: they share a nonce), read in parallel. */
async function firstReceipt(client: PublicClient, hashes: readonly Hex[]): Promise<TransactionReceipt | undefined> {
  const reads = await Promise.allSettled(hashes.map((hash) => client.getTransactionReceipt({ hash })));
  const found = reads.find((read) => read.status === "fulfilled");
  if (found) return (found as PromiseFulfilledResult<TransactionReceipt>).value;
  const fault = reads.find((read) => read.status === "rejected" && !(read.reason instanceof TransactionReceiptNotFoundError));
  if (fault) throw (fault as PromiseRejectedResult).reason;
  return undefined;
}
