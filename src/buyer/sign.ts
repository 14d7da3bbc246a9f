import type { z } from "zod";
import { toHex, type Account, type Address, type Hex, type LocalAccount } from "viem";
import { canonicalNetwork, NETWORKS } from "../protocol/networks.js";
import { decodeBase64Json, encodePaymentHeader } from "../protocol/header.js";
import { transferAuthorizationTypedData, type TokenDomain } from "../protocol/eip3009.js";
import {
  parsePaymentRequirements,
  addressSchema,
  describeZodError,
  settleResponseSchema,
  type PaymentRequirementsInput,
  type SettleResponse,
} from "../protocol/schemas.js";
import {
  networkOfCaip2,
  PAYMENT_ID_PATTERN,
  PAYMENT_IDENTIFIER,
  v2RequirementsSchema,
  v2SettleResponseSchema,
  X402_V2_VERSION,
  type SignedV2Payment,
  type V2Resource,
  type V2SettleResponse,
} from "../protocol/x402v2.js";
import { PaymentError } from "./errors.js";

/**
 * A wallet that signs with a known account: structurally a viem `WalletClient` created with `account`
 * (a JSON-RPC account signs through `eth_signTypedData_v4`, a local one signs in process).
 */
export interface WalletSigner {
  readonly account: Account | undefined;
  signTypedData(parameters: ReturnType<typeof transferAuthorizationTypedData> & { account: Account }): Promise<Hex>;
}

/** Who signs the authorization: a viem `LocalAccount` (e.g. `privateKeyToAccount(key)`) or a wallet client with an account. */
export type PaymentSigner = LocalAccount | WalletSigner;

/** Parameters of {@link createPaymentHeader}. */
export interface CreatePaymentHeaderParameters {
  signer: PaymentSigner;
  /** The seller's requirements: pays `maxAmountRequired` of `asset` to `payTo` on `network`. */
  requirements: PaymentRequirementsInput;
  /** Chain id of the EIP-712 domain. Default: the network's (338 for cronos-testnet, 25 for cronos-mainnet). */
  chainId?: number;
  /** Token EIP-712 domain name and version. Default: the network's (`"Bridged USDC (Stargate)"`, `"1"` / `"2"`). */
  domain?: { name: string; version: string };
  /** Unix seconds. Default 0, as the official client. */
  validAfter?: number | bigint;
  /**
   * Unix seconds. Default `now + max(3600, requirements.maxTimeoutSeconds)`: one hour as the official
   * client, but never shorter than the time the seller says it may take.
   */
  validBefore?: number | bigint;
  /** 32-byte hex nonce. Default: 32 random bytes. */
  nonce?: Hex;
  /** Current unix time in seconds, for the `validBefore` default. Default: the system clock. */
  now?: number;
}

/** The official client's validity window. */
export const DEFAULT_VALIDITY_SECONDS = 3600;

/** 32 cryptographically random bytes as 0x-prefixed hex: a fresh EIP-3009 nonce. */
export function randomNonce(): Hex {
  return toHex(globalThis.crypto.getRandomValues(new Uint8Array(32)));
}

/**
 * Signs an EIP-3009 `TransferWithAuthorization` for `requirements` and returns the base64 `X-PAYMENT`
 * value in the Cronos layout, byte for byte as the official client (`@crypto.com/facilitator-client`)
 * writes it: `to` is the checksummed `payTo`, `asset` is kept as the seller wrote it, `value` is
 * `maxAmountRequired`, and the header's `network` is the requirements' (aliases such as `cronos` kept).
 *
 * @throws {PaymentError} `invalid_parameters`, `unknown_network` (a network other than Cronos without
 *   `chainId` and `domain`), `no_account` (a wallet client without account).
 */
export async function createPaymentHeader(parameters: CreatePaymentHeaderParameters): Promise<string> {
  const parsed = parsePaymentRequirements(parameters.requirements);
  if (!parsed.ok) throw new PaymentError("invalid_parameters", "invalid payment requirements", { details: parsed.problem });
  const { requirements } = parsed;
  const canonical = canonicalNetwork(requirements.network);
  const info = canonical ? NETWORKS[canonical] : undefined;
  const signed = await signAuthorization(parameters, {
    network: requirements.network,
    payTo: requirements.payTo,
    asset: requirements.asset,
    amount: requirements.maxAmountRequired,
    maxTimeoutSeconds: requirements.maxTimeoutSeconds,
    chainId: info?.chainId,
    domain: info?.domain,
  });
  return encodePaymentHeader({
    network: requirements.network,
    ...signed,
    value: requirements.maxAmountRequired,
    asset: requirements.asset,
  });
}

