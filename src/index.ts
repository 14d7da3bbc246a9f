// Public surface of the kit. Importing this module starts nothing.

// Wire vocabulary shared by every role.
export * from "./protocol/reasons.js";
export { NETWORKS, NETWORK_NAMES, CRONOS_TESTNET, CRONOS_MAINNET, CRONOS_MAINNET_ALIAS, canonicalNetwork, type NetworkInfo, type NetworkName } from "./protocol/networks.js";
export {
  paymentRequirementsSchema,
  facilitatorRequestSchema,
  paymentHeaderSchema,
  verifyResponseSchema,
  settleResponseSchema,
  supportedResponseSchema,
  paymentRequiredSchema,
  parsePaymentRequirements,
  type PaymentRequirements,
  type PaymentRequirementsInput,
  type FacilitatorRequest,
  type PaymentPayload,
  type Authorization,
  type VerifyResponse,
  type SettleResponse,
  type SettleSuccess,
  type SettleFailure,
  type SupportedResponse,
  type PaymentRequired,
} from "./protocol/schemas.js";
export { decodePaymentHeader, encodePaymentHeader } from "./protocol/header.js";
export { TRANSFER_WITH_AUTHORIZATION_TYPES, transferAuthorizationTypedData, type TokenDomain } from "./protocol/eip3009.js";
export { tokenAbi } from "./chain/token-abi.js";

// Facilitator.
export { loadConfig, ConfigError, type FacilitatorConfig, type NetworkConfig } from "./facilitator/config.js";
export { createFacilitator, startFacilitator, StartupError, type Facilitator, type RunningFacilitator, type StartFacilitatorOptions } from "./facilitator/server.js";
export { MemoryInFlightGuard, type InFlightGuard } from "./facilitator/in-flight.js";
export { MemorySettleGuards, type SettleGuards, type PayerAccount, type TokenScope, type Reservation, type PenaltySubject } from "./facilitator/settle-guards.js";

// Seller and buyer SDKs.
export * from "./seller/index.js";
export * from "./buyer/index.js";
