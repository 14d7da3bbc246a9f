import { bytesToHex, isAddressEqual, type Address, type Hex } from "viem";
import { canonicalNetwork } from "../protocol/networks.js";
import type { Payment, PayerPayload } from "../protocol/payment.js";
import { EXACT_SCHEME, VerifyReason } from "../protocol/reasons.js";
import { recoverSigner, transferAuthorizationDigest } from "../chain/signature.js";
import type { Head } from "../chain/state.js";
import type { IndexedPayer } from "../state/index.js";
import type { BoundPayment, SettlementRecord } from "../ledger/types.js";
import { decidePayment, termsOfAuthorization, type PaidTransfer } from "./decision.js";
import { FacilitatorFault, type FacilitatorContext, type NetworkRuntime } from "./runtime.js";
import type { StageClock } from "./stages.js";

const MAX_UINT256 = (1n << 256n) - 1n;

/** Why verify said no; settle maps some codes to its own texts. */
export type VerifyFailureCode =
  | "base64"
  | "header"
  | "scheme"
  | "network"
  | "asset"
  | "amount"
  | "recipient"
  | "signature"
  | "notYetValid"
  | "expired"
  | "used"
  | "balance"
  | "paymentId";

/** A payment that passed every check, with what settle needs to send it. */
export interface VerifiedPayment {
  isValid: true;
  runtime: NetworkRuntime;
  payload: PayerPayload;
  value: bigint;
  head: Head;
  /** The payer's token balance at `head`. */
  balance: bigint;
  /** Whether the payer is a contract wallet (its signature goes through ERC-1271). */
  contractWallet: boolean;
}

/** A refused payment; `reason` is the exact `invalidReason` text. */
export interface RefusedPayment {
  isValid: false;
  code: VerifyFailureCode;
  reason: string;
  runtime?: NetworkRuntime;
  payload?: PayerPayload;
  head?: Head;
}

export type VerifyOutcome = VerifiedPayment | RefusedPayment;

/**
 * A repeat, under its payment identifier (x402 v2), of a payment already settled: answered valid, as
 * the first verify of it was, so that a seller's retry reaches settle and gets the same transaction.
 */
export interface RepeatedPayment {
  isValid: true;
  repeat: true;
  runtime: NetworkRuntime;
  payload: PayerPayload;
  txHash: Hex;
}

/** What the verify route answers from: a verify outcome, or a repeat of a settled payment. */
export type VerifyAnswerOutcome = VerifyOutcome | RepeatedPayment;

/** The verify route's check: {@link verifyPayment}, and a used authorization settled under the payment's identifier answers as a repeat. */
export async function verifyRequest(payment: Payment, context: FacilitatorContext): Promise<VerifyAnswerOutcome> {
  const outcome = await verifyPayment(payment, context);
  if (outcome.isValid || outcome.code !== "used" || !payment.paymentId || !outcome.runtime || !outcome.payload) return outcome;
  const paid = await paidUnderIdentifier(outcome.runtime, outcome.payload.authorization, payment.paymentId, context);
  return paid ? { isValid: true, repeat: true, runtime: outcome.runtime, payload: outcome.payload, txHash: paid.txHash } : outcome;
}

/**
 * The EIP-712 digest of an authorization under its token's domain: one value for everything the payer
 * signed (payee, value, validAfter, validBefore, nonce, token and chain), whatever the signature's bytes.
 */
export function authorizationDigest(runtime: NetworkRuntime, authorization: PayerPayload["authorization"]): Hex {
  return bytesToHex(
    transferAuthorizationDigest(runtime.separator, {
      from: authorization.from,
      to: authorization.to,
      value: BigInt(authorization.value),
      validAfter: authorization.validAfter,
      validBefore: authorization.validBefore,
      nonce: authorization.nonce,
    }),
  );
}

/** Whether a settlement the ledger records is of this authorization's payee, value and deadline (what the ledger keeps of it). */
function recordIsOf(record: SettlementRecord, authorization: PayerPayload["authorization"]): boolean {
  return (
    record.key.nonce.toLowerCase() === authorization.nonce.toLowerCase() &&
    isAddressEqual(record.payee, authorization.to) &&
    record.value === BigInt(authorization.value) &&
    record.validBefore === authorization.validBefore
  );
}

