import { toHex, type Account, type Address, type Hex, type LocalAccount } from "viem";
import { canonicalNetwork, NETWORKS } from "../protocol/networks.js";
import { encodePaymentHeader } from "../protocol/header.js";
import { transferAuthorizationTypedData, type TokenDomain } from "../protocol/eip3009.js";
import {
  parsePaymentRequirements,
  addressSchema,
  describeZodError,
  settleResponseSchema,
  type PaymentRequirementsInput,
  type SettleResponse,
} from "../protocol/schemas.js";
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
  const token = addressSchema.safeParse(requirements.asset);
  if (!token.success) {
    throw new PaymentError("invalid_parameters", "invalid payment requirements", { details: `asset ${describeZodError(token.error)}` });
  }
  const nonce = parameters.nonce ?? randomNonce();
  if (!/^0x[0-9a-fA-F]{64}$/.test(nonce)) {
    throw new PaymentError("invalid_parameters", "nonce must be 0x-prefixed 32 bytes", { details: nonce });
  }

  const canonical = canonicalNetwork(requirements.network);
  const info = canonical ? NETWORKS[canonical] : undefined;
  const chainId = parameters.chainId ?? info?.chainId;
  const domainNameVersion = parameters.domain ?? info?.domain;
  if (chainId === undefined || domainNameVersion === undefined) {
    throw new PaymentError("unknown_network", `unknown network "${requirements.network}"`, {
      details: "pass chainId and domain to sign for it",
    });
  }

  const now = parameters.now ?? Math.floor(Date.now() / 1000);
  const validAfter = BigInt(parameters.validAfter ?? 0);
  const validBefore = BigInt(
    parameters.validBefore ?? now + Math.max(DEFAULT_VALIDITY_SECONDS, requirements.maxTimeoutSeconds ?? 0),
  );

  const from = signerAddress(parameters.signer);
  const domain: TokenDomain = {
    name: domainNameVersion.name,
    version: domainNameVersion.version,
    chainId,
    verifyingContract: token.data,
  };
  const typedData = transferAuthorizationTypedData(domain, {
    from,
    to: requirements.payTo,
    value: BigInt(requirements.maxAmountRequired),
    validAfter,
    validBefore,
    nonce,
  });
  const signature = await sign(parameters.signer, typedData);

  return encodePaymentHeader({
    network: requirements.network,
    from,
    to: requirements.payTo,
    value: requirements.maxAmountRequired,
    validAfter,
    validBefore,
    nonce,
    signature,
    asset: requirements.asset,
  });
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
  const text = headerValue.trim();
  let json: unknown;
  try {
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text)) throw new Error("not base64");
    json = JSON.parse(Buffer.from(text, "base64").toString("utf8"));
  } catch (error) {
    throw new PaymentError("malformed_payment_response", "X-PAYMENT-RESPONSE is not base64 JSON", { cause: error });
  }
  const parsed = settleResponseSchema.safeParse(json);
  if (!parsed.success) {
    throw new PaymentError("malformed_payment_response", "X-PAYMENT-RESPONSE is not a settle answer", {
      details: describeZodError(parsed.error),
    });
  }
  return parsed.data;
}
