import { custom, parseSignature, toHex, type Address, type Hex, type LocalAccount, type Transport } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { ACCOUNT_INDEX, buyerIndexes, localAccount } from "../../src/harness/accounts.js";
import { loadConfig, type FacilitatorConfig } from "../../src/facilitator/config/index.js";
import { createFacilitator, type Facilitator, type StartFacilitatorOptions } from "../../src/facilitator/server.js";
import { startFacilitator, type RunningFacilitator } from "../../src/facilitator/start.js";
import type { Logger } from "../../src/facilitator/logger.js";
import { encodePaymentHeader } from "../../src/protocol/header.js";
import { transferAuthorizationTypedData } from "../../src/protocol/eip3009.js";
import type { NetworkInfo, NetworkName } from "../../src/protocol/networks.js";
import { recordRpc } from "./rpc.js";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { closeAfter, once } from "./teardown.js";
import { openChain } from "./token.js";

// Helpers only: importing this file runs nothing.

/** Hardhat's public test keys (LOCAL-ONLY), in the harness's roles: #1 the seller, #9 the relayer, #2 and #3 buyers. */
export const HARDHAT_KEYS = {
  seller: localAccount(ACCOUNT_INDEX.seller).privateKey,
  relayer: localAccount(ACCOUNT_INDEX.relayer).privateKey,
  buyer: localAccount(buyerIndexes(2)[0]!).privateKey,
  buyer2: localAccount(buyerIndexes(2)[1]!).privateKey,
  /** #8: a second relayer key. */
  secondRelayer: localAccount(8).privateKey,
} as const satisfies Record<string, Hex>;

export type Chain = Awaited<ReturnType<typeof openChain>>;

/** The facilitator settings of the tests' facilitators: no rate limits, fast polling, no caches. */
export const TEST_ENV = {
  RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer,
  RATE_LIMIT_VERIFY_PER_MINUTE: "0",
  RATE_LIMIT_SETTLE_PER_MINUTE: "0",
  RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "0",
  RATE_LIMIT_PUBLIC_PER_MINUTE: "0",
  MAX_CONNECTIONS_PER_CLIENT: "0",
  POLLING_INTERVAL_MS: "20",
  HEAD_CACHE_MS: "0",
  HEALTH_CACHE_MS: "0",
};

/**
 * A facilitator assembled by `createFacilitator` (not listening), closed with the scope that opens it
 * (test/helpers/teardown.ts); its `close` runs once, however often it is called.
 */
export async function createTestFacilitator(config: FacilitatorConfig, options: StartFacilitatorOptions = {}): Promise<Facilitator> {
  const facilitator = await createFacilitator(config, options);
  const close = once(facilitator.close.bind(facilitator));
  facilitator.close = close;
  // A settle still in flight when its test ends gets a second to finish.
  closeAfter("facilitator", () => close(1_000));
  return facilitator;
}

/** A listening facilitator (`startFacilitator`), closed with the scope that opens it; its `close` runs once. */
export async function startTestFacilitator(config: FacilitatorConfig, options: StartFacilitatorOptions = {}): Promise<RunningFacilitator> {
  const running = await startFacilitator(config, options);
  // Its close is idempotent; a test that closes it with a grace of its own closes it first.
  closeAfter("listening facilitator", () => running.close(1_000));
  running.facilitator.close = once(running.facilitator.close.bind(running.facilitator));
  return running;
}

/**
 * Opens a local chain and a facilitator on it (not listening; use supertest on `app`). `rpc` records
 * the facilitator's chain requests from the end of its start-up on. Both are closed with the scope that
 * opens them (test/helpers/teardown.ts); `close` closes them sooner.
 */
export async function openFacilitator(
  network: NetworkName = "cronos-testnet",
  env: Record<string, string> = {},
  options: StartFacilitatorOptions = {},
) {
  const chain = await openChain(network);
  const config: FacilitatorConfig = loadConfig({ ...TEST_ENV, ...env }, { embedded: [network] });
  const rpc = recordRpc(chain.connection.provider);
  const facilitator = await createTestFacilitator(config, { transports: { [network]: custom(rpc.provider) }, ...options });
  rpc.reset();
  const buyer = privateKeyToAccount(HARDHAT_KEYS.buyer);
  const seller = privateKeyToAccount(HARDHAT_KEYS.seller);
  const close = once(async () => {
    await facilitator.close();
    await chain.close();
  });
  return { chain, config, facilitator, app: facilitator.app, buyer, seller, network, rpc, close };
}