/**
 * Whether a payment identifier's binding is this payment: the same nonce and, where the binding keeps it,
 * the same digest (everything signed). A binding recorded before its digest was kept is compared with the
 * settlement of its nonce, when there is one, on what the ledger keeps of it (payee, value, validBefore).
 */
async function boundToThis(
  bound: BoundPayment,
  runtime: NetworkRuntime,
  authorization: PayerPayload["authorization"],
  context: FacilitatorContext,
): Promise<boolean> {
  if (bound.nonce.toLowerCase() !== authorization.nonce.toLowerCase()) return false;
  if (bound.digest !== undefined) return bound.digest.toLowerCase() === authorizationDigest(runtime, authorization).toLowerCase();
  const { config } = runtime;
  const record = await context.ledger.get({ chainId: config.chainId, token: config.token, authorizer: authorization.from, nonce: authorization.nonce });
  return record === undefined || recordIsOf(record, authorization);
}

/**
 * Whether the payer's `paymentId` is bound to a payment other than `authorization` (any instance bound it):
 * such a payment is refused, never answered from the other one's settlement. Throws {@link FacilitatorFault}
 * when the ledger cannot be read.
 */
export async function identifierBoundElsewhere(
  runtime: NetworkRuntime,
  authorization: PayerPayload["authorization"],
  paymentId: string,
  context: FacilitatorContext,
  bound?: BoundPayment,
): Promise<boolean> {
  try {
    const binding = bound ?? (await context.ledger.paymentIdentifierBinding(runtime.config, authorization.from, paymentId));
    return binding !== undefined && !(await boundToThis(binding, runtime, authorization, context));
  } catch (error) {
    throw new FacilitatorFault("the settlement ledger is unavailable", { cause: error });
  }
}

/**
 * The transfer of this very payment settled before under `paymentId`: when the id is bound to this
 * authorization (everything signed alike) and the ledger records its settlement (of the same payee, value
 * and validBefore), confirmed by the payment decision on that transaction's receipt; otherwise undefined.
 * Throws {@link FacilitatorFault} when the ledger, or the chain, cannot tell.
 */
export async function paidUnderIdentifier(
  runtime: NetworkRuntime,
  authorization: PayerPayload["authorization"],
  paymentId: string,
  context: FacilitatorContext,
): Promise<PaidTransfer | undefined> {
  const { config } = runtime;
  let record: SettlementRecord | undefined;
  try {
    const bound = await context.ledger.paymentIdentifierBinding(config, authorization.from, paymentId);
    if (!bound || !(await boundToThis(bound, runtime, authorization, context))) return undefined;
    record = await context.ledger.get({ chainId: config.chainId, token: config.token, authorizer: authorization.from, nonce: authorization.nonce });
  } catch (error) {
    throw new FacilitatorFault("the settlement ledger is unavailable", { cause: error });
  }
  // The settlement of the nonce may be another payment's (signed under the same nonce without this id): its transaction is not this payment's.
  if (record?.status !== "settled" || !recordIsOf(record, authorization) || !record.txHash) return undefined;
  const decision = await decidePayment(runtime.payments, termsOfAuthorization(config.token, authorization), { ours: [record.txHash] });
  if (decision.outcome === "undecided") throw new FacilitatorFault(`cannot tell on ${config.network} whether the payment was made: ${decision.reason}`);
  return decision.outcome === "paid" ? decision.transfer : undefined;
}

function refuse(code: VerifyFailureCode, reason: string, extra: Partial<RefusedPayment> = {}): RefusedPayment {
  return { isValid: false, code, reason, ...extra };
}

