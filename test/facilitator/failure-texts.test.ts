import { expect } from "chai";
import request from "supertest";
import { keccak256, toHex, type Hex } from "viem";
import { cronosDialect } from "../../src/facilitator/dialects/cronos.js";
import { x402v2Dialect } from "../../src/facilitator/dialects/x402v2.js";
import type { ClaimInput, SettlementStore } from "../../src/ledger/types.js";
import {
  SETTLEMENT_FAILURE_CODES,
  SettleError,
  type SettleErrorCode,
  type SettlementFailureCode,
} from "../../src/protocol/reasons.js";
import type { PaymentDecision } from "../../src/settlement/decision.js";
import type { FailedSettlement, UnwordedRefusal } from "../../src/settlement/settle.js";
import type { SettlementResult } from "../../src/settlement/result.js";
import { openFacilitator } from "../helpers/facilitator.js";
import { PAYEE, PAYER, nonceOf } from "../helpers/ledger.js";

// The settlement room and the ledger pass codes; only the HTTP edge writes text. These are the texts each code
// must be answered with, written out from the spec (facilitator-spec.md section 7: settle's `error`), the
// kit's `notSent` text (decisions: a settle given up before anything was sent), and `@x402/evm`'s reason codes.

/** Settle's `error` per code: the spec's table, byte for byte. */
const SPEC_SETTLE_TEXT: Readonly<Record<SettleErrorCode, string>> = {
  alreadyUsed: "Authorization already used",
  expired: "Authorization expired",
  notYetValid: "Authorization not yet valid",
  insufficientBalance: "ERC20: transfer amount exceeds balance",
  invalidSignature: "Invalid signature",
  failedOnChain: "Transaction failed on-chain",
};

/** The status lookup's `error` per code a failed row may hold. */
const STATUS_TEXT: Readonly<Record<SettlementFailureCode, string>> = {
  ...SPEC_SETTLE_TEXT,
  notSent: "Service unavailable: given up before any transaction was sent",
};

/** x402 v2's `errorReason` per settle code (`@x402/evm`'s codes). */
const V2_SETTLE_REASON: Readonly<Record<SettleErrorCode, string>> = {
  alreadyUsed: "invalid_exact_evm_nonce_already_used",
  expired: "invalid_exact_evm_payload_authorization_valid_before",
  notYetValid: "invalid_exact_evm_payload_authorization_valid_after",
  insufficientBalance: "invalid_exact_evm_insufficient_balance",
  invalidSignature: "invalid_exact_evm_signature",
  failedOnChain: "invalid_exact_evm_transaction_failed",
};

/** Verify refusals settle has no word for: answered with verify's reason, and x402 v2's code for it. */
const REFUSALS: ReadonlyArray<readonly [UnwordedRefusal, string, string]> = [
  ["base64", "Invalid Base64 paymentHeader", "unsupported_payload_type"],
  ["header", "Invalid paymentHeader: authorization.nonce is required", "unsupported_payload_type"],
  ["scheme", "Unsupported scheme: upto", "invalid_exact_evm_scheme"],
  ["network", "Unsupported network: base", "invalid_exact_evm_network_mismatch"],
  ["asset", "Unsupported asset: 0x0000000000000000000000000000000000000001", "invalid_exact_evm_eip3009_not_supported"],
  ["amount", "Invalid amount: 999", "invalid_exact_evm_payload_authorization_value_mismatch"],
  ["recipient", "Recipient does not match payTo address", "invalid_exact_evm_recipient_mismatch"],
  ["paymentId", "Payment identifier pay_0123456789abcdef is already used by another payment", "payment_identifier_conflict"],
];

const ECHO = { network: "cronos-testnet", payer: PAYER };
const TX = keccak256(toHex("failure-texts"));
const withoutTime = ({ timestamp, ...rest }: Record<string, unknown>) => (expect(timestamp).to.be.a("string"), rest);

