// The networks a facilitator serves: an RPC transport and clients per network, the start-up checks, the relayers.
import type { Tracer } from "@opentelemetry/api";
import { createPublicClient, formatGwei, type Address, type PublicClient, type Transport } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { ChainState } from "../chain/cached-reads.js";
import { Relayer, type RelayerEvent } from "../chain/relayer/index.js";
import { tracedAttempts } from "../chain/rpc-trace.js";
import { rpcTransport, type RpcTransport } from "../chain/rpc-transport.js";
import { domainSeparator } from "../chain/signature.js";
import type { NetworkName } from "../protocol/networks.js";
import type { NetworkRuntime } from "../settlement/runtime.js";
import { paymentReads } from "../settlement/payment-reads.js";
import type { FacilitatorConfig, NetworkConfig } from "./config/index.js";
import { inspectNetwork, readDomain, type NetworkInspection, type RpcEndpointClient } from "./health.js";
import type { Logger } from "./logger.js";
import type { FacilitatorMetrics } from "./metrics/index.js";
import { settleFeeCap } from "./fee-cap.js";
import { StartupError } from "./startup-error.js";

/** The networks of a facilitator, assembled and checked. */
export interface OpenedNetworks {
  /** Each network's runtime (its `index` and `history` are set once the ledger is open). */
  networks: Map<NetworkName, NetworkRuntime>;
  /** Each network's RPC transport: its endpoints' states for the healthcheck. */
  rpcOf: Map<NetworkName, RpcTransport>;
  /** Each network's start-up checks: what the healthcheck shows until its own first checks finish. */
  startupInspections: Map<NetworkName, NetworkInspection>;
  /** Closes every network's RPC transport. */
  closeTransports(): void;
}

/** The URL name on the RPC spans of an injected transport (the local stack's in-process chain). */
export const INJECTED_RPC = "injected";

/** A network's transport: the injected one, or its RPC URLs (several: failover). */
function transportFor(config: FacilitatorConfig, network: NetworkConfig, metrics: FacilitatorMetrics, injected?: Transport, tracer?: Tracer): RpcTransport {
  if (injected) {
    // An in-process chain does not drop requests: a revert (JSON-RPC -32603 there) must not be retried.
    const once: Transport = (parameters) => injected({ ...parameters, retryCount: 0 });
    return { transport: tracer ? tracedAttempts(once, tracer, INJECTED_RPC) : once, endpoints: [], states: async () => [], snapshot: () => [], close() {} };
  }
  if (network.rpcUrls.length === 0) throw new StartupError(`${network.network}: no RPC URL and no embedded chain`);
  return rpcTransport({
    urls: network.rpcUrls,
    timeoutMs: config.rpcTimeoutMs,
    rankIntervalMs: config.rpcRankIntervalMs,
    chainId: network.chainId,
    onPing: (endpoint, up) => metrics.rpcEndpointUp(network.network, endpoint.label, up),
    ...(tracer ? { tracer } : {}),
  });
}

/** What the relayer did to keep a transaction moving: counted, and logged (a round that failed only at debug level). */
function relayerEvent(network: NetworkName, event: RelayerEvent, metrics: FacilitatorMetrics, logger: Logger): void {
  metrics.relayerEvent(network, event);
  const { kind, from } = event;
  switch (kind) {
    case "roundFailed":
      logger.debug({ network, relayer: from, err: String(event.error) }, "relayer: lifecycle round failed; the next one tries again");
      return;
    case "capped":
      logger.warn(
        { network, relayer: from, nonce: event.nonce, txHash: event.hash, neededWei: String(event.neededWei), capWei: String(event.capWei) },
        "relayer: transaction not mined, and no replacement under MAX_FEE_PER_GAS_GWEI; it keeps its price",
      );
      return;
    case "replaced":
      logger.info({ network, relayer: from, nonce: event.nonce, txHash: event.hash, replaces: event.replaces, feeCapWei: String(event.feeCapWei) }, "relayer: transaction replaced");
      return;
    case "gapFilled":
      logger.warn({ network, relayer: from, nonce: event.nonce, txHash: event.hash, by: event.by }, "relayer: nonce gap filled");
      return;
    case "refused":
      logger.info({ network, relayer: from, nonce: event.nonce, txHash: event.hash, refusal: event.refusal }, "relayer: broadcast refused by the node");
      return;
    case "nonceAdopted":
      logger.warn({ network, relayer: from, nonce: event.nonce, expected: event.expected }, "relayer: the node expects another nonce; the key sends from it");
      return;
    case "nonceTaken":
      logger.warn({ network, relayer: from, nonce: event.nonce, txHash: event.hash }, "relayer: nonce mined by a transaction this relayer did not send there");
      return;
    default:
      logger.warn({ network, relayer: from, nonce: event.nonce, txHash: event.hash }, `relayer: transaction ${kind}`);
  }
}

/**
 * With several RPC URLs, runs the start-up checks on each: one that answers wrongly (another chain
 * id, no token, another domain) stops start-up, naming it; one that does not answer is logged and
 * left to the ranking while another passes every check.
 */