/**
 * Verifies a payment against its requirements: the spec's checks in the spec's order (header,
 * scheme, network, asset and amount, recipient, signature, time window), then read-only chain state
 * (nonce used, balance). The first failure is the answer. The signature is recovered before anything
 * is read: a signature that is not the payer's costs one read (is the payer a contract wallet?).
 * Chain reads are pinned to one block whose timestamp is the clock; verify may reuse a head read
 * within `headCacheMs`, settle passes `freshHead`. Throws {@link FacilitatorFault} only when the
 * chain cannot be read.
 *
 * The payment comes from a dialect's codec (`dialects/`), already decoded: verify does not know
 * which dialect carried it.
 */
export async function verifyPayment(
  payment: Payment,
  context: FacilitatorContext,
  options: { freshHead?: boolean } = {},
): Promise<VerifyOutcome> {
  // The verify budget times verify's own calls (settle's fresh check is not part of it).
  const clock = options.freshHead ? undefined : context.stages;
  const outcome = await checkPayment(payment, context, options, clock);
  // The payer's payment identifier (x402 v2), asked once its signature is proven (a valid payment, or a
  // used one): an id that came with another payment first refuses this one, even one re-signed under the
  // same nonce for another payee or value.
  if (!payment.paymentId || !outcome.runtime || !outcome.payload || !(outcome.isValid || outcome.code === "used")) return outcome;
  const { runtime, payload } = outcome;
  const since = clock ? clock.start() : 0;
  const elsewhere = await identifierBoundElsewhere(runtime, payload.authorization, payment.paymentId, context);
  if (clock) clock.stop("ledgerReads", since);
  if (elsewhere) return refuse("paymentId", VerifyReason.paymentIdentifierInUse(payment.paymentId), { payload, runtime, head: outcome.head });
  return outcome;
}

