import {
  TransactionNotFoundError,
  TransactionReceiptNotFoundError,
  type Address,
  type Hex,
  type PublicClient,
} from "viem";
import { sendErrorKind } from "./relayer.js";
import { tokenAbi } from "./token-abi.js";

/** Parameters of {@link settlementChain}. */
export interface SettlementChainParameters {
  client: PublicClient;
  chainId: number;
  /** How far back (blocks) to look for the transaction that used an authorization. */
  logLookbackBlocks: number;
}


/**
 * What the settlement ledger's reconciler reads from one chain, over a viem public client: receipts
 * (with their block's time), whether the node knows a transaction, the head, the token's
 * `authorizationState` and `AuthorizationUsed` logs, and a re-broadcast of a stored signed transaction.
 */
export function settlementChain({ client, chainId, logLookbackBlocks }: SettlementChainParameters) {
  const head = async () => {
    const block = await client.getBlock({ blockTag: "latest" });
    return { number: block.number, timestamp: block.timestamp };
  };
  return {
    chainId,
    head,

    async receipt(hash: Hex) {
      let receipt;
      try {
        receipt = await client.getTransactionReceipt({ hash });
      } catch (error) {
        if (error instanceof TransactionReceiptNotFoundError) return undefined;
        throw error;
      }
      const block = await client.getBlock({ blockNumber: receipt.blockNumber });
      return { status: receipt.status, blockNumber: receipt.blockNumber, blockTimestamp: block.timestamp };
    },

    async knows(hash: Hex): Promise<boolean> {
      try {
        await client.getTransaction({ hash });
        return true;
      } catch (error) {
        if (error instanceof TransactionNotFoundError) return false;
        throw error;
      }
    },

    authorizationUsed(token: Address, authorizer: Address, nonce: Hex): Promise<boolean> {
      return client.readContract({ address: token, abi: tokenAbi, functionName: "authorizationState", args: [authorizer, nonce] });
    },

    /**
     * Undefined when the logs of the look-back window hold none; rejects when they cannot be read (the
     * RPC down, or refusing the range): a caller must then not conclude that nothing paid.
     */
    async findAuthorizationTransaction(token: Address, authorizer: Address, nonce: Hex): Promise<Hex | undefined> {
      const { number } = await head();
      const lookback = BigInt(logLookbackBlocks);
      const logs = await client.getContractEvents({
        address: token,
        abi: tokenAbi,
        eventName: "AuthorizationUsed",
        args: { authorizer, nonce },
        fromBlock: number > lookback ? number - lookback : 0n,
        toBlock: number,
      });
      return logs.at(-1)?.transactionHash ?? undefined;
    },

    async rebroadcast(raw: Hex): Promise<"accepted" | "refused"> {
      try {
        await client.sendRawTransaction({ serializedTransaction: raw });
        return "accepted";
      } catch (error) {
        const kind = sendErrorKind(error);
        if (kind === "unknown") throw error; // a transport fault: try again next round
        return kind === "known" ? "accepted" : "refused";
      }
    },
  };
}