/** Options of {@link makePayment}. */
export interface MakePaymentOptions {
  network?: string;
  token?: Address;
  payer?: LocalAccount;
  payTo?: Address;
  amount?: bigint;
  validAfter?: bigint;
  validBefore?: bigint;
  nonce?: Hex;
  chainId?: number;
  domainVersion?: string;
  /** Replace the signature after signing. */
  signature?: Hex;
  /** Sign a different value than the header carries. */
  signedValue?: bigint;
  /** Sign the payer's very message with this key instead of the payer's. */
  signer?: LocalAccount;
}

/** Signs an authorization and builds a verify/settle request body for it. */
export async function makePayment(
  chain: { publicClient: { getBlock(): Promise<{ timestamp: bigint }> }; info: NetworkInfo; token: Address },
  options: MakePaymentOptions = {},
) {
  const payer = options.payer ?? privateKeyToAccount(HARDHAT_KEYS.buyer);
  const payTo = options.payTo ?? privateKeyToAccount(HARDHAT_KEYS.seller).address;
  const amount = options.amount ?? 1_000_000n;
  const latest = await chain.publicClient.getBlock();
  const message = {
    from: payer.address,
    to: payTo,
    value: options.signedValue ?? amount,
    validAfter: options.validAfter ?? 0n,
    validBefore: options.validBefore ?? latest.timestamp + 3600n,
    nonce: options.nonce ?? toHex(crypto.getRandomValues(new Uint8Array(32))),
  };
  const signature =
    options.signature ??
    (await (options.signer ?? payer).signTypedData(
      transferAuthorizationTypedData(
        {
          name: chain.info.domain.name,
          version: options.domainVersion ?? chain.info.domain.version,
          chainId: options.chainId ?? chain.info.chainId,
          verifyingContract: options.token ?? chain.token,
        },
        message,
      ),
    ));
  const network = options.network ?? chain.info.network;
  const paymentHeader = encodePaymentHeader({
    network,
    from: message.from,
    to: message.to,
    value: amount.toString(),
    validAfter: message.validAfter,
    validBefore: message.validBefore,
    nonce: message.nonce,
    signature,
    asset: options.token ?? chain.token,
  });
  const paymentRequirements = {
    scheme: "exact",
    network,
    payTo,
    asset: options.token ?? chain.token,
    description: "a paid resource",
    mimeType: "application/json",
    maxAmountRequired: amount.toString(),
    maxTimeoutSeconds: 300,
  };
  return { body: { x402Version: 1, paymentHeader, paymentRequirements }, message, signature, payer, payTo };
}

/**
 * Uses one of the buyer's authorizations on chain directly (sent by the chain's deployer, not by a facilitator),
 * for 1,000 units under `nonce`: its AuthorizationUsed log is what a facilitator started later must know of.
 */
export async function useAuthorizationOnChain(
  chain: Parameters<typeof makePayment>[0] & { contract: { write: { transferWithAuthorization(args: readonly [Address, Address, bigint, bigint, bigint, Hex, number, Hex, Hex]): Promise<unknown> } } },
  nonce: Hex,
): Promise<void> {
  const { message, signature } = await makePayment(chain, { nonce, amount: 1_000n });
  const { r, s, v } = parseSignature(signature);
  await chain.contract.write.transferWithAuthorization([message.from, message.to, message.value, message.validAfter, message.validBefore, message.nonce, Number(v), r, s]);
}

/**
 * Sends a signed authorization's `transferWithAuthorization` from the payer's own wallet (the chain's first
 * buyer), as a payer spending its own nonce would; `fees` e.g. a front-runner's tip. Resolves with its hash.
 */
export function sendAuthorization(chain: Chain, made: Pick<Awaited<ReturnType<typeof makePayment>>, "message" | "signature">, fees: object = {}): Promise<Hex> {
  const m = made.message;
  const { r, s, v } = parseSignature(made.signature);
  return chain.buyers[0]!.writeContract({
    address: chain.token,
    abi: tokenAbi,
    functionName: "transferWithAuthorization",
    args: [m.from, m.to, m.value, m.validAfter, m.validBefore, m.nonce, Number(v), r, s],
    ...fees,
  });
}

/**
 * Opens a local chain and a listening facilitator on it (service and metrics listeners on 127.0.0.1,
 * free ports). `transportOf` replaces the chain's own transport (e.g. one that counts requests).
 */
