import { parseAbiItem, type Address, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { loadConfig } from "../../src/facilitator/config/index.js";
import type { Logger } from "../../src/facilitator/logger.js";
import type { RunningFacilitator } from "../../src/facilitator/start.js";
import type { LocalChain } from "../../src/harness/chain.js";
import type { RefusalKind, RefusalRecord } from "../../src/harness/cronos-node/refusals.js";
import type { LocalStack, LocalStackOptions } from "../../src/harness/stack.js";
import { NETWORKS } from "../../src/protocol/networks.js";
import { HARDHAT_KEYS, startTestFacilitator, TEST_ENV } from "./facilitator.js";
import { STACK_OPTIONS, startTestStack } from "./seller.js";

// Helpers only: importing this file runs nothing.
// The local stack's chain 338 answering as a Cronos node (the harness's default, what integrators meet), its
// faults (stack.harness), and the production facilitator on that chain's public JSON-RPC URL.

/** The production facilitator's relayer key here: Hardhat's #8 (the stack's own facilitator sends from #9). */
export const PRODUCTION_RELAYER_KEY = HARDHAT_KEYS.secondRelayer;
export const PRODUCTION_RELAYER: Address = privateKeyToAccount(PRODUCTION_RELAYER_KEY).address;

/** A local stack on chain 338 (a Cronos node), and what the tests read of it. */
export interface CronosStack {
  stack: LocalStack;
  chain: LocalChain;
  /** What a payment helper needs of the chain (`makePayment`'s first argument). */
  payments: { publicClient: LocalChain["publicClient"]; info: (typeof NETWORKS)["cronos-testnet"]; token: Address };
  /** The node's refusals since {@link mark} (or the start): a count per kind, and the refusals themselves. */
  refusedSince(): { counts: Record<RefusalKind, number>; recent: RefusalRecord["recent"] };
  /** Starts counting refusals from now. */
  mark(): void;
  /** The relayer's transactions mined (its `latest` nonce), read from EDR. */
  minedNonce(address?: Address): Promise<number>;
  /** The transactions in EDR's pool (the node's pool), by hash. */
  pool(): Promise<Hex[]>;
  /** The token's balance of `address`. */
  balanceOf(address: Address): Promise<bigint>;
  /** Every `Transfer` of the token to `to`, and every `AuthorizationUsed` of `(authorizer, nonce)`, since the stack started. */
  transfersTo(to: Address): Promise<Array<{ from: Address; value: bigint; txHash: Hex }>>;
  authorizationsUsed(authorizer: Address, nonce: Hex): Promise<Hex[]>;
  close(): Promise<void>;
}

const TRANSFER = parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)");
const AUTHORIZATION_USED = parseAbiItem("event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)");

/**
 * Starts a stack with chain 338 only, as a Cronos node (its JSON-RPC, WebSocket and faults); `options` on top.
 * Closed with the scope that opens it (test/helpers/teardown.ts); `close` closes it sooner.
 */
export async function openCronosStack(options: LocalStackOptions = {}): Promise<CronosStack> {
  const stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], buyers: 3, ...options });
  const chain = stack.chains["cronos-testnet"]!;
  const node = chain.cronosNode;
  if (!node) throw new Error("the chain does not answer as a Cronos node");
  const from = await chain.publicClient.getBlockNumber();
  let base = node.refusals();
  const token = chain.token;
  return {
    stack,
    chain,
    payments: { publicClient: chain.publicClient, info: NETWORKS["cronos-testnet"], token },
    refusedSince() {
      const now = node.refusals();
      const counts = Object.fromEntries(Object.entries(now.counts).map(([kind, count]) => [kind, count - base.counts[kind as RefusalKind]])) as Record<RefusalKind, number>;
      // The record keeps the latest refusals: the ones since the mark are its last `total since` entries.
      const since = Object.values(counts).reduce((sum, count) => sum + count, 0);
      return { counts, recent: since === 0 ? [] : now.recent.slice(-since) };
    },
    mark() {
      base = node.refusals();
    },
    minedNonce: (address = PRODUCTION_RELAYER) => chain.publicClient.getTransactionCount({ address, blockTag: "latest" }),
    async pool() {
      return ((await chain.provider.request({ method: "eth_pendingTransactions", params: [] })) as Array<{ hash: Hex }>).map((tx) => tx.hash);
    },
    balanceOf: (address) => chain.publicClient.readContract({ address: token, abi: [parseAbiItem("function balanceOf(address) view returns (uint256)")], functionName: "balanceOf", args: [address] }),
    async transfersTo(to) {
      const logs = await chain.publicClient.getLogs({ address: token, event: TRANSFER, args: { to }, fromBlock: from, toBlock: "latest" });
      return logs.map((log) => ({ from: log.args.from!, value: log.args.value!, txHash: log.transactionHash }));
    },
    async authorizationsUsed(authorizer, nonce) {
      const logs = await chain.publicClient.getLogs({ address: token, event: AUTHORIZATION_USED, args: { authorizer, nonce }, fromBlock: from, toBlock: "latest" });
      return logs.map((log) => log.transactionHash);
    },
    close: () => stack.stop(),
  };
}

/**
 * The facilitator as `cronos-x402 facilitator` runs it: its configuration read from variables by the one schema,
 * its chain reached over the stack's public JSON-RPC URL (the Cronos node), its own embedded ledger; relayer #8,
 * the tests' settings (no rate limits, fast polling) and `env` on top. Closed with the scope that opens it.
 */
export function startProductionFacilitator(cronos: CronosStack, env: Record<string, string> = {}, logger?: Logger): Promise<RunningFacilitator> {
  const config = loadConfig({
    ...TEST_ENV,
    RELAYER_PRIVATE_KEY: PRODUCTION_RELAYER_KEY,
    PORT: "0",
    METRICS_PORT: "0",
    CRONOS_TESTNET_RPC_URL: cronos.chain.rpcUrl,
    ...env,
  });
  return startTestFacilitator(config, logger ? { logger } : {});
}

/** A logger that prints with FAULT_DEBUG set, and is quiet otherwise. */
export function debugLogger(): Logger {
  const print = (level: string) => (fields: object, message?: string) =>
    process.env.FAULT_DEBUG && console.log(level, message, JSON.stringify(fields, (_key, value: unknown) => (typeof value === "bigint" ? String(value) : value)));
  const logger = { info: print("info"), warn: print("warn"), error: print("error"), debug: print("debug"), child: () => logger };
  return logger as unknown as Logger;
}
