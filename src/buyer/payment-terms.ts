// A payment described by its terms (network, payee, amount, token) or by a 402's offer, changed on purpose where a
// test wants a refusal (another amount, payee, network, EIP-712 domain, a signature by another key), and signed by
// the buyer's one signer (./sign.ts). What `cronos-x402 sign` / `pay` and the harness's POST /sign share.
import type { Address, Hex, LocalAccount } from "viem";
import { decodeBase64Json } from "../protocol/header.js";
import { canonicalNetwork, NETWORKS } from "../protocol/networks.js";
import { EXACT_SCHEME } from "../protocol/reasons.js";
import { describeZodError, parsePaymentRequirements } from "../protocol/schemas.js";
import { isCaip2, networkOfAnyForm, networkOfCaip2, v2RequirementsOf, v2RequirementsSchema, type V2PaymentRequirements } from "../protocol/x402v2.js";
import { PaymentError } from "./errors.js";
import { chooseOffer, signOffer, type Offer, type PaymentDialect, type PaymentRequiredAnswer } from "./offers.js";
import type { PaymentSigner } from "./sign.js";

/** A payment written out: what a seller's requirements would say. */
export interface PaymentTerms {
  /** `cronos-testnet`, `cronos-mainnet` (or `cronos`), or a CAIP-2 id (`eip155:338`, `eip155:25`). */
  network: string;
  payTo: string;
  /** Base units (1 USDC.e = 1000000). */
  amount: string | bigint;
  /** Default: the network's USDC.e. */
  asset?: string;
  /** Default 300. */
  maxTimeoutSeconds?: number;
}

/** What a payment changes from its offer, on purpose: each makes the facilitator refuse it in its own way. */
export interface PaymentChanges {
  /** Signs for this network (its chain id and, unless `asset` says otherwise, its USDC.e). */
  network?: string;
  payTo?: string;
  amount?: string | bigint;
  asset?: string;
}

/** The EIP-712 domain a payment is signed over, where it differs from the network's. */
export interface DomainChanges {
  name?: string;
  version?: string;
  chainId?: number;
}

/** A signed payment: the header to send, its value, and what it says. */
export interface SignedPayment {
  dialect: PaymentDialect;
  /** `X-PAYMENT` (Cronos) or `PAYMENT-SIGNATURE` (x402 v2). */
  header: string;
  /** The header's value: base64 JSON. */
  value: string;
  /** The header's JSON. */
  payment: Record<string, unknown>;
  network: string;
  payer: Address;
  payTo: string;
  asset: string;
  amount: string;
  validAfter: number;
  validBefore: number;
  nonce: Hex;
}

/**
 * The offer a payment written out makes, in `dialect` (default: x402 v2 for a CAIP-2 network, else Cronos),
 * as the kit's seller would write it (`maxTimeoutSeconds` 300; in x402 v2 the token's domain in `extra`).
 *
 * @throws {PaymentError} `invalid_parameters` (an address or amount that is not one, an unknown network without `asset`).
 */
export function offerOfTerms(terms: PaymentTerms, dialect?: PaymentDialect): Offer {
  const chosen = dialect ?? (isCaip2(terms.network) ? "x402v2" : "cronos");
  const known = networkOfAnyForm(terms.network);
  const asset = terms.asset ?? (known ? NETWORKS[known].token : undefined);
  if (asset === undefined) throw new PaymentError("invalid_parameters", `unknown network "${terms.network}": name the token (asset)`);
  const parsed = parsePaymentRequirements({
    scheme: EXACT_SCHEME,
    // The Cronos layout names networks; a CAIP-2 id of a known network is written as its name.
    network: isCaip2(terms.network) && known ? known : terms.network,
    payTo: terms.payTo,
    asset,
    maxAmountRequired: String(terms.amount),
    description: "X402 payment request",
    mimeType: "application/json",
    maxTimeoutSeconds: terms.maxTimeoutSeconds ?? 300,
  });
  if (!parsed.ok) throw new PaymentError("invalid_parameters", "invalid payment terms", { details: parsed.problem });
  if (chosen === "cronos") return { dialect: "cronos", requirements: parsed.requirements };
  const v2 = v2RequirementsOf(parsed.requirements);
  if (!v2) throw new PaymentError("unknown_network", `x402 v2 payments are signed here for the Cronos networks only, not "${terms.network}"`);
  return { dialect: "x402v2", raw: { ...v2 }, requirements: v2 };
}

