// The wire: what buyers, sellers and facilitators say to each other (both dialects), the Cronos
// networks and token, and EIP-3009's typed data. `cronos-x402-facilitator-kit/protocol`. Starts nothing.

// Wire vocabulary shared by every role.
export * from "./reasons.js";
// The base of every error the kit throws: a stable `code`.
export { KitError, KitErrorOf, type KitErrorParameters } from "./errors.js";
export { NETWORKS, NETWORK_NAMES, CRONOS_TESTNET, CRONOS_MAINNET, CRONOS_MAINNET_ALIAS, canonicalNetwork, type NetworkInfo, type NetworkName } from "./networks.js";
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
} from "./schemas.js";
export { decodePaymentHeader, encodePaymentHeader, encodeBase64Json, decodeBase64Json } from "./header.js";
// The x402 v2 dialect (the `@x402/*` packages), and prices for their sellers and buyers on Cronos.
export {
  X402_V2_VERSION,
  X402V2Header,
  EvmReason,
  V2RequestReason,
  cronosPrice,
  cronosSpendControl,
  caip2OfNetwork,
  networkOfAnyForm,
  networkOfCaip2,
  v2RequirementsOf,
  v2RequirementsSchema,
  v2PaymentPayloadSchema,
  v2FacilitatorRequestSchema,
  v2VerifyResponseSchema,
  v2SettleResponseSchema,
  v2PaymentRequiredSchema,
  PAYMENT_IDENTIFIER,
  PAYMENT_ID_PATTERN,
  paymentIdentifierOf,
  paymentIdentifierExtensionSchema,
  type CronosAssetAmount,
  type CronosSpendControl,
  type SignedV2Payment,
  type V2PaymentRequirements,
  type V2PaymentPayload,
  type V2PaymentRequired,
  type V2Resource,
  type V2VerifyResponse,
  type V2SettleResponse,
} from "./x402v2.js";
// The x402 v2 `bazaar` extension (resource discovery): declarations and the rules they are checked by.
export {
  BAZAAR,
  bazaarDeclarationSchema,
  bazaarDeclarationOf,
  isValidBazaarDeclaration,
  isValidRouteTemplate,
  SELLER_DECLARATION,
  type BazaarDeclaration,
  type DiscoveryDeclaration,
} from "./bazaar.js";
export type { Payment, PaymentTerms, PayerPayload, DecodedPayload } from "./payment.js";
export { TRANSFER_WITH_AUTHORIZATION_TYPES, transferAuthorizationTypedData, type TokenDomain } from "./eip3009.js";
export { settlementStatusSchema, type SettlementStatus } from "./schemas.js";
