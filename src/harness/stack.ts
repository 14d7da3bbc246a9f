import { createServer } from "node:net";
import { custom, type Address, type Hex, type Transport } from "viem";
import type { HardhatRuntimeEnvironment } from "hardhat/types/hre";
import { loadConfig } from "../facilitator/config/index.js";
import type { Logger } from "../facilitator/logger.js";
import { startFacilitator, type RunningFacilitator } from "../facilitator/start.js";
import { StartupError } from "../facilitator/startup-error.js";
import { openLedger } from "../ledger/open.js";
import type { Ledger } from "../ledger/types.js";
import { NETWORK_NAMES, type NetworkName } from "../protocol/networks.js";
import { ACCOUNT_INDEX, localAccount } from "./accounts.js";
import { startLocalChain, type LocalChain } from "./chain.js";
import { DEFAULT_FACILITATOR_PORT, DEFAULT_RPC_PORT, type NodeKind } from "./defaults.js";
import type { CronosNodeOptions } from "./cronos-node/node.js";
import { isAddressInUse, PortInUseError, type PortRole } from "./errors.js";
import { kitHardhat, loadKitArtifact, loadTokenArtifact } from "./hardhat.js";
import type { ViemChainName } from "./multicall3.js";
import { createPlayground } from "./playground.js";
import { LocalHarness } from "./control/harness.js";
import { serveHarness, type HarnessServer } from "./control/server.js";
import type { HarnessControl } from "./control/spec.js";
import type { Wire } from "./control/wire.js";

export { CRONOS_BLOCK_TIME_MS, DEFAULT_FACILITATOR_PORT } from "./defaults.js";

/** Options of {@link startLocalStack}. Everything is optional: the default is both chains and the facilitator. */
export interface LocalStackOptions {
  /** Which chains to run (and the facilitator to serve); default both. */
  networks?: readonly NetworkName[];
  /** Facilitator port; default {@link DEFAULT_FACILITATOR_PORT}; 0 picks a free port. */
  port?: number;
  /** JSON-RPC port per chain; default 8545 (testnet) and 8546 (mainnet); 0 picks a free port. */
  rpcPorts?: Partial<Record<NetworkName, number>>;
  /** Milliseconds between blocks; 0 (default) = automine; {@link CRONOS_BLOCK_TIME_MS} = the real networks' pace. */
  blockTimeMs?: number;
  /**
   * How the chains admit transactions and answer over JSON-RPC (their public endpoints and the facilitator's
   * link alike): `cronos` (default) as a Cronos v1.7 node, `ethereum` as EDR on its own (geth's pool).
   */
  node?: NodeKind;
  /** With `node: "cronos"`: the replacement rule's fee bump (percent, default 10) and the minimum gas price (wei, default 0). */
  cronos?: CronosNodeOptions;
  /** JSON-RPC URL to fork, per network. */
  fork?: Partial<Record<NetworkName, string>>;
  /** Buyers per chain (accounts #2 upward, skipping #9); default 3. */
  buyers?: number;
  /** USDC.e per buyer, in base units (6 decimals); default 1,000 USDC.e. */
  buyerBalance?: bigint;
  /** Facilitator rate limits per client IP and minute; 0 switches a limit off. Default: both off. */
  rateLimits?: { verifyPerMinute?: number; settlePerMinute?: number };
  /**
   * More facilitator settings as its environment variables (LOG_LEVEL, CONFIRMATIONS, ...). The
   * stack sets the networks, RPC, token, relayer, host, port and rate limits itself.
   */
  env?: NodeJS.ProcessEnv;
  /** The facilitator's logger; default silent. */
  logger?: Logger;
  /** Hardhat runtime for the chains; default one for the kit's hardhat.config.ts. */
  hre?: HardhatRuntimeEnvironment;
  /** Progress lines while starting (for a terminal). */
  onProgress?: (message: string) => void;
  /** Port of the control endpoint ({@link LocalStack.harnessUrl}) on 127.0.0.1; default 0, any free port. */
  harnessPort?: number;
}

/** What a client needs to use one local network. Plain data: this is what `npm start -- --json` prints. */
export interface LocalStackNetwork {
  chainId: number;
  /** The viem chain definition that matches this network: `cronosTestnet` or `cronos` (from `viem/chains`). */
  viemChain: ViemChainName;
  rpcUrl: string;
  /** The same JSON-RPC endpoint over WebSocket (`ws://`, same port), with `eth_subscribe`. */
  wsUrl: string;
  token: Address;
  domain: { name: string; version: string };
  /** LOCAL-ONLY public Hardhat keys, funded with USDC.e. */
  buyers: Array<{ address: Address; privateKey: Hex }>;
}

