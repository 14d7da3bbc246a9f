import type { Address, Hex } from "viem";
import type { TokenScope } from "./scope.js";

/**
 * The payment a payment identifier is bound to: the authorization's nonce and its EIP-712 digest, which
 * covers everything signed (payer, payee, value, validAfter, validBefore, nonce, and the token and chain
 * through the domain). `digest` is absent for a binding recorded before migration 0004, which kept the
 * nonce only.
 */
export interface BoundPayment {
  nonce: Hex;
  digest?: Hex;
}

/** Payment identifiers (the x402 `payment-identifier` extension), each bound to the payment it first came with. */
export interface IdentifierStore {
  /**
   * Binds a payer's payment identifier (the x402 `payment-identifier` extension) to the authorization
   * it first came with, unless it is bound already. Returns the payment it is bound to: this one, or the
   * earlier one. One binding for all instances; it is never released.
   */
  bindPaymentIdentifier(scope: TokenScope, payer: Address, id: string, payment: BoundPayment): Promise<BoundPayment>;
  /** The payment a payer's payment identifier is bound to, if any. */
  paymentIdentifierBinding(scope: TokenScope, payer: Address, id: string): Promise<BoundPayment | undefined>;
}
