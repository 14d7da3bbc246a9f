export {
  createFacilitatorClient,
  FacilitatorError,
  DEFAULT_FACILITATOR_TIMEOUT_MS,
  retryAfterSeconds,
  type FacilitatorClient,
  type FacilitatorClientOptions,
  type FacilitatorErrorCode,
  type FacilitatorOperation,
  type FacilitatorRequestBody,
  type SettlementQuery,
  type V2FacilitatorRequestBody,
  type FetchFunction,
} from "./facilitator-client.js";
export { requirePayment } from "./middleware.js";
export { getPayment } from "./exchange.js";
export {
  paymentRequirements,
  InvalidRequirementsError,
  REQUIREMENTS_DEFAULTS,
  type PaymentRequirementsOptions,
  type DiscoveryDeclaration,
  type RequirementsSource,
} from "./requirements.js";
export {
  SellerError,
  DEFAULT_RETRY_AFTER_SECONDS,
  consoleSellerLogger,
  type SellerLogger,
  type FacilitatorOption,
  type PaymentContext,
  type PaymentReceipt,
  type RequirePaymentOptions,
} from "./options.js";