/** The spec's checks, in its order (see {@link verifyPayment}). */
async function checkPayment(payment: Payment, context: FacilitatorContext, options: { freshHead?: boolean }, clock: StageClock | undefined): Promise<VerifyOutcome> {
  let since = clock ? clock.start() : 0;
  const requirements = payment.requirements;

  // 1. header (the payer's part, decoded by the codec; refused here when it could not be read)
  const decoded = payment.payload;
  if (!decoded.ok) return refuse(decoded.code, decoded.reason);
  const payload = decoded.payload;
  const authorization = payload.authorization;

  // 2. scheme
  if (requirements.scheme !== EXACT_SCHEME) return refuse("scheme", VerifyReason.unsupportedScheme(requirements.scheme), { payload });
  if (payload.scheme !== requirements.scheme) return refuse("scheme", VerifyReason.unsupportedScheme(payload.scheme), { payload });

  // 3. network (the `cronos` alias is mainnet)
  const networkName = canonicalNetwork(requirements.network);
  const runtime = networkName && context.networks.get(networkName);
  if (!runtime) return refuse("network", VerifyReason.unsupportedNetwork(requirements.network), { payload });
  if (canonicalNetwork(payload.network) !== networkName) {
    return refuse("network", VerifyReason.unsupportedNetwork(payload.network), { payload, runtime });
  }

  // 4. asset and amount (scheme `exact`: the value is the required amount)
  const token = runtime.config.token;
  if (requirements.asset.toLowerCase() !== token.toLowerCase()) {
    return refuse("asset", VerifyReason.unsupportedAsset(requirements.asset), { payload, runtime });
  }
  if (payload.asset !== undefined && payload.asset.toLowerCase() !== token.toLowerCase()) {
    return refuse("asset", VerifyReason.unsupportedAsset(payload.asset), { payload, runtime });
  }
  const value = /^\d{1,78}$/.test(authorization.value) ? BigInt(authorization.value) : -1n;
  if (value <= 0n || value > MAX_UINT256 || value !== BigInt(requirements.amount)) {
    return refuse("amount", VerifyReason.invalidAmount(authorization.value), { payload, runtime });
  }

  // 5. recipient
  if (!isAddressEqual(authorization.to, requirements.payTo)) {
    return refuse("recipient", VerifyReason.recipientMismatch, { payload, runtime });
  }

  // 6. signature, as the token checks it: ECDSA for an address without code, ERC-1271 otherwise.
  // What needs no chain comes first: the ECDSA recovery. Then the reads, pinned to one block.
  if (clock) {
    clock.stop("checks", since);
    since = clock.start();
  }
  const digest = transferAuthorizationDigest(runtime.separator, {
    from: authorization.from,
    to: authorization.to,
    value,
    validAfter: authorization.validAfter,
    validBefore: authorization.validBefore,
    nonce: authorization.nonce,
  });
  if (clock) {
    clock.stop("typedDataHash", since);
    since = clock.start();
  }
  const signer = recoverSigner(digest, authorization.signature);
  // recoverSigner answers in lower case: the payer's address, checked by the codec, compares as such.
  const signedByPayer = signer !== undefined && signer === authorization.from.toLowerCase();
  if (clock) {
    clock.stop("recovery", since);
    since = clock.start();
  }
  const readOptions: ReadOptions = {
    headAgeMs: options.freshHead ? 0 : context.headCacheMs,
    fresh: options.freshHead === true,
    erc1271GasLimit: context.relayerSafety.erc1271GasLimit,
    ...(context.observe?.verifyStateSource ? { source: context.observe.verifyStateSource } : {}),
  };
  // A payer whose whole state is in memory (the index's, and its code read at that block) is answered
  // without a promise; otherwise the reads, which may wait on the chain.
  let chain: PayerState | RefusedPayment | undefined = signedByPayer && !readOptions.fresh ? payerInMemory(runtime, authorization, readOptions) : undefined;
  if (chain) {
    if (clock) clock.stop("indexRead", since);
  } else {
    if (clock) clock.waited();
    try {
      chain = await readPayerState(runtime, authorization, digest, signedByPayer, readOptions);
    } catch (error) {
      throw new FacilitatorFault(`cannot read ${runtime.config.network} state`, { cause: error });
    }
  }
  if ("isValid" in chain) return { ...chain, payload, runtime };
  const { head, codeHash, used, balance } = chain;
  const extra = { payload, runtime, head };

  // 7. validity window by the chain's clock; leave settle time to land before validBefore
  if (head.timestamp <= authorization.validAfter) return refuse("notYetValid", VerifyReason.notYetValid, extra);
  if (head.timestamp + BigInt(context.settleMarginSeconds) >= authorization.validBefore) {
    return refuse("expired", VerifyReason.expired, extra);
  }

  // 8. read-only state: a spent nonce, and funds
  if (used) return refuse("used", VerifyReason.alreadyUsed, extra);
  if (balance < value) return refuse("balance", VerifyReason.insufficientBalance, extra);

  return { isValid: true, runtime, payload, value, head, balance, contractWallet: codeHash !== undefined };
}

/** What verify reads from the chain about a payer, all at `head`. */
interface PayerState {
  head: Head;
  codeHash: Hex | undefined;
  used: boolean;
  balance: bigint;
}

/**
 * Reads what the signature check and the state checks need, fewest reads first. `signedByPayer`
 * (the ECDSA signature recovers to `from`): code, nonce state and balance at one head. Otherwise only a
 * contract wallet can still accept the signature: the payer's code first (no code answers after that
 * one read), then the wallet's ERC-1271 answer at the head, then the state.
 */
async function readPayerState(
  runtime: NetworkRuntime,
  authorization: PayerPayload["authorization"],
  digestBytes: Uint8Array,
  signedByPayer: boolean,
  options: ReadOptions,
): Promise<PayerState | RefusedPayment> {
  const { state } = runtime;
  const { from, nonce, signature } = authorization;
  const digest = bytesToHex(digestBytes);
  const invalid = (head?: Head) => refuse("signature", VerifyReason.invalidSignature, head ? { head } : {});
  if (signedByPayer) {
    // Settle's fresh reads go in one round trip with the head; verify's come from the index, or share a recent head and its cache.
    const { head, codeHash, used, balance } = options.fresh ? await state.latestPayerState(from, nonce) : await payerAtHead(runtime, from, nonce, options);
    // An EIP-7702 account has code: the token asks it through ERC-1271 as well.
    if (codeHash !== undefined && !(await state.isValidErc1271(from, digest, signature, head, options.erc1271GasLimit))) return invalid(head);
    return { head, codeHash, used, balance };
  }
  const codeHash = await state.codeHash(from);
  if (codeHash === undefined) return invalid();
  const indexed = options.fresh ? undefined : await indexedPayer(runtime, from, nonce, options);
  const head = indexed?.head ?? (await state.head(options.headAgeMs));
  if (!(await state.isValidErc1271(from, digest, signature, head, options.erc1271GasLimit))) return invalid(head);
  if (indexed) return { head, codeHash, used: await usedAt(runtime, indexed, from, nonce), balance: indexed.balance };
  const [used, balance] = await Promise.all([state.authorizationUsed(from, nonce, head), state.balanceOf(from, head)]);
  return { head, codeHash, used, balance };
}

