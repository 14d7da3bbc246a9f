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
export { decodePaymentHeader, encodePaymentHeader, encodeBase64Json, decodeBase64Json } from "./protocol/header.js";
// The x402 v2 dialect (the `@x402/*` packages), and prices for their sellers and buyers on Cronos.
export {
  X402_V2_VERSION,
  X402V2Header,
  EvmReason,
  V2RequestReason,
  cronosPrice,
  cronosSpendControl,
  caip2OfNetwork,
  networkOfCaip2,
  v2RequirementsOf,
  v2RequirementsSchema,
  v2PaymentPayloadSchema,
  v2FacilitatorRequestSchema,
  v2VerifyResponseSchema,
  v2SettleResponseSchema,
  v2PaymentRequiredSchema,
  type CronosAssetAmount,
  type CronosSpendControl,
  type SignedV2Payment,
  type V2PaymentRequirements,
  type V2PaymentPayload,
  type V2PaymentRequired,
  type V2Resource,
  type V2VerifyResponse,
  type V2SettleResponse,
} from "./protocol/x402v2.js";
export type { Payment, PaymentTerms, PayerPayload, DecodedPayload } from "./protocol/payment.js";
export { TRANSFER_WITH_AUTHORIZATION_TYPES, transferAuthorizationTypedData, type TokenDomain } from "./protocol/eip3009.js";
export { tokenAbi } from "./chain/token-abi.js";

// Facilitator.
export { loadConfig, ConfigError, type FacilitatorConfig, type NetworkConfig } from "./facilitator/config.js";
export { createFacilitator, startFacilitator, StartupError, type Facilitator, type RunningFacilitator, type StartFacilitatorOptions } from "./facilitator/server.js";

// Settlement ledger: one interface, embedded SQLite and PostgreSQL (several instances).
export { openLedger, type OpenLedgerOptions } from "./ledger/open.js";
export {
  LedgerError,
  IllegalTransitionError,
  type Ledger,
  type SettlementRecord,
  type SettlementStatus as LedgerSettlementStatus,
  type BroadcastRecord,
  type ClaimInput,
  type ClaimResult,
  type Lease,
  type Penalty,
  type PenaltySubject,
  type TokenScope,
} from "./ledger/types.js";
export { LedgerRateLimitStore } from "./ledger/rate-limit-store.js";
export { settlementStatusSchema, type SettlementStatus } from "./protocol/schemas.js";

// Seller and buyer SDKs.
export * from "./seller/index.js";
export * from "./buyer/index.js";
