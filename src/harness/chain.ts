import { EventEmitter } from "node:events";
import {
  createPublicClient,
  createWalletClient,
  custom,
  getAddress,
  numberToHex,
  parseEther,
  type Account,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
  type Transport,
  type WalletClient,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { HardhatRuntimeEnvironment } from "hardhat/types/hre";
import type { NetworkConnection } from "hardhat/types/network";
import type { EthereumProvider } from "hardhat/types/providers";
import { deployToken, fundAccounts, type TokenArtifact } from "../chain/deploy.js";
import { tokenAbi } from "../chain/token-abi.js";
import { NETWORKS, type NetworkName } from "../protocol/networks.js";
import { ACCOUNT_INDEX, buyerIndexes, localAccount, PREFUNDED_ACCOUNTS, type LocalAccount } from "./accounts.js";
import { kitHardhat, loadKitArtifact, loadTokenArtifact } from "./hardhat.js";
import { DEFAULT_BUYER_BALANCE, DEFAULT_BUYERS, DEFAULT_NODE, DEFAULT_RPC_PORT, MAX_BUYERS, START_BLOCK, type NodeKind } from "./defaults.js";
import { CronosNode, type CronosNodeOptions } from "./cronos-node/node.js";
import { probeForkUrl } from "./fork-probe.js";
import { MULTICALL3_ADDRESS, placeMulticall3, VIEM_CHAIN_NAME, VIEM_CHAINS, type ViemChainName } from "./multicall3.js";
import { serveJsonRpc, type JsonRpcBridge, type RequestProvider } from "./rpc-bridge.js";

export { CRONOS_BLOCK_TIME_MS, DEFAULT_BUYER_BALANCE, DEFAULT_BUYERS, DEFAULT_NODE, DEFAULT_RPC_PORT, MAX_BUYERS, NODE_KINDS, START_BLOCK, type NodeKind } from "./defaults.js";
export { MULTICALL3_ADDRESS, VIEM_CHAIN_NAME, type ViemChainName } from "./multicall3.js";

/** The Hardhat network (in hardhat.config.ts) behind each Cronos network. */
export const HARDHAT_NETWORK: Readonly<Record<NetworkName, string>> = {
  "cronos-testnet": "cronosTestnet",
  "cronos-mainnet": "cronosMainnet",
};

// Native gas given to accounts the chain does not pre-fund (buyers past #19, a fork's master minter).
const GAS_MONEY = parseEther("10000");

/** Options of {@link startLocalChain}. */
export interface LocalChainOptions {
  network: NetworkName;
  /** Hardhat runtime to create the chain with; defaults to one for the kit's hardhat.config.ts. */
  hre?: HardhatRuntimeEnvironment;
  /** Address the JSON-RPC endpoint binds; default 127.0.0.1. */
  host?: string;
  /** JSON-RPC port; default {@link DEFAULT_RPC_PORT}; 0 picks a free port. */
  port?: number;
  /**
   * Milliseconds between blocks; 0 (default) mines each transaction immediately (automine). Below
   * 1000, consecutive blocks may share a timestamp (as on Cronos), so chain time keeps the wall clock's pace.
   */
  blockTimeMs?: number;
  /** Fork this JSON-RPC endpoint instead of starting empty. */
  forkUrl?: string;
  /** Block of `forkUrl` to fork at; default its latest. */
  forkBlockNumber?: bigint;
  /** Buyers to fund (accounts #2 upward, skipping #9); default {@link DEFAULT_BUYERS}. */
  buyers?: number;
  /** USDC.e each buyer holds afterwards, in base units (topped up, never taken away); default {@link DEFAULT_BUYER_BALANCE}. */
  buyerBalance?: bigint;
  /** The token to place (or a promise of it, so the port binds first); default the compiled BridgedUSDC. */
  artifact?: TokenArtifact | Promise<TokenArtifact>;
  /** The Multicall3 to place (or a promise of it); default the compiled Multicall3. */
  multicall3Artifact?: TokenArtifact | Promise<TokenArtifact>;
  /**
   * How the chain admits transactions and answers over its JSON-RPC: `cronos` (default) as a Cronos v1.7 node
   * (docs/cronos-node.md), `ethereum` as EDR on its own (geth's pool).
   */
  node?: NodeKind;
  /** With `node: "cronos"`: the replacement rule's fee bump (percent, default 10) and the minimum gas price (wei, default 0). */
  cronos?: CronosNodeOptions;
  /** Progress lines (for a terminal). */
  onProgress?: (message: string) => void;
}

/** A running local chain with USDC.e at its real address. */
export interface LocalChain {
  network: NetworkName;
  chainId: number;
  /** The viem chain definition this chain matches (`cronosTestnet` or `cronos` in `viem/chains`). */
  viemChain: ViemChainName;
  /** JSON-RPC over HTTP, for clients in other processes. */
  rpcUrl: string;
  /** The same endpoint over WebSocket (`ws://`, same port as `rpcUrl`), with `eth_subscribe`. */
  wsUrl: string;
  port: number;
  token: Address;
  /** EIP-712 domain of the token, as read from the chain. */
  domain: { name: string; version: string };
  /** The fork source, when forked. */
  forkUrl?: string;
  /** False when a fork already had a token at the address (it was used as is). */
  tokenDeployed: boolean;
  /** False when a fork already had code at Multicall3's address (it was used as is). */
  multicall3Deployed: boolean;
  /** Funded buyers. LOCAL-ONLY public Hardhat keys. */
  buyers: LocalAccount[];
  /** Milliseconds between blocks it was started with; 0 = automine. */
  blockTimeMs: number;
  /** How it admits transactions and answers over `rpcUrl` and {@link rpcProvider}: as a Cronos node, or as EDR on its own. */
  node: NodeKind;
  /** What `rpcUrl` answers, in process: the Cronos node in front of EDR (or EDR itself with `node: "ethereum"`). */
  rpcProvider: RequestProvider;
  /** The Cronos node in front of EDR (its settings, and the faults that hold it); absent with `node: "ethereum"`. */
  cronosNode?: CronosNode;
  /** EDR's in-process provider, without the Cronos node in front: the harness's own controls (mining, clock, impersonation). */
  provider: EthereumProvider;
  /** `custom(provider, { retryCount: 0 })`: a viem transport over EDR's in-process provider. */
  transport: Transport;
  publicClient: PublicClient;
  /** Mints `amount` base units to each address (as the token's master minter). */
  fund(addresses: readonly Address[], amount: bigint): Promise<void>;
  /** Stops the JSON-RPC endpoint and the chain. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts a local chain for `network` (chain id 338 or 25) in this process, puts Multicall3 and
 * USDC.e at their real addresses (unless a fork already has them), funds the buyers and serves
 * JSON-RPC on 127.0.0.1. A fresh chain starts at {@link START_BLOCK}: its history is empty blocks
 * one second apart that end at the present, so chain time still follows the wall clock.
 */
export async function startLocalChain(options: LocalChainOptions): Promise<LocalChain> {
  const { network } = options;
  const info = NETWORKS[network];
  const buyerCount = options.buyers ?? DEFAULT_BUYERS;
  const buyerBalance = options.buyerBalance ?? DEFAULT_BUYER_BALANCE;
  const blockTimeMs = options.blockTimeMs ?? 0;
  const node = options.node ?? DEFAULT_NODE;
  if (!Number.isInteger(buyerCount) || buyerCount < 0 || buyerCount > MAX_BUYERS) {
    throw new RangeError(`buyers must be an integer from 0 to ${MAX_BUYERS}, got ${buyerCount}`);
  }
  if (buyerBalance < 0n) throw new RangeError("buyerBalance must not be negative");
  if (node !== "cronos" && node !== "ethereum") throw new RangeError(`node must be "cronos" or "ethereum", got ${String(node)}`);
  if (!Number.isInteger(blockTimeMs) || blockTimeMs < 0) throw new RangeError(`blockTimeMs must be a non-negative integer, got ${blockTimeMs}`);
  const progress = (message: string) => options.onProgress?.(`${network}: ${message}`);

  let connection: NetworkConnection | undefined;
  let markReady!: () => void;
  let markFailed!: (error: unknown) => void;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    markFailed = reject;
  });
  ready.catch(() => {});
  // The bridge listens before the chain exists: subscription events reach it through this relay.
  const events = new EventEmitter();
  const edr: RequestProvider = {
    async request(args) {
      await ready;
      return connection!.provider.request(args as { method: string; params?: unknown[] });
    },
    on: (event, listener) => events.on(event, listener),
    removeListener: (event, listener) => events.removeListener(event, listener),
  };
  // Built first, so a bad option fails before anything starts; the chain's own set-up goes to EDR directly.
  const cronosNode = node === "cronos" ? new CronosNode(edr, options.cronos) : undefined;
  const rpcProvider = cronosNode ?? edr;
  // Bound first, so a taken port fails in milliseconds; requests wait until the chain is set up.
  const bridge: JsonRpcBridge = await serveJsonRpc(rpcProvider, { host: options.host, port: options.port ?? DEFAULT_RPC_PORT[network], role: `${network}-rpc` });
  let intervalMining = false;
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      markFailed(new Error("the chain was stopped"));
      await bridge.close();
      if (connection) {
        // EDR's interval miner runs on its own thread; stop it before dropping the provider.
        if (intervalMining) await connection.provider.request({ method: "evm_setIntervalMining", params: [0] }).catch(() => {});
        await connection.close();
      }
    })();
    return stopping;
  };

  try {
    const hre = options.hre ?? (await kitHardhat());
    progress(options.forkUrl ? `starting chain ${info.chainId}, forking ${options.forkUrl}` : `starting chain ${info.chainId}`);
    let forkBlockNumber = options.forkBlockNumber;
    if (options.forkUrl) {
      const remote = await probeForkUrl(network, options.forkUrl);
      const remoteChainId = remote.chainId;
      // Pinned to the node's latest block: left alone, EDR forks 128 blocks back (a reorg margin
      // Cronos' instant finality does not need) and misses what the node did last.
      forkBlockNumber ??= remote.blockNumber;
      if (remoteChainId !== info.chainId) {
        progress(`warning: ${options.forkUrl} reports chain id ${remoteChainId}, not ${info.chainId}; the fork still answers as ${info.chainId}`);
      }
    }
    // Blocks 1 .. START_BLOCK-1 are mined 1 s apart right away; genesis is backdated by as much.
    const history = START_BLOCK[network] - 1n;
    const [artifact, multicall3Artifact, created] = await Promise.all([
      options.artifact ?? loadTokenArtifact(hre),
      options.multicall3Artifact ?? loadKitArtifact(hre, "Multicall3"),
      hre.network.create({
        network: HARDHAT_NETWORK[network],
        override: {
          chainId: info.chainId,
          // Set-up runs with automine; interval mining (if asked) starts afterwards.
          mining: { auto: true, interval: 0 },
          // Sub-second blocks share timestamps, as on Cronos, instead of running ahead of the clock.
          allowBlocksWithSameTimestamp: blockTimeMs > 0 && blockTimeMs < 1000,
          ...(options.forkUrl ? {} : { initialDate: new Date(Date.now() - Number(history) * 1000) }),
          ...(options.forkUrl
            ? { forking: { enabled: true, url: options.forkUrl, blockNumber: forkBlockNumber } }
            : {}),
        },
      }),
    ]);
    connection = created;
    const provider = created.provider;
    provider.on("message", (message: unknown) => events.emit("message", message));
    // No retries: an in-process provider has no transient faults, and viem would retry every
    // revert three times with back-off (about 1 s per reverting call).
    const transport = custom(provider, { retryCount: 0 });
    const chain = VIEM_CHAINS[VIEM_CHAIN_NAME[network]];
    const publicClient = createPublicClient({ chain, transport }) as PublicClient;

    if (options.forkUrl) {
      // EDR knows no hardfork history for chains 338/25, so it cannot execute on the fork block
      // itself; one local block makes "latest" executable.
      await provider.request({ method: "evm_mine", params: [] });
    }
    // Before the history is mined, so Multicall3 is there at every block viem may pin a read to.
    const multicall3Deployed = await placeMulticall3(provider, (await multicall3Artifact).deployedBytecode);
    progress(multicall3Deployed ? `placed Multicall3 at ${MULTICALL3_ADDRESS}` : `using the Multicall3 the fork already has at ${MULTICALL3_ADDRESS}`);
    if (!options.forkUrl) await mineHistory(provider, history);
    const chainId = await publicClient.getChainId();
    if (chainId !== info.chainId) throw new Error(`${network}: the chain reports id ${chainId}, expected ${info.chainId}`);
    const deployer = localAccount(ACCOUNT_INDEX.deployer);
    const [first] = (await provider.request({ method: "eth_accounts" })) as string[];
    if (!first || getAddress(first) !== deployer.address) {
      throw new Error(`${network}: the Hardhat network's accounts are not the default mnemonic's (accounts in hardhat.config.ts changed?)`);
    }

    const code = await publicClient.getCode({ address: info.token });
    const tokenDeployed = !(options.forkUrl && code !== undefined && code !== "0x");
    let minter: WalletClient<Transport, Chain, Account>;
    if (tokenDeployed) {
      progress(`placing USDC.e at ${info.token}`);
      minter = createWalletClient({ account: privateKeyToAccount(deployer.privateKey), chain, transport });
      await deployToken({
        publicClient,
        walletClient: minter,
        artifact,
        name: info.domain.name,
        symbol: info.tokenSymbol,
        version: info.domain.version,
        decimals: info.tokenDecimals,
        at: info.token,
      });
    } else {
      progress(`using the token the fork already has at ${info.token}`);
      minter = await impersonateMasterMinter(provider, publicClient, info.token, chain, transport);
    }

    const fund = async (addresses: readonly Address[], amount: bigint) => {
      if (addresses.length === 0) return;
      await fundAccounts({ publicClient, walletClient: minter, token: info.token, accounts: addresses, amount });
    };

    const buyers = buyerIndexes(buyerCount).map(localAccount);
    for (const buyer of buyers) {
      // Buyers only sign, but gas lets them also send transactions themselves.
      if (buyer.index >= PREFUNDED_ACCOUNTS) await setBalance(provider, buyer.address, GAS_MONEY);
    }
    // Tops each buyer up to buyerBalance (a fork may already have given some of them tokens).
    const shortfalls = new Map<bigint, Address[]>();
    for (const buyer of buyers) {
      const balance = await publicClient.readContract({ address: info.token, abi: tokenAbi, functionName: "balanceOf", args: [buyer.address] });
      if (balance < buyerBalance) shortfalls.set(buyerBalance - balance, [...(shortfalls.get(buyerBalance - balance) ?? []), buyer.address]);
    }
    if (shortfalls.size > 0) {
      progress(`funding ${[...shortfalls.values()].flat().length} buyer(s)`);
      for (const [amount, addresses] of shortfalls) await fund(addresses, amount);
    }
    const [name, version] = await Promise.all([
      publicClient.readContract({ address: info.token, abi: tokenAbi, functionName: "name" }),
      publicClient.readContract({ address: info.token, abi: tokenAbi, functionName: "version" }),
    ]);

    if (blockTimeMs > 0) {
      await provider.request({ method: "evm_setAutomine", params: [false] });
      await provider.request({ method: "evm_setIntervalMining", params: [blockTimeMs] });
      intervalMining = true;
    }
    markReady();
    const head = await publicClient.getBlockNumber({ cacheTime: 0 });
    progress(`ready: chain id ${chainId} at ${bridge.url}, block ${head}${blockTimeMs > 0 ? `, a block every ${blockTimeMs} ms` : ", automine"}, ${node === "cronos" ? "admitting as a Cronos node" : "admitting as EDR (geth's pool)"}`);
    return {
      network,
      chainId,
      viemChain: VIEM_CHAIN_NAME[network],
      rpcUrl: bridge.url,
      wsUrl: bridge.wsUrl,
      port: bridge.port,
      token: getAddress(info.token),
      domain: { name, version },
      ...(options.forkUrl ? { forkUrl: options.forkUrl } : {}),
      tokenDeployed,
      multicall3Deployed,
      buyers,
      blockTimeMs,
      node,
      rpcProvider,
      ...(cronosNode ? { cronosNode } : {}),
      provider,
      transport,
      publicClient,
      fund,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * Returns a wallet client acting as the token's master minter through `hardhat_impersonateAccount`,
 * with gas: how a fork of the real FiatToken (or of a local chain) mints without its keys.
 */
async function impersonateMasterMinter(
  provider: EthereumProvider,
  publicClient: PublicClient,
  token: Address,
  chain: Chain,
  transport: Transport,
): Promise<WalletClient<Transport, Chain, Account>> {
  let masterMinter: Address;
  try {
    masterMinter = await publicClient.readContract({ address: token, abi: tokenAbi, functionName: "masterMinter" });
  } catch (error) {
    throw new Error(`the contract at ${token} on the fork has no masterMinter(): not a FiatToken, cannot fund buyers`, { cause: error });
  }
  return impersonate(provider, publicClient, masterMinter, chain, transport);
}

/**
 * A wallet client that sends as `address` on a local chain (`hardhat_impersonateAccount`: no key needed),
 * given gas when it has almost none. How the harness acts as a token role holder or as a payer.
 */
export async function impersonate(
  provider: EthereumProvider,
  publicClient: PublicClient,
  address: Address,
  chain: Chain,
  transport: Transport,
): Promise<WalletClient<Transport, Chain, Account>> {
  await provider.request({ method: "hardhat_impersonateAccount", params: [address] });
  // Topped up only when nearly out: an account's own native balance is otherwise left as it is.
  if ((await publicClient.getBalance({ address })) < parseEther("1")) await setBalance(provider, address, GAS_MONEY);
  return createWalletClient({ account: { address, type: "json-rpc" }, chain, transport });
}

/**
 * Mines `blocks` empty blocks one second apart in one step (EDR reserves them without executing
 * each), then moves chain time up to the wall clock: the backdated genesis was computed a moment
 * before the chain was created.
 */
async function mineHistory(provider: EthereumProvider, blocks: bigint): Promise<void> {
  await provider.request({ method: "hardhat_mine", params: [numberToHex(blocks), "0x1"] });
  const latest = (await provider.request({ method: "eth_getBlockByNumber", params: ["latest", false] })) as { timestamp: Hex };
  const behind = Math.floor(Date.now() / 1000) - Number(BigInt(latest.timestamp));
  if (behind > 0) await provider.request({ method: "evm_increaseTime", params: [behind] });
}

async function setBalance(provider: EthereumProvider, address: Address, wei: bigint): Promise<void> {
  await provider.request({ method: "hardhat_setBalance", params: [address, numberToHex(wei)] });
}
