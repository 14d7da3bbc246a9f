import { KitError } from "../protocol/errors.js";
/** Why a payment could not be made or read. */
export type PaymentErrorCode =
  /** A 402 answer whose body is not JSON or holds no payment requirements. */
  | "malformed_402"
  /** A 402 answer whose requirements are all refused (too expensive, foreign network or asset, other scheme). */
  | "no_acceptable_requirements"
  /** Requirements or other inputs given to the signer are invalid (e.g. an asset that is not an address, a short nonce). */
  | "invalid_parameters"
  /** The network is unknown and no `chainId` / `domain` was given to sign for it. */
  | "unknown_network"
  /** The signer has no account to sign with (a WalletClient created without `account`). */
  | "no_account"
  /** An `X-PAYMENT-RESPONSE` value that is not base64 JSON of a settle answer. */
  | "malformed_payment_response"
  /** The request could not be sent, or its answer not read whole (unreachable, timed out, too large). */
  | "request_failed";

/** A buyer-side payment failure. `details` carries the specifics (e.g. why each requirement was refused). */
export class PaymentError extends KitError<PaymentErrorCode> {
  override name = "PaymentError";
  /** For 402-related errors: the HTTP status of the answer that triggered the error. */
  declare readonly status?: number;

  constructor(code: PaymentErrorCode, message: string, options: { details?: string; status?: number; cause?: unknown } = {}) {
    super(code, options.details ? `${message}: ${options.details}` : message, { cause: options.cause, ...(options.details !== undefined ? { details: options.details } : {}) });
    if (options.status !== undefined) this.status = options.status;
  }
}
