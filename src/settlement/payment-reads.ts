import {
  numberToHex,
  pad,
  TransactionReceiptNotFoundError,
  type Address,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
} from "viem";
import { knowsTransaction } from "../chain/receipt.js";
import { classifySendError } from "../chain/node-errors.js";
import { tokenAbi } from "../chain/token-abi.js";
import { AUTHORIZATION_CANCELED_TOPIC, AUTHORIZATION_USED_TOPIC } from "./receipt-transfer.js";

/**
 * Where the token state index says an authorization was spent: the port the index provides
 * (`TokenIndex.spentAt`). `{ spent: false }`: unused at the index's head; undefined: it cannot vouch.
 */
export interface SpentIndex {
  spentAt(authorizer: Address, nonce: Hex): Promise<{ spent: false } | { spent: true; blockNumber: bigint } | undefined>;
}

/** The transaction that spent an authorization, and how: `used` (a transfer) or `canceled`. */
export interface Spender {
  how: "used" | "canceled";
  txHash: Hex;
  blockNumber: bigint;
}

/**
 * What settlement reads from one chain: receipts (with their logs), block times, whether the node knows
 * a transaction, the head, the token's `authorizationState`, the transaction that spent an authorization,
 * and a re-broadcast of a stored signed transaction.
 */
export interface PaymentReads {
  chainId: number;
  /** The receipt of `hash`; undefined while it is not mined (or unknown). */
  receipt(hash: Hex): Promise<TransactionReceipt | undefined>;
  /** The time (Unix seconds) of block `blockNumber`. */
  blockTime(blockNumber: bigint): Promise<bigint>;
  /** Whether the node knows the transaction at all (in its pool, or mined). */
  knows(hash: Hex): Promise<boolean>;
  /** The latest block: its timestamp (Unix seconds) is the chain's clock. */
  head(): Promise<{ number: bigint; timestamp: bigint }>;
  /** The token's `authorizationState(authorizer, nonce)`: used or canceled. */
  authorizationUsed(token: Address, authorizer: Address, nonce: Hex): Promise<boolean>;
  /**
   * The ONE authorization lookup: the transaction whose `AuthorizationUsed` or `AuthorizationCanceled`
   * log spent `(authorizer, nonce)`. Undefined when no log was found (in the block the index names, or
   * within the look-back window); rejects when the logs cannot be read.
   */
  spender(token: Address, authorizer: Address, nonce: Hex): Promise<Spender | undefined>;
  /**
   * Broadcasts a stored signed transaction of `relayer` at `relayerNonce` again: `accepted` (the node took it
   * anew), `known` (the node holds it), `spent` (refused, and that nonce of the relayer is mined: none of this
   * transaction's versions can be mined now unless one was), `waits` (refused, and the nonce is not mined:
   * it may still be, from a pool that holds it). A transport fault throws.
   */
  rebroadcast(tx: { raw: Hex; relayer: Address; relayerNonce: number }): Promise<"accepted" | "known" | "spent" | "waits">;
}

/** Parameters of {@link paymentReads}. */
export interface PaymentReadsParameters {
  client: PublicClient;
  chainId: number;
  /** How far back (blocks) to look for the transaction that spent an authorization, when the index cannot say. */
  logLookbackBlocks: number;
  /** The token state index's port, read at each lookup (the index starts after this is built). */
  index?: () => SpentIndex | undefined;
}

interface RpcLog {
  transactionHash: Hex | null;
  blockNumber: Hex | null;
  topics: Hex[];
}

/** A {@link PaymentReads} over a viem public client. */
export function paymentReads({ client, chainId, logLookbackBlocks, index }: PaymentReadsParameters): PaymentReads {
  const head = async () => {
    const block = await client.getBlock({ blockTag: "latest" });
    return { number: block.number, timestamp: block.timestamp };
  };
  // Both events of the pair at once: topic 0 is either, topics 1 and 2 the authorizer and nonce.
  const logsOf = async (token: Address, authorizer: Address, nonce: Hex, fromBlock: bigint, toBlock: bigint): Promise<Spender | undefined> => {
    const logs = (await client.request({
      method: "eth_getLogs",
      params: [
        {
          address: token,
          fromBlock: numberToHex(fromBlock),
          toBlock: numberToHex(toBlock),
          topics: [[AUTHORIZATION_USED_TOPIC, AUTHORIZATION_CANCELED_TOPIC], pad(authorizer.toLowerCase() as Hex), nonce.toLowerCase() as Hex],
        },
      ],
    })) as RpcLog[];
    // A nonce is spent once: the first log is the one (a later one would be of another history).
    const log = logs.find((l) => l.transactionHash && l.blockNumber);
    if (!log) return undefined;
    return { how: log.topics[0]?.toLowerCase() === AUTHORIZATION_CANCELED_TOPIC ? "canceled" : "used", txHash: log.transactionHash!, blockNumber: BigInt(log.blockNumber!) };
  };
  return {
    chainId,
    head,

    async receipt(hash: Hex) {
      try {
        return await client.getTransactionReceipt({ hash });
      } catch (error) {
        if (error instanceof TransactionReceiptNotFoundError) return undefined;
        throw error;
      }
    },

    async blockTime(blockNumber: bigint) {
      return (await client.getBlock({ blockNumber })).timestamp;
    },

    knows(hash: Hex): Promise<boolean> {
      return knowsTransaction(client, hash);
    },

    authorizationUsed(token: Address, authorizer: Address, nonce: Hex): Promise<boolean> {
      return client.readContract({ address: token, abi: tokenAbi, functionName: "authorizationState", args: [authorizer, nonce] });
    },

    async spender(token: Address, authorizer: Address, nonce: Hex): Promise<Spender | undefined> {
      // The index knows the block of every spend since the token's deployment: one block's logs, whatever its age.
      const at = await index?.()?.spentAt(authorizer, nonce).catch(() => undefined);
      if (at?.spent) {
        const found = await logsOf(token, authorizer, nonce, at.blockNumber, at.blockNumber);
        if (found) return found;
      }
      const { number } = await head();
      const lookback = BigInt(logLookbackBlocks);
      return logsOf(token, authorizer, nonce, number > lookback ? number - lookback : 0n, number);
    },

    async rebroadcast({ raw, relayer, relayerNonce }) {
      try {
        await client.sendRawTransaction({ serializedTransaction: raw });
        return "accepted";
      } catch (error) {
        const refusal = classifySendError(error);
        if (refusal.kind === "unknown") throw error; // a transport fault: try again next round
        if (refusal.kind === "known") return "known";
        // Whatever the refusal says (a lagging backend answers `invalid nonce` too), only the mined nonce proves the slot gone.
        const mined = await client.getTransactionCount({ address: relayer, blockTag: "latest" });
        return mined > relayerNonce ? "spent" : "waits";
      }
    },
  };
}