describe("failure codes become the spec's texts at the HTTP edge only", () => {
  it("holds one text per settle code, and the texts are the spec's", () => {
    expect(SettleError).to.deep.equal(SPEC_SETTLE_TEXT);
    expect([...SETTLEMENT_FAILURE_CODES].sort()).to.deep.equal(Object.keys(STATUS_TEXT).sort());
  });

  it("answers every settle code with the spec's text in the Cronos dialect, with the transaction when known", () => {
    for (const code of Object.keys(SPEC_SETTLE_TEXT) as SettleErrorCode[]) {
      const named = cronosDialect.settleAnswer({ settled: false, code, txHash: TX }, ECHO) as Record<string, unknown>;
      expect(withoutTime(named), code).to.deep.equal({ x402Version: 1, event: "payment.failed", network: "cronos-testnet", error: SPEC_SETTLE_TEXT[code], txHash: TX });
      const unnamed = cronosDialect.settleAnswer({ settled: false, code }, ECHO) as Record<string, unknown>;
      expect(withoutTime(unnamed), code).to.deep.equal({ x402Version: 1, event: "payment.failed", network: "cronos-testnet", error: SPEC_SETTLE_TEXT[code] });
    }
  });

  it("answers every settle code with @x402/evm's reason and the spec's text as errorMessage in the x402 v2 dialect", () => {
    const echo = { network: "eip155:338", payer: PAYER };
    for (const code of Object.keys(SPEC_SETTLE_TEXT) as SettleErrorCode[]) {
      expect(x402v2Dialect.settleAnswer({ settled: false, code, txHash: TX }, echo), code).to.deep.equal({
        success: false,
        errorReason: V2_SETTLE_REASON[code],
        errorMessage: SPEC_SETTLE_TEXT[code],
        payer: PAYER,
        transaction: TX,
        network: "eip155:338",
      });
    }
  });

  it("answers a verify refusal settle has no word for with verify's own reason, in both dialects", () => {
    for (const [code, reason, v2] of REFUSALS) {
      const outcome: FailedSettlement = { settled: false, code, reason };
      expect(withoutTime(cronosDialect.settleAnswer(outcome, ECHO) as Record<string, unknown>), code).to.deep.equal({
        x402Version: 1,
        event: "payment.failed",
        network: "cronos-testnet",
        error: reason,
      });
      expect(x402v2Dialect.settleAnswer(outcome, { network: "eip155:338", payer: PAYER }), code).to.deep.equal({
        success: false,
        errorReason: v2,
        errorMessage: reason,
        payer: PAYER,
        transaction: "",
        network: "eip155:338",
      });
    }
  });

  it("answers the status lookups of a failed row of every code with its text, by hash and by authorization, in either network form", async () => {
    const opened = await openFacilitator();
    const ledger: SettlementStore = opened.facilitator.coordination.ledger;
    for (const [i, code] of SETTLEMENT_FAILURE_CODES.entries()) {
      const txHash = keccak256(toHex(`failed-row:${code}`));
      const nonce = nonceOf(`failure-text:${code}`);
      const claim: ClaimInput = {
        key: { chainId: 338, token: opened.chain.token, authorizer: PAYER, nonce },
        network: "cronos-testnet",
        payee: PAYEE,
        value: 1_000_000n + BigInt(i),
        validBefore: 2_000_000_000n,
        owner: "failure-texts",
        ownerTtlMs: 60_000,
        deadlineMs: 60_000,
      };
      const claimed = await ledger.claim(claim);
      if (claimed.outcome !== "claimed") throw new Error(`${code}: not claimed`);
      const failed = await ledger.markFailed(claimed.record.id, { code, txHash });
      expect(failed?.errorCode, code).to.equal(code);

      const expected = {
        status: "failed",
        network: "cronos-testnet",
        from: PAYER,
        to: PAYEE,
        value: String(1_000_000n + BigInt(i)),
        nonce,
        txHash,
        transactions: [],
        error: STATUS_TEXT[code],
      };
      const byHash = await request(opened.app).get(`/v2/x402/settlements/${txHash}`);
      expect([byHash.status, byHash.body], code).to.deep.equal([200, expected]);
      for (const network of ["cronos-testnet", "eip155:338"]) {
        const byAuthorization = await request(opened.app).get("/v2/x402/settlements").query({ network, from: PAYER, nonce });
        expect([byAuthorization.status, byAuthorization.body], `${code} ${network}`).to.deep.equal([200, { ...expected, network }]);
      }
    }
    await opened.facilitator.close();
  });

  it("takes codes, never sentences, wherever the settlement room or the ledger carries a failure (checked by the type check)", () => {
    const code: SettlementFailureCode = "notSent";
    // @ts-expect-error a settle text is not a settle code
    const sentence: SettleErrorCode = "Authorization already used";
    // @ts-expect-error a failed settlement carries a code, not an `error` text (the codecs write the text)
    const outcome: FailedSettlement = { settled: false, code: "alreadyUsed", error: "Authorization already used" };
    // @ts-expect-error the pipeline's result carries a code
    const result: SettlementResult = { kind: "failed", error: "Transaction failed on-chain" };
    // @ts-expect-error the payment decision's failure is a code
    const decision: PaymentDecision = { outcome: "failed", cause: "reverted", error: "Transaction failed on-chain", by: { txHash: TX as Hex, blockNumber: 1n } };
    const markFailed = (store: Pick<SettlementStore, "markFailed">) =>
      // @ts-expect-error the ledger records codes only
      store.markFailed(1, { code: "Transaction failed on-chain" });
    expect([code, sentence, outcome.code, result.kind, decision.outcome, typeof markFailed]).to.deep.equal([
      "notSent",
      "Authorization already used",
      "alreadyUsed",
      "failed",
      "failed",
      "function",
    ]);
  });
});