async function checkEndpoints(
  config: FacilitatorConfig,
  network: NetworkConfig,
  endpoints: readonly RpcEndpointClient[],
  relayers: readonly Address[],
  logger: Logger,
): Promise<NetworkInspection> {
  const inspections = await Promise.all(
    endpoints.map((endpoint) =>
      inspectNetwork({
        client: endpoint.client,
        config: network,
        relayers,
        relayerMinBalanceWei: config.relayerMinBalanceWei,
        maxBlockAgeSeconds: 0,
        rpcTimeoutMs: config.rpcTimeoutMs,
        rpc: `the RPC at ${endpoint.label}`,
      }),
    ),
  );
  const answered = inspections.filter((inspection) => inspection.chainId !== undefined);
  for (const inspection of answered) {
    const first = inspection.problems[0];
    if (first) throw new StartupError(`${network.network}: ${first.variable}: ${first.message}`);
  }
  const silent = inspections.filter((inspection) => inspection.chainId === undefined).map((inspection) => inspection.problems[0]!);
  if (answered.length === 0) {
    throw new StartupError(`${network.network}: ${silent[0]!.variable}: no RPC answers: ${silent.map((p) => p.message).join("; ")}`);
  }
  for (const problem of silent) logger.warn({ network: network.network, problem: problem.message }, "an RPC URL does not answer at start-up; the others serve");
  return answered[0]!;
}

/**
 * Opens each network of `config`: its transport (`injected`, else its RPC URLs), clients, relayer (not started) and
 * runtime, after the start-up checks (chain id, token code and EIP-712 domain, relayer gas). Throws
 * {@link StartupError} at the first failed check, with every transport closed.
 */
export async function openNetworks(
  config: FacilitatorConfig,
  metrics: FacilitatorMetrics,
  logger: Logger,
  injected?: Partial<Record<NetworkName, Transport>>,
  tracer?: Tracer,
): Promise<OpenedNetworks> {
  const networks = new Map<NetworkName, NetworkRuntime>();
  const clients = new Map<NetworkName, PublicClient>();
  // Each RPC URL on its own (several per network: failover), for the checks of each.
  const endpoints = new Map<NetworkName, RpcEndpointClient[]>();
  const transports: RpcTransport[] = [];
  const rpcOf = new Map<NetworkName, RpcTransport>();
  // Each network's start-up checks: what the healthcheck shows until its own first checks finish.
  const startupInspections = new Map<NetworkName, NetworkInspection>();
  const closeTransports = () => transports.forEach((transport) => transport.close());
  for (const network of config.networks) {
    const rpc = transportFor(config, network, metrics, injected?.[network.network], tracer);
    transports.push(rpc);
    rpcOf.set(network.network, rpc);
    const client = createPublicClient({ transport: rpc.transport, pollingInterval: config.pollingIntervalMs, cacheTime: 0 }) as PublicClient;
    clients.set(network.network, client);
    endpoints.set(
      network.network,
      rpc.endpoints.map((endpoint) => ({ label: endpoint.label, client: createPublicClient({ transport: endpoint.transport, cacheTime: 0 }) as PublicClient })),
    );
  }
  // Checks run in parallel; the first problem found stops start-up.
  await Promise.all(
    config.networks.map(async (network) => {
      const client = clients.get(network.network)!;
      const relayers = config.relayerKeys.map((key) => privateKeyToAccount(key).address);
      const several = endpoints.get(network.network)!;
      if (several.length > 1) {
        startupInspections.set(network.network, await checkEndpoints(config, network, several, relayers, logger));
      } else {
        const inspection = await inspectNetwork({
          client,
          config: network,
          relayers,
          relayerMinBalanceWei: config.relayerMinBalanceWei,
          maxBlockAgeSeconds: 0,
          rpcTimeoutMs: config.rpcTimeoutMs,
        });
        const first = inspection.problems[0];
        if (first) throw new StartupError(`${network.network}: ${first.variable}: ${first.message}`);
        startupInspections.set(network.network, inspection);
      }
      const fees = await settleFeeCap(client, network, config.lifecycle.maxFeePerGasWei);
      logger.info(
        { network: network.network, capGwei: formatGwei(fees.capWei), followsChain: fees.followsChain, baseFeeGwei: fees.chain.baseFeeWei === undefined ? null : formatGwei(fees.chain.baseFeeWei), gasPriceGwei: formatGwei(fees.chain.gasPriceWei) },
        fees.followsChain ? "fee cap: follows the chain (MAX_FEE_PER_GAS_GWEI unset)" : "fee cap: MAX_FEE_PER_GAS_GWEI",
      );
      const relayer = new Relayer({
        client,
        chainId: network.chainId,
        privateKeys: config.relayerKeys,
        maxFeePerGasWei: fees.capWei,
        replaceAfterSeconds: config.lifecycle.replaceAfterSeconds,
        pollingIntervalMs: config.pollingIntervalMs,
        onEvent: (event) => relayerEvent(network.network, event, metrics, logger),
        // Its keys send only under the ledger's leases (coordination gives and takes them back).
        leased: true,
      });
      const domain = await readDomain(client, network.token);
      networks.set(network.network, {
        config: network,
        client,
        relayer,
        state: new ChainState(client, network.token),
        paymentReads: paymentReads({
          client,
          chainId: network.chainId,
          logLookbackBlocks: config.logLookbackBlocks,
          // The index knows the block of every spend since the token's deployment (when it can vouch for it).
          index: () => networks.get(network.network)?.index,
        }),
        separator: domainSeparator({ ...domain, chainId: network.chainId, verifyingContract: network.token }),
      });
    }),
  ).catch((error: unknown) => {
    closeTransports();
    throw error;
  });
  return { networks, rpcOf, startupInspections, closeTransports };
}