/** Parameters of {@link createV2PaymentPayload}: the chosen offer of an x402 v2 402 and who signs it. */
export interface CreateV2PaymentPayloadParameters extends Omit<CreatePaymentHeaderParameters, "requirements"> {
  /** One entry of the 402's `accepts`, exactly as the seller sent it (it is echoed as `accepted`). */
  requirements: Record<string, unknown>;
  /** The 402's `resource`, echoed. */
  resource?: V2Resource;
  /**
   * An idempotency key (x402 `payment-identifier`, 16 to 128 of A-Z a-z 0-9 _ -): a facilitator that honours
   * it answers a repeat of this payment with the same transaction, and refuses another payment under it.
   */
  paymentId?: string;
  /**
   * The 402's `extensions`, echoed in the payment (as `@x402/*` buyers do). Where they declare
   * `payment-identifier` and no `paymentId` is given, a fresh id is added.
   */
  extensions?: Record<string, unknown>;
}

/**
 * Signs an EIP-3009 `TransferWithAuthorization` for one x402 v2 offer and returns the payment the
 * `@x402/*` packages send in `PAYMENT-SIGNATURE` (base64 it with `encodeBase64Json`):
 * `{x402Version: 2, resource, accepted, payload: {signature, authorization}}`, numbers as decimal
 * strings. The chain id comes from the CAIP-2 network (`eip155:338`), the token's EIP-712 domain from
 * `extra.name` / `extra.version` (else the Cronos network's).
 *
 * @throws {PaymentError} `invalid_parameters` (not v2 requirements, or not an `eip155` network),
 *   `unknown_network` (no domain known), `no_account`.
 */
export async function createV2PaymentPayload(parameters: CreateV2PaymentPayloadParameters): Promise<SignedV2Payment> {
  const parsed = v2RequirementsSchema.safeParse(parameters.requirements);
  if (!parsed.success) {
    throw new PaymentError("invalid_parameters", "invalid x402 v2 payment requirements", { details: describeZodError(parsed.error) });
  }
  const requirements = parsed.data;
  const chain = /^eip155:(\d{1,15})$/.exec(requirements.network);
  if (!chain) throw new PaymentError("invalid_parameters", `not an EVM network: "${requirements.network}"`);
  if (parameters.paymentId !== undefined && !PAYMENT_ID_PATTERN.test(parameters.paymentId)) {
    throw new PaymentError("invalid_parameters", "paymentId must be 16 to 128 characters of A-Z a-z 0-9 _ -");
  }
  const known = networkOfCaip2(requirements.network);
  const extra = requirements.extra ?? {};
  const domain =
    typeof extra.name === "string" && typeof extra.version === "string" ? { name: extra.name, version: extra.version } : known && NETWORKS[known].domain;
  const signed = await signAuthorization(parameters, {
    network: requirements.network,
    payTo: requirements.payTo,
    asset: requirements.asset,
    amount: requirements.amount,
    maxTimeoutSeconds: requirements.maxTimeoutSeconds,
    chainId: Number(chain[1]),
    domain,
  });
  const { signature, ...authorization } = signed;
  return {
    x402Version: X402_V2_VERSION,
    ...(parameters.resource ? { resource: parameters.resource } : {}),
    accepted: parameters.requirements,
    payload: {
      signature,
      authorization: {
        ...authorization,
        value: requirements.amount,
        validAfter: authorization.validAfter.toString(),
        validBefore: authorization.validBefore.toString(),
      },
    },
    ...extensionsOf(parameters),
  };
}

/** The payment's `extensions`: the 402's, echoed, with the payment identifier's `id` set when there is one (given, or declared and made here). */
function extensionsOf(parameters: CreateV2PaymentPayloadParameters): { extensions?: Record<string, unknown> } {
  const extensions: Record<string, unknown> = { ...(parameters.extensions ?? {}) };
  const declared = extensions[PAYMENT_IDENTIFIER];
  const id = parameters.paymentId ?? (declared !== undefined ? `pay_${toHex(crypto.getRandomValues(new Uint8Array(16))).slice(2)}` : undefined);
  if (id !== undefined) {
    const declaration = typeof declared === "object" && declared !== null ? (declared as { info?: Record<string, unknown> }) : {};
    extensions[PAYMENT_IDENTIFIER] = { ...declaration, info: { required: false, ...(declaration.info ?? {}), id } };
  }
  return Object.keys(extensions).length > 0 ? { extensions } : {};
}

