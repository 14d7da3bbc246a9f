// A payer's payment identifier (x402 v2): whether it is bound to this very payment, and the transfer settled under it.
import { bytesToHex, isAddressEqual, type Hex } from "viem";
import { transferAuthorizationDigest } from "../chain/signature.js";
import type { BoundPayment, SettlementRecord } from "../ledger/types.js";
import type { PayerPayload } from "../protocol/payment.js";
import { decidePayment, termsOfAuthorization, type PaidTransfer } from "./decision.js";
import type { SettlementDeps } from "./deps.js";
import { FacilitatorFault } from "./faults.js";
import type { NetworkRuntime } from "./runtime.js";

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
 * Whether the payer's `paymentId` is bound to a payment other than `authorization` (any instance bound it):
 * such a payment is refused, never answered from the other one's settlement. Throws {@link FacilitatorFault}
 * when the ledger cannot be read.
 */
export async function identifierBoundElsewhere(
  runtime: NetworkRuntime,
  authorization: PayerPayload["authorization"],
  paymentId: string,
  deps: SettlementDeps,
  bound?: BoundPayment,
): Promise<boolean> {
  try {
    const binding = bound ?? (await deps.ledger.paymentIdentifierBinding(runtime.config, authorization.from, paymentId));
    return binding !== undefined && !(await boundToThis(binding, runtime, authorization, deps));
  } catch (error) {
    throw new FacilitatorFault({ code: "ledger_unavailable" }, { cause: error });
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
  deps: SettlementDeps,
): Promise<PaidTransfer | undefined> {
  const { config } = runtime;
  let record: SettlementRecord | undefined;
  try {
    const bound = await deps.ledger.paymentIdentifierBinding(config, authorization.from, paymentId);
    if (!bound || !(await boundToThis(bound, runtime, authorization, deps))) return undefined;
    record = await deps.ledger.get({ chainId: config.chainId, token: config.token, authorizer: authorization.from, nonce: authorization.nonce });
  } catch (error) {
    throw new FacilitatorFault({ code: "ledger_unavailable" }, { cause: error });
  }
  // The settlement of the nonce may be another payment's (signed under the same nonce without this id): its transaction is not this payment's.
  if (record?.status !== "settled" || !recordIsOf(record, authorization) || !record.txHash) return undefined;
  const decision = await decidePayment(runtime.payments, termsOfAuthorization(config.token, authorization), { ours: [record.txHash] });
  if (decision.outcome === "undecided") throw new FacilitatorFault({ code: "payment_undecided", network: config.network, reason: decision.reason });
  return decision.outcome === "paid" ? decision.transfer : undefined;
}