/** A running local stack. */
export interface LocalStack {
  facilitatorUrl: string;
  /** The page that watches payments happen (with buyers and a try-it panel); absent with `DASHBOARD=false`. */
  dashboardUrl?: string;
  /** The facilitator's relayer (Hardhat account #9). */
  relayer: Address;
  /** The default seller `payTo` (Hardhat account #1); not part of the JSON line. */
  seller: Address;
  networks: Partial<Record<NetworkName, LocalStackNetwork>>;
  /** The chains themselves (in-process providers, `fund`, ...). */
  chains: Partial<Record<NetworkName, LocalChain>>;
  /** The facilitator running now (after a restart, the new one; while stopped by a fault, the last one). */
  readonly facilitator: RunningFacilitator;
  /**
   * Every x402 failure on demand: payer state, chain time and blocks, the facilitator's RPC, the
   * facilitator busy, stopped or restarted; each fault's handle undoes it, and {@link stop} undoes the rest.
   */
  harness: HarnessControl;
  /**
   * The same controls over HTTP, for tests in other processes and languages: `http://127.0.0.1:PORT/harness`
   * (loopback only; `connectHarness(harnessUrl)`, `cronos-x402 fault …`, curl).
   */
  harnessUrl: string;
  /** Undoes what the faults left, then stops the control endpoint, the facilitator and the chains. Idempotent. */
  stop(): Promise<void>;
}

// Variables the stack owns: a value inherited from the caller's environment must not redirect it.
const OWNED_VARIABLES = /^(PORT|HOST|FACILITATOR_NETWORKS|RELAYER_PRIVATE_KEY(_FILE)?|CRONOS_(TESTNET|MAINNET)_(RPC_URL|TOKEN_ADDRESS|TOKEN_NAME|TOKEN_VERSION)|RATE_LIMIT_(VERIFY|SETTLE)_PER_MINUTE|DATABASE_URL|LEDGER_FILE)$/;
const ENV_PREFIX: Record<NetworkName, string> = { "cronos-testnet": "CRONOS_TESTNET", "cronos-mainnet": "CRONOS_MAINNET" };

