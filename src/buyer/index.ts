export { PaymentError, type PaymentErrorCode } from "./errors.js";
export {
  createPaymentHeader,
  decodePaymentResponse,
  randomNonce,
  DEFAULT_VALIDITY_SECONDS,
  type CreatePaymentHeaderParameters,
  type PaymentSigner,
  type WalletSigner,
} from "./sign.js";
export { wrapFetchWithPayment, getPaymentResponse, type PaymentFetchOptions } from "./fetch.js";