export async function startFacilitatorOnChain(
  env: Record<string, string> = {},
  options: StartFacilitatorOptions = {},
  transportOf: (chain: Chain) => Transport = (chain) => custom(chain.connection.provider),
) {
  const network: NetworkName = "cronos-testnet";
  const chain = await openChain(network);
  const config = loadConfig({ ...TEST_ENV, PORT: "0", METRICS_PORT: "0", ...env }, { embedded: [network] });
  const running = await startTestFacilitator(config, { ...options, transports: { [network]: transportOf(chain) } });
  return { chain, config, running };
}

/** A log line as a {@link recordingLogger} keeps it. */
export interface RecordedLine {
  level: "info" | "warn" | "error" | "debug";
  fields: Record<string, unknown>;
  message?: string;
}

/** A facilitator logger that keeps every line, to assert on. */
export function recordingLogger(): { logger: Logger; lines: RecordedLine[] } {
  const lines: RecordedLine[] = [];
  const at = (level: RecordedLine["level"]) => (fields: object, message?: string) => lines.push({ level, fields: fields as Record<string, unknown>, message });
  const logger: Logger = { info: at("info"), warn: at("warn"), error: at("error"), debug: at("debug"), child: () => logger };
  return { logger, lines };
}

/** The x402 v2 (CAIP-2) id of each Cronos network (and the alias `cronos`), written out here rather than taken from src/. */
export const CAIP2 = { "cronos-testnet": "eip155:338", "cronos-mainnet": "eip155:25", cronos: "eip155:25" } as const;

/**
 * The same payment as {@link makePayment} made, as an x402 v2 verify/settle body: what `@x402/core`'s
 * `HTTPFacilitatorClient` posts (`accepted` is the requirements, numbers are decimal strings).
 */
export function v2BodyOf(made: Awaited<ReturnType<typeof makePayment>>) {
  const { body, message, signature } = made;
  const r = body.paymentRequirements;
  const version = r.network === "cronos-testnet" ? "1" : "2";
  const paymentRequirements = {
    scheme: r.scheme,
    network: (CAIP2 as Record<string, string>)[r.network] ?? r.network,
    asset: r.asset,
    amount: r.maxAmountRequired,
    payTo: r.payTo,
    maxTimeoutSeconds: r.maxTimeoutSeconds,
    extra: { name: "Bridged USDC (Stargate)", version },
  };
  const authorization = {
    from: message.from,
    to: message.to,
    value: r.maxAmountRequired,
    validAfter: String(message.validAfter),
    validBefore: String(message.validBefore),
    nonce: message.nonce,
  };
  return {
    x402Version: 2,
    paymentPayload: { x402Version: 2, resource: { url: "http://127.0.0.1/paid" }, accepted: paymentRequirements, payload: { signature, authorization } },
    paymentRequirements,
  };
}

/** Cancels `nonce` for the buyer on chain (`cancelAuthorization`, signed with EIP-712), as a payer may. */
export async function cancelAuthorization(opened: Awaited<ReturnType<typeof openFacilitator>>, nonce: Hex): Promise<void> {
  const { chain, buyer } = opened;
  const cancel = await buyer.signTypedData({
    domain: { name: chain.info.domain.name, version: chain.info.domain.version, chainId: chain.info.chainId, verifyingContract: chain.token },
    types: { CancelAuthorization: [{ name: "authorizer", type: "address" }, { name: "nonce", type: "bytes32" }] },
    primaryType: "CancelAuthorization",
    message: { authorizer: buyer.address, nonce },
  });
  await chain.contract.write.cancelAuthorization([buyer.address, nonce, cancel]);
}

/**
 * A facilitator on the chain of `opened` whose RPC can be made to fail (connection refused) with
 * `fail()`, after its start-up checks passed.
 */
export async function openFlakyFacilitator(opened: Awaited<ReturnType<typeof openFacilitator>>) {
  let failing = false;
  const provider = opened.chain.connection.provider;
  const flaky = custom({
    request: async (args: { method: string; params?: unknown }) => {
      if (failing) throw new Error("connect ECONNREFUSED 127.0.0.1:1");
      return provider.request(args as never);
    },
  });
  const config = loadConfig({ RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, RATE_LIMIT_VERIFY_PER_MINUTE: "0", RATE_LIMIT_SETTLE_PER_MINUTE: "0" }, { embedded: ["cronos-testnet"] });
  const { app } = await createTestFacilitator(config, { transports: { "cronos-testnet": flaky } });
  return { app, fail: () => void (failing = true) };
}
