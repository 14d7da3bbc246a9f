import { createPublicClient, http, parseEventLogs, type Address, type Hex, type PublicClient, type TransactionReceipt } from "viem";
import { tokenAbi } from "../chain/token-abi.js";

/** Reads one chain over its JSON-RPC for the checks: its clock, the token, receipts and logs. Never writes. */
export interface ChainReader {
  /** The RPC's origin, for output (its path or query may hold an API key). */
  readonly label: string;
  readonly client: PublicClient;
  chainId(): Promise<number>;
  /** The latest block's timestamp: the clock verify and the token judge validity windows by. */
  now(): Promise<bigint>;
  balanceOf(token: Address, account: Address, blockNumber?: bigint): Promise<bigint>;
  /** The token's EIP-712 domain name and version, as it reports them. */
  domain(token: Address): Promise<{ name: string; version: string }>;
  /** Nonces `authorizer` has used at `token` within the last `blocks` blocks, newest first. */
  usedNonces(token: Address, authorizer: Address, blocks: bigint): Promise<Hex[]>;
  /** How many `AuthorizationUsed(authorizer, nonce)` events the token emitted since `fromBlock`. */
  authorizationUses(token: Address, authorizer: Address, nonce: Hex, fromBlock: bigint): Promise<number>;
}

/** A {@link ChainReader} over `rpcUrl`. */
export function createChainReader(rpcUrl: string): ChainReader {
  const client = createPublicClient({ transport: http(rpcUrl, { retryCount: 1, timeout: 30_000 }), cacheTime: 0, pollingInterval: 250 }) as PublicClient;
  const authorizationUsed = tokenAbi.find((item) => item.type === "event" && item.name === "AuthorizationUsed");
  if (!authorizationUsed || authorizationUsed.type !== "event") throw new Error("the token ABI lacks AuthorizationUsed");
  return {
    label: redactUrl(rpcUrl),
    client,
    chainId: () => client.getChainId(),
    async now() {
      return (await client.getBlock({ blockTag: "latest" })).timestamp;
    },
    balanceOf: (token, account, blockNumber) =>
      client.readContract({ address: token, abi: tokenAbi, functionName: "balanceOf", args: [account], ...(blockNumber === undefined ? {} : { blockNumber }) }),
    async domain(token) {
      const [name, version] = await Promise.all([
        client.readContract({ address: token, abi: tokenAbi, functionName: "name" }),
        client.readContract({ address: token, abi: tokenAbi, functionName: "version" }),
      ]);
      return { name, version };
    },
    async usedNonces(token, authorizer, blocks) {
      const latest = await client.getBlockNumber({ cacheTime: 0 });
      const nonces: Hex[] = [];
      // Public RPCs cap eth_getLogs ranges: walk back in steps of 2,000 blocks.
      for (let to = latest; to >= 0n && latest - to < blocks && nonces.length === 0; to -= 2_000n) {
        const from = to >= 1_999n ? to - 1_999n : 0n;
        const logs = await client.getLogs({ address: token, event: authorizationUsed, args: { authorizer }, fromBlock: from, toBlock: to });
        for (const log of logs.reverse()) nonces.push(log.args.nonce as Hex);
        if (from === 0n) break;
      }
      return nonces;
    },
    async authorizationUses(token, authorizer, nonce, fromBlock) {
      const logs = await client.getLogs({ address: token, event: authorizationUsed, args: { authorizer, nonce }, fromBlock, toBlock: "latest" });
      return logs.length;
    },
  };
}

/** The token's events in a receipt, decoded (other contracts' logs left out). */
export function tokenEvents(receipt: TransactionReceipt, token: Address): Array<{ eventName: string; args: Record<string, unknown> }> {
  return parseEventLogs({ abi: tokenAbi, logs: receipt.logs })
    .filter((log) => log.address.toLowerCase() === token.toLowerCase())
    .map((log) => ({ eventName: log.eventName, args: log.args as Record<string, unknown> }));
}

/** A URL without what may be secret in it: scheme, host and port only. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    const hidden = parsed.pathname.length > 1 || parsed.search !== "" || parsed.username !== "" ? "/…" : "";
    return `${parsed.protocol}//${parsed.host}${hidden}`;
  } catch {
    return "(an invalid URL)";
  }
}
