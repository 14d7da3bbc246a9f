import type { Address, Hex, LocalAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { CRONOS_MAINNET, CRONOS_TESTNET, NETWORK_NAMES, NETWORKS, canonicalNetwork, type NetworkName } from "../protocol/networks.js";
import { supportedResponseSchema } from "../protocol/schemas.js";
import { createChainReader, type ChainReader } from "./chain.js";
import { createFacilitatorHttp, PATHS, type FacilitatorHttp } from "./http.js";
import { KitError } from "../protocol/errors.js";

/** One network of the facilitator under test, with what the run knows about it. */
export interface Target {
  /** The canonical network. */
  network: NetworkName;
  chainId: number;
  /** The USDC.e contract the facilitator must accept on this network. */
  token: Address;
  /** The token's EIP-712 domain (read from the chain when an RPC is given). */
  domain: { name: string; version: string };
  /** The network's JSON-RPC, when given. */
  chain?: ChainReader;
  /** A funded buyer, when given. Its key never leaves this object. */
  buyer?: LocalAccount;
  /** Who payments go to: `--pay-to`, else the buyer itself (a payment to oneself moves nothing), else a fixed address. */
  payTo: Address;
  /** The facilitator's relayer addresses, when known: a settlement must be sent by one of them. */
  relayers?: readonly Address[];
}

/** The smallest payment: 1 base unit = 0.000001 USDC.e. */
export const SMALLEST_AMOUNT = 1n;

/** Options of {@link createTarget}: one network, and what the run may use on it. */
export interface TargetOptions {
  /** The network: `cronos-testnet`, `cronos-mainnet` (or `cronos`), `testnet`/`mainnet`, or CAIP-2 `eip155:338` / `eip155:25`. */
  network: string;
  /**
   * The network's JSON-RPC: with it the on-chain checks run (the chain's clock, used nonces, a
   * settlement's receipt, events and balances), and the token's EIP-712 domain is read from the chain.
   * Its chain id must be the network's.
   */
  rpcUrl?: string;
  /** A funded buyer's private key (hex), to sign payments; with `settle`, real payments of 1 unit. Never printed. */
  buyerKey?: Hex;
  /** Who the checks' payments pay; default the buyer itself (a payment to oneself moves nothing), else a fresh address. */
  payTo?: Address;
  /** The facilitator's relayer addresses, when known: a settlement must then be sent by one of them. */
  relayers?: readonly Address[];
}

/** A {@link TargetOptions} value that cannot be used; `option` names it, the message says why (never a key). */
export class TargetError extends KitError<"invalid_target"> {
  override name = "TargetError";
  constructor(
    readonly option: keyof TargetOptions,
    /** What is wrong, without the option's name (the CLI names its flag instead). */
    readonly detail: string,
  ) {
    super("invalid_target", `${option}: ${detail}`);
  }
}

/** A network as a person may name it: canonical, `cronos`, `testnet`/`mainnet`, or CAIP-2 `eip155:<chain id>`. */
export function parseNetwork(text: string): NetworkName | undefined {
  const caip = /^eip155:(\d+)$/.exec(text.trim());
  if (caip) return NETWORK_NAMES.find((name) => NETWORKS[name].chainId === Number(caip[1]));
  const word = text.trim().toLowerCase();
  if (word === "testnet") return CRONOS_TESTNET;
  if (word === "mainnet") return CRONOS_MAINNET;
  return canonicalNetwork(word);
}

/**
 * A {@link Target} for `runConformance`: the network's USDC.e and domain, and, when given, its RPC
 * (checked: its chain id must be the network's; the domain is then read from the token) and buyer.
 * Rejects with a {@link TargetError} naming the option.
 */
export async function createTarget(options: TargetOptions): Promise<Target> {
  const network = parseNetwork(options.network);
  if (!network) throw new TargetError("network", `unknown network ${JSON.stringify(options.network)}; use cronos-testnet, cronos-mainnet, eip155:338 or eip155:25`);
  const info = NETWORKS[network];
  let chain: ChainReader | undefined;
  let domain = { ...info.domain };
  if (options.rpcUrl !== undefined) {
    chain = createChainReader(options.rpcUrl);
    let chainId: number;
    try {
      chainId = await chain.chainId();
      domain = await chain.domain(info.token);
    } catch (error) {
      const message = (error as { shortMessage?: string }).shortMessage ?? (error as Error).message;
      throw new TargetError("rpcUrl", `${chain.label}: cannot read ${network}'s chain id and USDC.e (${info.token}) domain: ${message.split("\n")[0]}`);
    }
    if (chainId !== info.chainId) throw new TargetError("rpcUrl", `${chain.label}: the RPC reports chain id ${chainId}, ${network} is ${info.chainId}`);
  }
  let buyer: LocalAccount | undefined;
  if (options.buyerKey !== undefined) {
    try {
      buyer = privateKeyToAccount(options.buyerKey);
    } catch {
      throw new TargetError("buyerKey", "not a 32-byte hex private key (its content is not shown)");
    }
  }
  const payTo = options.payTo ?? buyer?.address ?? privateKeyToAccount(generatePrivateKey()).address;
  return {
    network,
    chainId: info.chainId,
    token: info.token,
    domain,
    payTo,
    ...(chain ? { chain } : {}),
    ...(buyer ? { buyer } : {}),
    ...(options.relayers ? { relayers: options.relayers } : {}),
  };
}

/** The networks a facilitator lists in its supported answer (those the kit knows), in the kit's order; none when it cannot be read. */
export async function supportedNetworks(http: FacilitatorHttp): Promise<NetworkName[]> {
  const answer = await http.get(PATHS.supported);
  const parsed = supportedResponseSchema.safeParse(answer.json);
  const listed = parsed.success ? parsed.data.kinds.map((kind) => parseNetwork(kind.network)) : [];
  return NETWORK_NAMES.filter((name) => listed.includes(name));
}

/** Options of {@link createTargets}. */
export interface TargetsOptions extends Partial<TargetOptions> {
  /** The facilitator's base URL: without `network`, the networks to check are those its supported answer lists. */
  facilitatorUrl: string;
  /** Called with a line when the networks cannot be read from supported (cronos-testnet is checked then). */
  onNote?: (line: string) => void;
  fetch?: typeof fetch;
}

/**
 * The targets of a run against the facilitator at `facilitatorUrl`, as `cronos-x402 conformance
 * --facilitator URL` builds them: `network`, else every network its supported answer lists (else
 * cronos-testnet). `rpcUrl`, `buyerKey` and `payTo` belong to one network: name it with `network`.
 */
export async function createTargets(options: TargetsOptions): Promise<Target[]> {
  const { facilitatorUrl, onNote, fetch: fetchImpl, network, ...attached } = options;
  if (network === undefined) {
    const given = (["rpcUrl", "buyerKey", "payTo"] as const).find((option) => attached[option] !== undefined);
    if (given) throw new TargetError("network", `name the network that ${given} is for (e.g. network: "cronos-testnet")`);
  }
  let networks: string[] = network === undefined ? [] : [network];
  if (network === undefined) {
    try {
      networks = await supportedNetworks(createFacilitatorHttp({ baseUrl: facilitatorUrl, timeoutMs: 30_000, ...(fetchImpl ? { fetch: fetchImpl } : {}) }));
      if (networks.length === 0) onNote?.(`supported lists no Cronos network this tool knows; checking ${CRONOS_TESTNET} (name the network to check: --network, or the network option)`);
    } catch (error) {
      onNote?.(`cannot read supported (${(error as Error).message}); checking ${CRONOS_TESTNET} (name the network to check: --network, or the network option)`);
    }
    if (networks.length === 0) networks = [CRONOS_TESTNET];
  }
  return Promise.all(networks.map((name) => createTarget({ network: name, ...attached })));
}
