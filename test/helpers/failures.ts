import { SellerError } from "../../src/seller/index.js";
import { SettleError, VerifyReason } from "../../src/protocol/reasons.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// docs/failures.md's table "every failure on demand": one row per spec error and per fault, what the buyer sees.
// test/e2e/failures.test.ts makes each happen through the kit's seller and buyer and asserts exactly this;
// test/e2e/failures-docs.test.ts checks that table names the same rows with the same answers.

/** What the buyer of a row sees: the seller's status, its `error` and `reason`, and `Retry-After` when it says one. */
export interface FailureRow {
  /** The table's first column: "to test how your seller/buyer handles …". */
  what: string;
  status: number;
  error?: string;
  reason?: string;
  /** "2" (the facilitator's settle 503), or "busy" (the seconds of the busy fault). */
  retryAfter?: "2" | "busy";
}

const verifyFailed = (reason: string): Omit<FailureRow, "what"> => ({ status: 402, error: SellerError.verificationFailed, reason });
const settleFailed = (reason: string): Omit<FailureRow, "what"> => ({ status: 402, error: SellerError.settlementFailed, reason });

/** The rows, in the table's order. */
export const FAILURE_ROWS = {
  paid: { what: "a payment that goes through (the baseline)", status: 200 },
  noPayment: { what: "no payment", status: 402, error: SellerError.paymentRequired },
  invalidBase64: { what: "an `X-PAYMENT` that is not base64", ...verifyFailed(VerifyReason.invalidBase64) },
  invalidHeader: { what: "an `X-PAYMENT` of the wrong shape", ...verifyFailed(VerifyReason.invalidHeader("payload.signature Invalid input: expected string, received undefined")) },
  unsupportedScheme: { what: "a payment in another scheme", ...verifyFailed(VerifyReason.unsupportedScheme("upto")) },
  unsupportedNetwork: { what: "a payment signed for another network", ...verifyFailed(VerifyReason.unsupportedNetwork("cronos-mainnet")) },
  unsupportedAsset: { what: "a route priced in a token the facilitator does not settle", ...verifyFailed(VerifyReason.unsupportedAsset("0x000000000000000000000000000000000000bEEF")) },
  invalidAmount: { what: "a payment of another amount", ...verifyFailed(VerifyReason.invalidAmount("5000")) },
  recipientMismatch: { what: "a payment to another payee", ...verifyFailed(VerifyReason.recipientMismatch) },
  invalidSignature: { what: "a signature over another EIP-712 domain", ...verifyFailed(VerifyReason.invalidSignature) },
  notYetValid: { what: "an authorization not valid yet", ...verifyFailed(VerifyReason.notYetValid) },
  expired: { what: "an authorization expired before it is sent", ...verifyFailed(VerifyReason.expired) },
  alreadyUsed: { what: "an authorization its payer already cancelled", ...verifyFailed(VerifyReason.alreadyUsed) },
  noBalance: { what: "a payer without the balance", ...verifyFailed(VerifyReason.insufficientBalance) },
  balanceVanished: { what: "the payer's balance gone between verify and settle", ...settleFailed(SettleError.insufficientBalance) },
  expiredBetween: { what: "the authorization expiring between verify and settle", ...settleFailed(SettleError.expired) },
  cancelledBetween: { what: "the payer cancelling the authorization between verify and settle", ...settleFailed(SettleError.alreadyUsed) },
  usedBetween: { what: "someone else submitting the authorization on chain first", ...settleFailed(SettleError.alreadyUsed) },
  paused: { what: "USDC.e paused", ...settleFailed(SettleError.failedOnChain) },
  payerBlacklisted: { what: "the payer blacklisted by USDC.e", ...settleFailed(SettleError.failedOnChain) },
  payeeBlacklisted: { what: "your `payTo` blacklisted by USDC.e", ...settleFailed(SettleError.failedOnChain) },
  rpcDown: { what: "the facilitator's RPC down", status: 500, error: SellerError.verifyRequestFailed },
  rpcDownAtSettle: { what: "the facilitator's RPC down at settle", status: 503, error: SellerError.facilitatorBusy, retryAfter: "2" },
  rpcSlow: { what: "a slow RPC", status: 200 },
  rpcLosesBroadcast: { what: "the RPC losing the answer to the broadcast", status: 200 },
  rpcSilentAtSettle: { what: "the RPC answering nothing at settle", status: 503, error: SellerError.facilitatorBusy, retryAfter: "2" },
  busy: { what: "the facilitator busy", status: 503, error: SellerError.facilitatorBusy, retryAfter: "busy" },
  busyAtSettle: { what: "the facilitator busy at settle", status: 503, error: SellerError.facilitatorBusy, retryAfter: "busy" },
  down: { what: "the facilitator down", status: 500, error: SellerError.verifyRequestFailed },
  restarted: { what: "the facilitator restarting with the settle in flight", status: 500, error: SellerError.settleRequestFailed },
  slowBlocks: { what: "blocks not coming for a while", status: 200 },
  stuck: { what: "blocks not coming until past `SETTLE_TIMEOUT_SECONDS`", ...settleFailed(SettleError.failedOnChain) },
} as const satisfies Record<string, FailureRow>;

/** The heading of the docs/failures.md section that holds the table. */
export const FAILURE_TABLE_HEADING = "## What your seller and buyer see, failure by failure";
