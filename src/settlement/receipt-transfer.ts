import { decodeEventLog, isAddressEqual, toEventSelector, type Address, type Hex, type TransactionReceipt } from "viem";
import { tokenAbi } from "../chain/token-abi.js";
import { NONCE_EVENTS } from "../state/token-events.js";

/** Topic 0 of the token's `AuthorizationUsed(authorizer, nonce)`. */
export const AUTHORIZATION_USED_TOPIC = toEventSelector(NONCE_EVENTS[0]).toLowerCase() as Hex;
/** Topic 0 of the token's `AuthorizationCanceled(authorizer, nonce)`. */
export const AUTHORIZATION_CANCELED_TOPIC = toEventSelector(NONCE_EVENTS[1]).toLowerCase() as Hex;

/** What a payment is: the token, the authorization `(from, nonce)`, and the transfer it promises. */
export interface PaymentTerms {
  token: Address;
  from: Address;
  nonce: Hex;
  payTo: Address;
  value: bigint;
}

/** What one receipt does to an authorization. */
export type ReceiptSpend =
  /** Its `AuthorizationUsed(from, nonce)` is followed by the token's `Transfer(from, payTo, value)`: this payment. */
  | { kind: "paid"; from: Address; to: Address; value: bigint }
  /** The authorization was used for another transfer (another payee or value: a substitute signed under the nonce). */
  | { kind: "otherTransfer" }
  /** Its `AuthorizationCanceled(from, nonce)`. */
  | { kind: "canceled" }
  /** Reverted, or holds no log of the authorization. */
  | { kind: "none" };

const same = (a: string | undefined, b: string) => a !== undefined && a.toLowerCase() === b.toLowerCase();

/**
 * Reads what a mined transaction did to the authorization of `terms`, from its receipt alone. Paid only
 * by a successful receipt whose token log `AuthorizationUsed(from, nonce)` is followed, as the very next
 * log, by the token's `Transfer(from, payTo, value)`: the token emits the pair in one call, so nothing the
 * payer can write elsewhere (another contract's log, another call) stands in for it.
 */
export function spendOf(receipt: Pick<TransactionReceipt, "status" | "logs">, terms: PaymentTerms): ReceiptSpend {
  if (receipt.status !== "success") return { kind: "none" };
  const logs = [...receipt.logs].sort((a, b) => Number(a.logIndex ?? 0) - Number(b.logIndex ?? 0));
  for (const [i, log] of logs.entries()) {
    if (!isAddressEqual(log.address, terms.token)) continue;
    const [topic0, authorizer, nonce] = log.topics;
    if (!same(authorizer, `0x${terms.from.slice(2).padStart(64, "0")}`) || !same(nonce, terms.nonce)) continue;
    if (same(topic0, AUTHORIZATION_CANCELED_TOPIC)) return { kind: "canceled" };
    if (!same(topic0, AUTHORIZATION_USED_TOPIC)) continue;
    const transfer = transferOf(logs[i + 1], terms.token);
    if (transfer && isAddressEqual(transfer.from, terms.from) && isAddressEqual(transfer.to, terms.payTo) && transfer.value === terms.value) {
      return { kind: "paid", from: transfer.from, to: transfer.to, value: transfer.value };
    }
    return { kind: "otherTransfer" };
  }
  return { kind: "none" };
}

/** The token's `Transfer` in `log`, if it is one. */
function transferOf(log: TransactionReceipt["logs"][number] | undefined, token: Address): { from: Address; to: Address; value: bigint } | undefined {
  if (!log || !isAddressEqual(log.address, token)) return undefined;
  try {
    const event = decodeEventLog({ abi: tokenAbi, eventName: "Transfer", topics: log.topics as [Hex, ...Hex[]], data: log.data, strict: true });
    return event.args;
  } catch {
    return undefined;
  }
}
