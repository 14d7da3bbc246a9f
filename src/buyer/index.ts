export { PaymentError, type PaymentErrorCode } from "./errors.js";
export {
  createPaymentHeader,
  createV2PaymentPayload,
  decodePaymentResponse,
  decodeV2PaymentResponse,
  randomNonce,
  DEFAULT_VALIDITY_SECONDS,
  type CreatePaymentHeaderParameters,
  type CreateV2PaymentPayloadParameters,
  type PaymentSigner,
  type WalletSigner,
} from "./sign.js";
export { wrapFetchWithPayment, getPaymentResponse, getV2PaymentResponse, type PaymentFetchOptions } from "./fetch.js";
export type { PaymentDialect } from "./offers.js";
