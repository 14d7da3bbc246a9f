/**
 * Every reason text the facilitator answers with: the spec's (section 7) and the project's
 * decisions. One source of truth; tests compare against these constants.
 */

/** `invalidReason` texts of verify. */
export const VerifyReason = {
  invalidBase64: "Invalid Base64 paymentHeader",
  invalidHeader: (what: string) => `Invalid paymentHeader: ${what}`,
  /** The x402 v2 dialect's counterpart of `invalidHeader`: a `paymentPayload` of the wrong shape. */
  invalidPayload: (what: string) => `Invalid paymentPayload: ${what}`,
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
  /** x402 v2 `payment-identifier`: the payer's id came with another authorization first. */
  paymentIdentifierInUse: (id: string) => `Payment identifier ${id} is already used by another payment`,
  /** An operator's lifecycle hook (`onBeforeVerify`, `onBeforeSettle`) refused the payment, for the reason it gave. */
  refusedByOperator: (reason: string) => `Payment refused: ${reason}`,
} as const;

/**
 * Why verify said no, as the checks pass it (the spec's order, then the project's): `base64` and `header` the
 * payer's part unreadable, `scheme` … `recipient` the requirements' checks, `signature`, the window
 * (`notYetValid`, `expired`), the chain's state (`used`, `balance`), and `paymentId` (x402 v2: the payer's id came
 * with another payment first), and `refused` (an operator's lifecycle hook said no: `detail` its reason). Only a dialect's codec words it ({@link verifyReasonText}).
 */
export type VerifyReasonCode =
  | "base64"
  | "header"
  | "scheme"
  | "network"
  | "asset"
  | "amount"
  | "recipient"
  | "signature"
  | "notYetValid"
  | "expired"
  | "used"
  | "balance"
  | "paymentId"
  | "refused";

/**
 * A verify refusal as data: its code and, where the text names it, what was refused as sent (`header`: what
 * is wrong with it; `scheme`, `network`, `asset`, `amount`: the value; `paymentId`: the id).
 */
export interface VerifyRefusal {
  code: VerifyReasonCode;
  detail?: string;
}

/** The text of each verify refusal code, from {@link VerifyReason}: the one table from a code to its words. */
const VERIFY_TEXT: Readonly<Record<VerifyReasonCode, (detail: string) => string>> = {
  base64: () => VerifyReason.invalidBase64,
  header: VerifyReason.invalidHeader,
  scheme: VerifyReason.unsupportedScheme,
  network: VerifyReason.unsupportedNetwork,
  asset: VerifyReason.unsupportedAsset,
  amount: VerifyReason.invalidAmount,
  recipient: () => VerifyReason.recipientMismatch,
  signature: () => VerifyReason.invalidSignature,
  notYetValid: () => VerifyReason.notYetValid,
  expired: () => VerifyReason.expired,
  used: () => VerifyReason.alreadyUsed,
  balance: () => VerifyReason.insufficientBalance,
  paymentId: VerifyReason.paymentIdentifierInUse,
  refused: VerifyReason.refusedByOperator,
};

/** The `invalidReason` text of a verify refusal (the Cronos dialect's words; x402 v2 words `header` as its payload). */
export function verifyReasonText(refusal: VerifyRefusal): string {
  return VERIFY_TEXT[refusal.code](refusal.detail ?? "");
}

/** `error` texts of settle (`event: payment.failed`), by code: the one table from a settle code to its text. */
export const SettleError = {
  alreadyUsed: "Authorization already used",
  expired: "Authorization expired",
  notYetValid: "Authorization not yet valid",
  insufficientBalance: "ERC20: transfer amount exceeds balance",
  invalidSignature: "Invalid signature",
  failedOnChain: "Transaction failed on-chain",
} as const;

/** Texts of request-level faults (HTTP 400/404/413/429/500/503). */
export const RequestError = {
  invalidRequest: (what: string) => `Invalid request: ${what}`,
  unsupportedVersion: (version: unknown) => `Unsupported x402Version: ${String(version)}`,
  tooManyRequests: "Too many requests",
  tooManyConnections: "Service unavailable: too many connections; retry shortly",
  tooManyClientConnections: "Service unavailable: too many connections from this client; retry shortly",
  notFound: "Not found",
  payloadTooLarge: "Payload too large",
  internal: "Internal error",
  unavailable: "Service unavailable",
  // The HTTP edge: refused before the body is read.
  unsupportedMediaType: "Unsupported Media Type: the body must be application/json",
  unsupportedCharset: "Unsupported Media Type: the body must be UTF-8 JSON",
  missingApiKey: "Unauthorized: an API key is required (Authorization: Bearer <key>)",
  unknownApiKey: "Unauthorized: unknown API key",
  detailNeedsApiKeys: "Forbidden: the detailed healthcheck needs API keys configured (API_KEYS) and one of them sent as Authorization: Bearer <key>",
  requestTimeout: "Request timeout",
  badRequest: "Bad request",
  /** 421: the Host header names a host this service does not serve (the local stack's loopback names, `ALLOWED_HOSTS`). */
  misdirected: "Misdirected Request: this service does not answer to that Host (loopback names and ALLOWED_HOSTS only)",
  /** 403: a state-changing dashboard call without this service's own Origin. */
  foreignOrigin: "Forbidden: this call is accepted only from the dashboard's own page (same Origin)",
} as const;

/**
 * Settle's failure codes: what the settle pipeline passes and the ledger records. Only the HTTP edge turns
 * one into its text ({@link SettleError}).
 */
export type SettleErrorCode = keyof typeof SettleError;

/**
 * A failed settlement's code as the ledger records it: a settle error, or `notSent` (given up before any
 * transaction was sent: no verdict, and the authorization may be claimed again).
 */
export type SettlementFailureCode = SettleErrorCode | "notSent";

/** The text of each failure code, as the status lookups answer it: settle's, and this kit's for `notSent`. */
export const SettlementFailureText = {
  ...SettleError,
  notSent: `${RequestError.unavailable}: given up before any transaction was sent`,
} as const satisfies Readonly<Record<SettlementFailureCode, string>>;

/** Every failure code the ledger may hold. */
export const SETTLEMENT_FAILURE_CODES = Object.keys(SettlementFailureText) as readonly SettlementFailureCode[];

/** Whether `value` is one of {@link SETTLEMENT_FAILURE_CODES}. */
export function isSettlementFailureCode(value: unknown): value is SettlementFailureCode {
  return typeof value === "string" && Object.hasOwn(SettlementFailureText, value);
}

/** Settle event names (spec section 6). */
export const SettleEvent = {
  settled: "payment.settled",
  failed: "payment.failed",
} as const;

/** The only protocol version the Cronos facilitator speaks. */
export const X402_VERSION = 1;
/** The only payment scheme. */
export const EXACT_SCHEME = "exact";