/**
 * The payer's state from memory alone, for a payer whose ECDSA signature recovered and that has no code:
 * the index's answer (head, balance, nonce) and the payer's code read at that head already. Undefined when
 * any of it would need a read ({@link readPayerState} then reads it); the same state that would give.
 */
function payerInMemory(runtime: NetworkRuntime, authorization: PayerPayload["authorization"], options: ReadOptions): PayerState | undefined {
  const { from, nonce } = authorization;
  const indexed = runtime.index?.payerInMemory(from, nonce, options.headAgeMs);
  // null: the code is not known at that head; a hash: a wallet (or EIP-7702 account) that ERC-1271 asks.
  if (!indexed || runtime.state.knownCodeHash(from, indexed.head) !== undefined) return undefined;
  options.source?.(runtime.config.network, "index");
  return { head: indexed.head, codeHash: undefined, used: indexed.used, balance: indexed.balance };
}

/** How verify reads the chain. */
interface ReadOptions {
  /** A head confirmed (read) at most this long ago will do. */
  headAgeMs: number;
  erc1271GasLimit: bigint;
  /** Settle: everything read afresh at the latest block, never from the index or a cache. */
  fresh?: boolean;
  /** Told where the state came from (metrics). */
  source?: (network: string, source: "index" | "chain") => void;
}

/**
 * The payer's code, nonce state and balance at one head, for a payer whose ECDSA signature recovered:
 * from the token state index when it vouches for a head confirmed within `headAgeMs` (the code, cached per
 * block, and a nonce the backfill has not reached yet are read at that head), else read at a head read
 * from the chain.
 */
async function payerAtHead(runtime: NetworkRuntime, from: Address, nonce: Hex, options: ReadOptions): Promise<PayerState> {
  const { state } = runtime;
  const indexed = await indexedPayer(runtime, from, nonce, options);
  if (indexed) {
    const [codeHash, used] = await Promise.all([state.codeHash(from, indexed.head), usedAt(runtime, indexed, from, nonce)]);
    return { head: indexed.head, codeHash, used, balance: indexed.balance };
  }
  const head = await state.head(options.headAgeMs);
  const [codeHash, used, balance] = await Promise.all([state.codeHash(from, head), state.authorizationUsed(from, nonce, head), state.balanceOf(from, head)]);
  return { head, codeHash, used, balance };
}

/** What the token state index holds of the payer, when it can vouch for it (undefined: read the chain). */
async function indexedPayer(runtime: NetworkRuntime, from: Address, nonce: Hex, options: ReadOptions): Promise<IndexedPayer | undefined> {
  const indexed = runtime.index ? await runtime.index.payer(from, nonce, options.headAgeMs) : undefined;
  options.source?.(runtime.config.network, indexed ? "index" : "chain");
  return indexed;
}

/** Whether the nonce is spent at the index's head: the index's answer, or (before its backfill reached the nonce) the chain's. */
async function usedAt(runtime: NetworkRuntime, indexed: IndexedPayer, from: Address, nonce: Hex): Promise<boolean> {
  if (indexed.used !== undefined) return indexed.used;
  const used = await runtime.state.authorizationUsed(from, nonce, indexed.head);
  if (used) runtime.index?.rememberUsed(from, nonce);
  return used;
}
