// Helpers only: importing this file runs nothing.
//
// The reason texts the facilitator must answer, copied from the specification (facilitator-spec.md section 7.1 for
// verify, 7.2 for settle; decisions.md "Verify" for the texts it adds) and, for the two texts of the project's own
// (the x402 v2 payload, the payment identifier), from docs/conformance.md. Written out here so that no test
// compares the code's answers with the code's own constants.

/** Verify's `invalidReason` texts, by check. */
export const SPEC_VERIFY = {
  invalidBase64: "Invalid Base64 paymentHeader",
  invalidHeader: (what: string) => `Invalid paymentHeader: ${what}`,
  unsupportedScheme: (scheme: string) => `Unsupported scheme: ${scheme}`,
  unsupportedNetwork: (network: string) => `Unsupported network: ${network}`,
  unsupportedAsset: (asset: string) => `Unsupported asset: ${asset}`,
  invalidAmount: (amount: string) => `Invalid amount: ${amount}`,
  recipientMismatch: "Recipient does not match payTo address",
  invalidSignature: "Invalid EIP-3009 signature",
  notYetValid: "Authorization not yet valid",
  expired: "Authorization expired",
  alreadyUsed: "Authorization already used",
  insufficientBalance: "ERC20: transfer amount exceeds balance",
} as const;

/** The project's own verify texts (docs/conformance.md): the x402 v2 payload's shape, the payment identifier's conflict, an operator's hook's refusal. */
export const PROJECT_VERIFY = {
  invalidPayload: (what: string) => `Invalid paymentPayload: ${what}`,
  paymentIdentifierInUse: (id: string) => `Payment identifier ${id} is already used by another payment`,
  refusedByOperator: (reason: string) => `Payment refused: ${reason}`,
} as const;

/** Settle's `error` texts (`event: payment.failed`), by settle code. */
export const SPEC_SETTLE = {
  alreadyUsed: "Authorization already used",
  expired: "Authorization expired",
  notYetValid: "Authorization not yet valid",
  insufficientBalance: "ERC20: transfer amount exceeds balance",
  invalidSignature: "Invalid signature",
  failedOnChain: "Transaction failed on-chain",
} as const;