/**
 * The offer with `changes` applied: the amount, payee, token or network it is signed for. A new network
 * brings its own USDC.e (unless `asset` is given) and, in x402 v2, its token domain.
 *
 * @throws {PaymentError} `invalid_parameters` when a change is not valid (an address that is not one, …).
 */
export function changeOffer(offer: Offer, changes: PaymentChanges): Offer {
  const network = changes.network === undefined ? undefined : networkOfAnyForm(changes.network);
  if (changes.network !== undefined && !network) {
    throw new PaymentError("invalid_parameters", `unknown network "${changes.network}" (cronos-testnet, cronos-mainnet, eip155:338, eip155:25)`);
  }
  const asset = changes.asset ?? (network ? NETWORKS[network].token : undefined);
  if (offer.dialect === "cronos") {
    const { requirements } = offer;
    const parsed = parsePaymentRequirements({
      ...requirements,
      ...(network ? { network } : {}),
      ...(asset !== undefined ? { asset } : {}),
      ...(changes.payTo !== undefined ? { payTo: changes.payTo } : {}),
      ...(changes.amount !== undefined ? { maxAmountRequired: String(changes.amount) } : {}),
    });
    if (!parsed.ok) throw new PaymentError("invalid_parameters", "invalid change of the payment", { details: parsed.problem });
    return { dialect: "cronos", requirements: parsed.requirements };
  }
  const extra = { ...(offer.requirements.extra ?? {}), ...(network ? { ...NETWORKS[network].domain } : {}) };
  const raw: Record<string, unknown> = {
    ...offer.raw,
    ...(network ? { network: `eip155:${NETWORKS[network].chainId}`, extra } : {}),
    ...(asset !== undefined ? { asset } : {}),
    ...(changes.payTo !== undefined ? { payTo: changes.payTo } : {}),
    ...(changes.amount !== undefined ? { amount: String(changes.amount) } : {}),
  };
  const parsed = offerOfRaw(raw);
  return { ...offer, raw, requirements: parsed };
}

/** Re-reads changed x402 v2 requirements (the same checks as a 402's). */
function offerOfRaw(raw: Record<string, unknown>): V2PaymentRequirements {
  const parsed = v2RequirementsSchema.safeParse(raw);
  if (!parsed.success) throw new PaymentError("invalid_parameters", "invalid change of the payment", { details: describeZodError(parsed.error) });
  return parsed.data;
}

/** What a payment to sign is made from: a 402 answer or terms, the changes, the dialect. */
export interface PaymentSource {
  /** The 402 answer; without it, `changes` are the terms (`network`, `payTo` and `amount` needed). */
  answer?: PaymentRequiredAnswer;
  changes: PaymentChanges;
  /** The dialect: of the 402's offers, the first in it; of terms, see {@link offerOfTerms}. */
  dialect?: PaymentDialect;
}

/**
 * The offer a source describes: the 402 answer's first `exact` offer (in `dialect`, else Cronos then x402 v2)
 * with the changes applied, or the terms the changes write out.
 *
 * @throws {PaymentError} `malformed_402`, `no_acceptable_requirements`, `invalid_parameters` (terms missing or invalid).
 */
export function offerOf(source: PaymentSource): Offer {
  const { changes } = source;
  if (!source.answer) {
    const missing = (["network", "payTo", "amount"] as const).filter((name) => changes[name] === undefined);
    if (missing.length > 0) throw new PaymentError("invalid_parameters", `${missing.join(", ")}: needed without a 402 answer`);
    return offerOfTerms({ network: changes.network!, payTo: changes.payTo!, amount: changes.amount!, asset: changes.asset }, source.dialect);
  }
  const exact = (terms: { scheme: string }) => (terms.scheme === EXACT_SCHEME ? undefined : `scheme "${terms.scheme}" is not "${EXACT_SCHEME}"`);
  return changeOffer(chooseOffer(source.answer, exact, source.dialect ? [source.dialect] : undefined), changes);
}