/**
 * Starts the local chains (USDC.e at its real address, funded buyers, JSON-RPC on 127.0.0.1) and a
 * facilitator for them in this process. Everything started is stopped again if a step fails.
 */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const networks = [...new Set(options.networks ?? NETWORK_NAMES)];
  if (networks.length === 0) throw new RangeError("networks: at least one network is needed");
  const port = options.port ?? DEFAULT_FACILITATOR_PORT;
  const progress = options.onProgress ?? (() => {});
  const relayer = localAccount(ACCOUNT_INDEX.relayer);

  // Fails in milliseconds, before the slow part, when a fixed port is already taken.
  if (port !== 0) await assertPortFree(port, "facilitator");
  for (const network of networks) {
    const rpcPort = options.rpcPorts?.[network] ?? DEFAULT_RPC_PORT[network];
    if (rpcPort !== 0) await assertPortFree(rpcPort, `${network}-rpc`);
  }

  const chains: Partial<Record<NetworkName, LocalChain>> = {};
  // The facilitator running now; `latest` stays set while a fault holds it stopped.
  let facilitator: RunningFacilitator | undefined;
  let latest: RunningFacilitator | undefined;
  let wires: Wire[] = [];
  let ledger: Ledger | undefined;
  let harness: LocalHarness | undefined;
  let control: HarnessServer | undefined;
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      await control?.close();
      await harness?.close();
      await facilitator?.close(5_000);
      for (const wire of wires) wire.cut();
      await ledger?.close();
      await Promise.all(Object.values(chains).map((chain) => chain.stop()));
    })();
    return stopping;
  };

  try {
    const hre = options.hre ?? (await kitHardhat());
    const artifact = loadTokenArtifact(hre);
    const multicall3Artifact = loadKitArtifact(hre, "Multicall3");
    artifact.catch(() => {});
    multicall3Artifact.catch(() => {});
    const attempts = networks.map(async (network) => {
      chains[network] = await startLocalChain({
        network,
        hre,
        port: options.rpcPorts?.[network],
        blockTimeMs: options.blockTimeMs,
        ...(options.node ? { node: options.node } : {}),
        ...(options.cronos ? { cronos: options.cronos } : {}),
        forkUrl: options.fork?.[network],
        buyers: options.buyers,
        buyerBalance: options.buyerBalance,
        artifact,
        multicall3Artifact,
        onProgress: progress,
      });
    });
    try {
      await Promise.all(attempts);
    } catch (error) {
      // Report the first failure, but only once every chain still starting has been stopped.
      await Promise.allSettled(attempts);
      throw error;
    }

    progress(`facilitator: starting on 127.0.0.1:${port}`);
    const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(options.env ?? {}).filter(([key]) => !OWNED_VARIABLES.test(key)));
    for (const network of networks) {
      const chain = chains[network]!;
      // A fork may carry a token whose domain differs from the kit's table; serve what is on chain.
      env[`${ENV_PREFIX[network]}_TOKEN_NAME`] = chain.domain.name;
      env[`${ENV_PREFIX[network]}_TOKEN_VERSION`] = chain.domain.version;
    }
    const config = loadConfig(
      {
        // A local chain's time is moved by tests: verify reads the head every time unless told otherwise.
        HEAD_CACHE_MS: "0",
        // The page at `/` is for people watching the local stack: on unless DASHBOARD=false.
        DASHBOARD: "true",
        // Metrics on a free loopback port (several stacks at once must not collide); no per-payer limit
        // (test suites pay from a few buyers). Both may be set through the environment.
        METRICS_PORT: "0",
        RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "0",
        // Every client of a local stack is this machine: no per-client connection cap, no quota on the public reads.
        MAX_CONNECTIONS_PER_CLIENT: "0",
        RATE_LIMIT_PUBLIC_PER_MINUTE: "0",
        ...env,
        FACILITATOR_NETWORKS: networks.join(","),
        // Hardhat account #9: a PUBLIC test key, LOCAL-ONLY.
        RELAYER_PRIVATE_KEY: relayer.privateKey,
        HOST: "127.0.0.1",
        PORT: String(port),
        RATE_LIMIT_VERIFY_PER_MINUTE: String(options.rateLimits?.verifyPerMinute ?? 0),
        RATE_LIMIT_SETTLE_PER_MINUTE: String(options.rateLimits?.settlePerMinute ?? 0),
        // The chains are ephemeral: so is the settlement ledger.
        LEDGER_FILE: ":memory:",
      },
      { embedded: networks },
    );
    // The stack's own ledger, kept across facilitator restarts: a new facilitator finishes what the last one left.
    ledger = await openLedger({ file: config.ledger.file });
    const seller = localAccount(ACCOUNT_INDEX.seller).address;
    const playground = createPlayground({ chains, payTo: seller, facilitatorUrl: () => latest!.url });

    /**
     * Starts a facilitator on `listenPort`, each of its links to the chains new (the harness's RPC faults live
     * there); a link reaches what the chain's `rpcUrl` answers (the Cronos node in front of EDR by default).
     */
    const launch = async (listenPort: number) => {
      const links = networks.map((network) => [network, harness!.rpc.wire(network, chains[network]!.rpcProvider, chains[network]!.rpcUrl, config.rpcTimeoutMs)] as const);
      const transports: Partial<Record<NetworkName, Transport>> = Object.fromEntries(links.map(([network, wire]) => [network, custom(wire.provider, { retryCount: 0 })]));
      wires = links.map(([, wire]) => wire);
      try {
        facilitator = await startFacilitator(
          { ...config, port: listenPort },
          { transports, playground, ledger, hooks: harness!.hooks, closedFor: harness!.closedFor, ...(options.logger ? { logger: options.logger } : {}) },
        );
      } catch (error) {
        for (const wire of wires) wire.cut();
        throw error;
      }
      latest = facilitator;
    };
    let boundPort = port;
    const switchboard = {
      get url() {
        return latest!.url;
      },
      running: () => facilitator !== undefined,
      async stop() {
        const running = facilitator;
        facilitator = undefined;
        await running?.close(5_000);
        for (const wire of wires) wire.cut();
      },
      start: () => launch(boundPort),
      async restart() {
        const running = facilitator;
        facilitator = undefined;
        // As a process that dies: its links to the chains go first, then its connections, at once.
        for (const wire of wires) wire.cut();
        await running?.close(0);
        await launch(boundPort);
      },
    };
    harness = new LocalHarness({ chains, facilitator: switchboard });
    try {
      await launch(port);
    } catch (error) {
      if (port !== 0 && (isAddressInUse(error) || (error instanceof StartupError && error.code === "port_in_use"))) {
        throw new PortInUseError(port, "facilitator", "127.0.0.1", { cause: error });
      }
      throw error;
    }
    boundPort = Number(new URL(latest!.url).port);
    progress(`facilitator: ready at ${latest!.url}`);
    // POST /harness/sign signs for the stack's own buyers (the same Hardhat accounts on every chain).
    const buyers = new Map(networks.flatMap((network) => chains[network]!.buyers).map((buyer) => [buyer.address, buyer] as const));
    control = await serveHarness(harness, { port: options.harnessPort ?? 0, buyers: [...buyers.values()] });
    progress(`harness: fault and time controls at ${control.url}`);

    const summary: Partial<Record<NetworkName, LocalStackNetwork>> = {};
    for (const network of networks) {
      const chain = chains[network]!;
      summary[network] = {
        chainId: chain.chainId,
        viemChain: chain.viemChain,
        rpcUrl: chain.rpcUrl,
        wsUrl: chain.wsUrl,
        token: chain.token,
        domain: { ...chain.domain },
        buyers: chain.buyers.map(({ address, privateKey }) => ({ address, privateKey })),
      };
    }
    const first = latest!;
    return {
      facilitatorUrl: first.url,
      ...(config.dashboard ? { dashboardUrl: `${first.url}/` } : {}),
      relayer: first.relayers[0] ?? relayer.address,
      seller,
      networks: summary,
      chains,
      get facilitator() {
        return latest!;
      },
      harness,
      harnessUrl: control.url,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Throws {@link PortInUseError} when `port` cannot be bound on 127.0.0.1 right now. */
async function assertPortFree(port: number, role: PortRole): Promise<void> {
  const host = "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once("error", (error) => reject(isAddressInUse(error) ? new PortInUseError(port, role, host, { cause: error }) : error));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}
