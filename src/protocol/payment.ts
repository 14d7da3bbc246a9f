import type { Address } from "viem";
import type { PaymentPayload } from "./schemas.js";

/**
 * The dialect-free payment: what each dialect's codec (Cronos v1, x402 v2) turns its request body
 * into, and all that the checks, the relayer and the ledger see. Nothing in it says which dialect
 * carried it.
 */
export interface Payment {
  /** What the seller asks for. */
  requirements: PaymentTerms;
  /** What the payer signed, or why it could not be read (verify's first check). */
  payload: DecodedPayload;
  /**
   * The payer's idempotency key (x402 v2 `payment-identifier`): the same id with the same authorization gets
   * the same answer; another authorization under it is refused.
   */
  paymentId?: string;
}

/** Payment requirements normalised from either dialect (`maxAmountRequired` and `amount` are both `amount`). */
export interface PaymentTerms {
  scheme: string;
  /**
   * The network: a Cronos name (`cronos-testnet`, `cronos-mainnet`, the alias `cronos` as sent) where
   * the dialect's name maps to one (`eip155:338` is `cronos-testnet`), else the string as sent.
   */
  network: string;
  payTo: Address;
  /** Token address as sent (checked case-insensitively). */
  asset: string;
  /** The price in the token's base units, a decimal string. */
  amount: string;
}

/**
 * The payer's part: scheme and network it was signed for, the EIP-3009 authorization with its
 * signature, and the token it names (Cronos header `payload.asset`, x402 v2 `accepted.asset`).
 */
export type PayerPayload = Omit<PaymentPayload, "x402Version">;

/** The payer's part decoded, or why it could not be: verify's first refusal, as a code (and what is wrong with it). */
export type DecodedPayload =
  | { ok: true; payload: PayerPayload }
  | { ok: false; code: "base64" | "header"; detail?: string };

/** The payer of a payment, when its payload could be read. */
export function payerOf(payment: Payment): Address | undefined {
  return payment.payload.ok ? payment.payload.payload.authorization.from : undefined;
}
