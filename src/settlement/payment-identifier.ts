// A payer's payment identifier (x402 v2): its one gate (refuse, repeat, proceed), asked once per request.
import { bytesToHex, isAddressEqual, type Hex } from "viem";
import { transferAuthorizationDigest } from "../chain/signature.js";
import type { BoundPayment, SettlementRecord } from "../ledger/types.js";
import type { PayerPayload } from "../protocol/payment.js";
import { decidePayment, termsOfAuthorization, type PaidTransfer } from "./decision.js";
import type { SettlementDeps } from "./deps.js";
import { FacilitatorFault } from "./faults.js";
import type { NetworkRuntime } from "./runtime.js";
import type { VerifyOutcome } from "./verify-outcome.js";

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
  deps: SettlementDeps,
): Promise<boolean> {
  if (bound.nonce.toLowerCase() !== authorization.nonce.toLowerCase()) return false;
  if (bound.digest !== undefined) return bound.digest.toLowerCase() === authorizationDigest(runtime, authorization).toLowerCase();
  const { config } = runtime;
  const record = await deps.ledger.get({ chainId: config.chainId, token: config.token, authorizer: authorization.from, nonce: authorization.nonce });
  return record === undefined || recordIsOf(record, authorization);
}

/**
 * What the payer's payment identifier (x402 v2 `payment-identifier`) makes of a payment: `refuse` it (the id came with
 * another payment first, whatever instance bound it: never answered from that one's settlement), `repeat` the answer
 * of this very payment settled before under it, or `proceed` (`bound`: the id is this payment's, so another settle of
 * its authorization is this payment's too).
 */
export type IdentifierVerdict = { verdict: "refuse" } | { verdict: "repeat"; transfer: PaidTransfer } | { verdict: "proceed"; bound: boolean };

const UNBOUND: IdentifierVerdict = { verdict: "proceed", bound: false };

/**
 * The payment identifier's gate, asked once per request after verify's checks, for a payment whose signature they
 * proved (a valid payment, or one whose nonce is used): its binding read, or with `bind` (settle of a valid
 * payment) made, for every instance at once; a binding to another payment refuses it, even one re-signed under the
 * same nonce for another payee or value. A used authorization bound to this id whose settlement the ledger records
 * (of the same payee, value and validBefore) and the payment decision confirms is a repeat. Throws
 * {@link FacilitatorFault} when the ledger (or, for a repeat, the chain) cannot tell.
 */
export async function identifierGate(deps: SettlementDeps, outcome: VerifyOutcome, paymentId: string | undefined, options: { bind?: boolean } = {}): Promise<IdentifierVerdict> {
  if (!paymentId || !outcome.runtime || !outcome.payload || !(outcome.isValid || outcome.code === "used")) return UNBOUND;
  const { runtime } = outcome;
  const { config } = runtime;
  const authorization = outcome.payload.authorization;
  let record: SettlementRecord | undefined;
  try {
    const binding =
      options.bind && outcome.isValid
        ? await deps.ledger.bindPaymentIdentifier(config, authorization.from, paymentId, { nonce: authorization.nonce, digest: authorizationDigest(runtime, authorization) })
        : await deps.ledger.paymentIdentifierBinding(config, authorization.from, paymentId);
    if (!binding) return UNBOUND;
    if (!(await boundToThis(binding, runtime, authorization, deps))) return { verdict: "refuse" };
    if (outcome.isValid) return { verdict: "proceed", bound: true };
    record = await deps.ledger.get({ chainId: config.chainId, token: config.token, authorizer: authorization.from, nonce: authorization.nonce });
  } catch (error) {
    throw new FacilitatorFault({ code: "ledger_unavailable" }, { cause: error });
  }
  const transfer = record ? await settledThis(runtime, authorization, record) : undefined;
  return transfer ? { verdict: "repeat", transfer } : { verdict: "proceed", bound: true };
}

/**
 * The transfer of this very payment that `record` settled: when the row is settled and of this authorization's
 * payee, value and validBefore (the settlement of the nonce may be another payment's, signed under the same nonce
 * without the id), confirmed by the payment decision on that transaction's receipt; otherwise undefined. Throws
 * {@link FacilitatorFault} when the chain cannot tell.
 */
export async function settledThis(runtime: NetworkRuntime, authorization: PayerPayload["authorization"], record: SettlementRecord): Promise<PaidTransfer | undefined> {
  if (record.status !== "settled" || !recordIsOf(record, authorization) || !record.txHash) return undefined;
  const decision = await decidePayment(runtime.paymentReads, termsOfAuthorization(runtime.config.token, authorization), { ours: [record.txHash] });
  if (decision.outcome === "undecided") throw new FacilitatorFault({ code: "payment_undecided", network: runtime.config.network, reason: decision.reason });
  return decision.outcome === "paid" ? decision.transfer : undefined;
}