/** What one authorization pays, whichever dialect carries it. */
interface AuthorizationTerms {
  network: string;
  payTo: Address;
  asset: string;
  amount: string;
  maxTimeoutSeconds?: number;
  /** The chain id and token domain the network implies, overridden by the caller's `chainId` / `domain`. */
  chainId?: number;
  domain?: { name: string; version: string };
}

/** Signs one `TransferWithAuthorization`: the fields both layouts carry, with the signature. */
async function signAuthorization(parameters: Omit<CreatePaymentHeaderParameters, "requirements">, terms: AuthorizationTerms) {
  const token = addressSchema.safeParse(terms.asset);
  if (!token.success) {
    throw new PaymentError("invalid_parameters", "invalid payment requirements", { details: `asset ${describeZodError(token.error)}` });
  }
  const nonce = parameters.nonce ?? randomNonce();
  if (!/^0x[0-9a-fA-F]{64}$/.test(nonce)) {
    throw new PaymentError("invalid_parameters", "nonce must be 0x-prefixed 32 bytes", { details: nonce });
  }
  const chainId = parameters.chainId ?? terms.chainId;
  const domainNameVersion = parameters.domain ?? terms.domain;
  if (chainId === undefined || domainNameVersion === undefined) {
    throw new PaymentError("unknown_network", `unknown network "${terms.network}"`, {
      details: "pass chainId and domain to sign for it",
    });
  }

  const now = parameters.now ?? Math.floor(Date.now() / 1000);
  const validAfter = BigInt(parameters.validAfter ?? 0);
  const validBefore = BigInt(parameters.validBefore ?? now + Math.max(DEFAULT_VALIDITY_SECONDS, terms.maxTimeoutSeconds ?? 0));

  const from = signerAddress(parameters.signer);
  const domain: TokenDomain = {
    name: domainNameVersion.name,
    version: domainNameVersion.version,
    chainId,
    verifyingContract: token.data,
  };
  const typedData = transferAuthorizationTypedData(domain, {
    from,
    to: terms.payTo,
    value: BigInt(terms.amount),
    validAfter,
    validBefore,
    nonce,
  });
  const signature = await sign(parameters.signer, typedData);
  return { from, to: terms.payTo, value: terms.amount, validAfter, validBefore, nonce, signature };
}

function isWalletSigner(signer: PaymentSigner): signer is WalletSigner {
  return "account" in signer;
}

function walletAccount(signer: WalletSigner): Account {
  if (!signer.account) {
    throw new PaymentError("no_account", "the wallet client has no account; create it with `account` or pass a LocalAccount");
  }
  return signer.account;
}

function signerAddress(signer: PaymentSigner): Address {
  return isWalletSigner(signer) ? walletAccount(signer).address : signer.address;
}

function sign(signer: PaymentSigner, typedData: ReturnType<typeof transferAuthorizationTypedData>): Promise<Hex> {
  if (isWalletSigner(signer)) return signer.signTypedData({ ...typedData, account: walletAccount(signer) });
  return signer.signTypedData(typedData);
}

/**
 * Decodes an `X-PAYMENT-RESPONSE` value: base64 JSON of the facilitator's settle answer.
 *
 * @throws {PaymentError} `malformed_payment_response` when it is not base64 JSON of a settle answer.
 */
export function decodePaymentResponse(headerValue: string): SettleResponse {
  return decodeSettleHeader("X-PAYMENT-RESPONSE", headerValue, settleResponseSchema);
}

/**
 * Decodes a `PAYMENT-RESPONSE` value (x402 v2): base64 JSON of the facilitator's v2 settle answer
 * `{success, payer, transaction, network}`.
 *
 * @throws {PaymentError} `malformed_payment_response` when it is not base64 JSON of a v2 settle answer.
 */
export function decodeV2PaymentResponse(headerValue: string): V2SettleResponse {
  return decodeSettleHeader("PAYMENT-RESPONSE", headerValue, v2SettleResponseSchema);
}

function decodeSettleHeader<S extends z.ZodType>(name: string, value: string, schema: S): z.output<S> {
  const decoded = decodeBase64Json(value);
  if (!decoded.ok) throw new PaymentError("malformed_payment_response", `${name} is not base64 JSON`);
  const parsed = schema.safeParse(decoded.json);
  if (!parsed.success) {
    throw new PaymentError("malformed_payment_response", `${name} is not a settle answer`, {
      details: describeZodError(parsed.error),
    });
  }
  return parsed.data;
}
