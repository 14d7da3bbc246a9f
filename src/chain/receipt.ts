import { TransactionReceiptNotFoundError, type Hex, type PublicClient, type TransactionReceipt } from "viem";

/** Parameters of {@link waitForReceipt}. */
export interface WaitForReceiptParameters {
  hash: Hex;
  /** Blocks on top of (and including) the one that mined it; 1 = mined. */
  confirmations: number;
  /** The deadline, from the call. */
  timeoutMs: number;
  pollingIntervalMs: number;
  /** Told of each RPC error the wait rode out (metrics, logs). */
  onRpcError?: (error: unknown) => void;
}

/**
 * Waits for the receipt of a sent transaction until the deadline, through RPC errors: a dropped
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
    const poll = async () => {
      while (!done) {
        try {
          const receipt = await client.getTransactionReceipt({ hash: parameters.hash });
          const confirmed =
            parameters.confirmations <= 1 ||
            (await client.getBlockNumber({ cacheTime: 0 })) - receipt.blockNumber + 1n >= BigInt(parameters.confirmations);
          if (confirmed && !done) return finish(receipt);
        } catch (error) {
          if (!done && !(error instanceof TransactionReceiptNotFoundError)) parameters.onRpcError?.(error);
        }
        if (!done) await new Promise((wake) => setTimeout(wake, parameters.pollingIntervalMs));
      }
    };
    void poll();
  });
}