/** Parameters of {@link signPayment}. */
export interface SignPaymentParameters {
  offer: Offer;
  /** The payer: `from` of the authorization. */
  signer: PaymentSigner;
  /**
   * Another account whose key makes the signature, while `from` stays the payer's: a payment whose
   * signature is not its payer's (the facilitator answers `Invalid EIP-3009 signature`).
   */
  signWith?: LocalAccount;
  /** The EIP-712 domain's name, version or chain id, where they differ from the network's. */
  domain?: DomainChanges;
  validAfter?: number | bigint;
  validBefore?: number | bigint;
  nonce?: Hex;
  now?: number;
}

/**
 * Signs an offer (from a 402 or {@link offerOfTerms}, changed or not) with the buyer SDK's signer, and
 * says what was signed.
 *
 * @throws {PaymentError} the signer's errors (`invalid_parameters`, `unknown_network`, `no_account`).
 */
export async function signPayment(parameters: SignPaymentParameters): Promise<SignedPayment> {
  const { offer } = parameters;
  const signer = parameters.signWith ? withAddress(parameters.signWith, payerOf(parameters.signer)) : parameters.signer;
  const [header, value] = await signOffer(offer, {
    signer,
    ...domainOf(offer, parameters.domain),
    ...(parameters.validAfter !== undefined ? { validAfter: parameters.validAfter } : {}),
    ...(parameters.validBefore !== undefined ? { validBefore: parameters.validBefore } : {}),
    ...(parameters.nonce !== undefined ? { nonce: parameters.nonce } : {}),
    ...(parameters.now !== undefined ? { now: parameters.now } : {}),
  });
  const decoded = decodeBase64Json(value);
  const payment = (decoded.ok ? decoded.json : {}) as Record<string, unknown>;
  const fields = (offer.dialect === "cronos" ? payment.payload : (payment.payload as { authorization: unknown }).authorization) as Record<string, string | number>;
  return {
    dialect: offer.dialect,
    header,
    value,
    payment,
    network: offer.requirements.network,
    payer: fields.from as Address,
    payTo: String(fields.to),
    asset: offer.requirements.asset,
    amount: String(fields.value),
    validAfter: Number(fields.validAfter),
    validBefore: Number(fields.validBefore),
    nonce: fields.nonce as Hex,
  };
}

/** The chain id and domain to sign over: the network's (or the x402 v2 offer's `extra`), changed where asked. */
function domainOf(offer: Offer, changes: DomainChanges | undefined): { chainId?: number; domain?: { name: string; version: string } } {
  if (!changes || (changes.name === undefined && changes.version === undefined && changes.chainId === undefined)) return {};
  const known = offer.dialect === "cronos" ? canonicalNetwork(offer.requirements.network) : networkOfCaip2(offer.requirements.network);
  const extra = offer.dialect === "x402v2" ? (offer.requirements.extra ?? {}) : {};
  const base = typeof extra.name === "string" && typeof extra.version === "string" ? { name: extra.name, version: extra.version } : known ? NETWORKS[known].domain : undefined;
  const name = changes.name ?? base?.name;
  const version = changes.version ?? base?.version;
  const result: { chainId?: number; domain?: { name: string; version: string } } = {};
  if (changes.chainId !== undefined) result.chainId = changes.chainId;
  if (changes.name !== undefined || changes.version !== undefined) {
    if (name === undefined || version === undefined) throw new PaymentError("unknown_network", `unknown network "${offer.requirements.network}": give both the domain's name and version`);
    result.domain = { name, version };
  }
  return result;
}

/** The address a signer signs as. */
function payerOf(signer: PaymentSigner): Address {
  if ("account" in signer) {
    if (!signer.account) throw new PaymentError("no_account", "the wallet client has no account; create it with `account` or pass a LocalAccount");
    return signer.account.address;
  }
  return signer.address;
}

/** `account`'s key under another address: it signs an authorization whose `from` is not its own. */
function withAddress(account: LocalAccount, address: Address): LocalAccount {
  return { ...account, address };
}

/** A signed payment as plain JSON (`cronos-x402 sign --json`, `POST /harness/sign`): what was signed, no key. */
export function signedPaymentJson(signed: SignedPayment): Record<string, unknown> {
  const { header, value, dialect, network, payer, payTo, asset, amount, validAfter, validBefore, nonce, payment } = signed;
  return { header, value, dialect, network, payer, payTo, asset, amount, validAfter, validBefore, nonce, payment };
}
