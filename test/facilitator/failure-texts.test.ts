import { expect } from "chai";
import request from "supertest";
import { keccak256, toHex, type Hex } from "viem";
import { cronosDialect } from "../../src/facilitator/dialects/cronos.js";
import { x402v2Dialect } from "../../src/facilitator/dialects/x402v2.js";
import { faultText } from "../../src/facilitator/dialects/codec.js";
import type { FaultFacts } from "../../src/settlement/faults.js";
import type { ClaimInput, SettlementStore } from "../../src/ledger/types.js";
import {
  SETTLEMENT_FAILURE_CODES,
  SettleError,
  type SettleErrorCode,
  type SettlementFailureCode,
  type VerifyReasonCode,
} from "../../src/protocol/reasons.js";
import type { PaymentDecision } from "../../src/settlement/decision.js";
import type { FailedSettlement, UnwordedRefusal } from "../../src/settlement/settle.js";
import type { SettlementResult } from "../../src/settlement/result.js";
import { openFacilitator } from "../helpers/facilitator.js";
import { PAYEE, PAYER, nonceOf } from "../helpers/ledger.js";
import { PROJECT_VERIFY, SPEC_SETTLE, SPEC_VERIFY } from "../helpers/spec-texts.js";

// The settlement room and the ledger pass codes; only the HTTP edge writes text. These are the texts each code
// must be answered with, written out from the spec (facilitator-spec.md section 7: settle's `error`), the
// kit's `notSent` text (decisions: a settle given up before anything was sent), and `@x402/evm`'s reason codes.

/** Settle's `error` per code: the spec's table, byte for byte. */
const SPEC_SETTLE_TEXT: Readonly<Record<SettleErrorCode, string>> = SPEC_SETTLE;

/** Verify's `invalidReason` per code, with what the code carries (`detail`), and x402 v2's `invalidReason` code for it. */
const VERIFY: Readonly<Record<VerifyReasonCode, readonly [detail: string | undefined, cronos: string, v2Message: string, v2Reason: string]>> = {
  base64: [undefined, SPEC_VERIFY.invalidBase64, SPEC_VERIFY.invalidBase64, "unsupported_payload_type"],
  header: ["authorization.nonce is required", SPEC_VERIFY.invalidHeader("authorization.nonce is required"), PROJECT_VERIFY.invalidPayload("authorization.nonce is required"), "unsupported_payload_type"],
  scheme: ["upto", SPEC_VERIFY.unsupportedScheme("upto"), SPEC_VERIFY.unsupportedScheme("upto"), "invalid_exact_evm_scheme"],
  network: ["base", SPEC_VERIFY.unsupportedNetwork("base"), SPEC_VERIFY.unsupportedNetwork("base"), "invalid_exact_evm_network_mismatch"],
  asset: ["0x0000000000000000000000000000000000000001", SPEC_VERIFY.unsupportedAsset("0x0000000000000000000000000000000000000001"), SPEC_VERIFY.unsupportedAsset("0x0000000000000000000000000000000000000001"), "invalid_exact_evm_eip3009_not_supported"],
  amount: ["999", SPEC_VERIFY.invalidAmount("999"), SPEC_VERIFY.invalidAmount("999"), "invalid_exact_evm_payload_authorization_value_mismatch"],
  recipient: [undefined, SPEC_VERIFY.recipientMismatch, SPEC_VERIFY.recipientMismatch, "invalid_exact_evm_recipient_mismatch"],
  signature: [undefined, SPEC_VERIFY.invalidSignature, SPEC_VERIFY.invalidSignature, "invalid_exact_evm_signature"],
  notYetValid: [undefined, SPEC_VERIFY.notYetValid, SPEC_VERIFY.notYetValid, "invalid_exact_evm_payload_authorization_valid_after"],
  expired: [undefined, SPEC_VERIFY.expired, SPEC_VERIFY.expired, "invalid_exact_evm_payload_authorization_valid_before"],
  used: [undefined, SPEC_VERIFY.alreadyUsed, SPEC_VERIFY.alreadyUsed, "invalid_exact_evm_nonce_already_used"],
  balance: [undefined, SPEC_VERIFY.insufficientBalance, SPEC_VERIFY.insufficientBalance, "invalid_exact_evm_insufficient_balance"],
  paymentId: ["pay_0123456789abcdef", PROJECT_VERIFY.paymentIdentifierInUse("pay_0123456789abcdef"), PROJECT_VERIFY.paymentIdentifierInUse("pay_0123456789abcdef"), "payment_identifier_conflict"],
  refused: ["payer not on the allowlist", PROJECT_VERIFY.refusedByOperator("payer not on the allowlist"), PROJECT_VERIFY.refusedByOperator("payer not on the allowlist"), "payment_refused"],
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

/** Verify refusals settle has no word for: answered with verify's words, and x402 v2's code for them. */
const REFUSALS: ReadonlyArray<UnwordedRefusal> = ["base64", "header", "scheme", "network", "asset", "amount", "recipient", "paymentId"];

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

  it("answers every verify code with the spec's text in the Cronos dialect, and with @x402/evm's reason and the same words in x402 v2", () => {
    for (const [code, [detail, cronos, v2Message, v2Reason]] of Object.entries(VERIFY) as Array<[VerifyReasonCode, (typeof VERIFY)[VerifyReasonCode]]>) {
      const refused = { isValid: false as const, code, ...(detail !== undefined ? { detail } : {}) };
      expect(cronosDialect.verifyAnswer(refused, ECHO), code).to.deep.equal({ isValid: false, invalidReason: cronos });
      expect(x402v2Dialect.verifyAnswer(refused, ECHO), code).to.deep.equal({ isValid: false, invalidReason: v2Reason, invalidMessage: v2Message, payer: PAYER });
    }
  });

  it("answers a verify refusal settle has no word for with verify's own words, in both dialects", () => {
    for (const code of REFUSALS) {
      const [detail, cronos, v2Message, v2Reason] = VERIFY[code];
      const outcome: FailedSettlement = { settled: false, code, ...(detail !== undefined ? { detail } : {}) };
      expect(withoutTime(cronosDialect.settleAnswer(outcome, ECHO) as Record<string, unknown>), code).to.deep.equal({
        x402Version: 1,
        event: "payment.failed",
        network: "cronos-testnet",
        error: cronos,
      });
      expect(x402v2Dialect.settleAnswer(outcome, { network: "eip155:338", payer: PAYER }), code).to.deep.equal({
        success: false,
        errorReason: v2Reason,
        errorMessage: v2Message,
        payer: PAYER,
        transaction: "",
        network: "eip155:338",
      });
    }
  });

  it("words every fault from its code and facts at the edge (verify 500, settle 503), never from a sentence the core made", () => {
    const HASH = keccak256(toHex("undecided"));
    const FAULTS: ReadonlyArray<readonly [FaultFacts, string]> = [
      [{ code: "ledger_unavailable" }, "Service unavailable: the settlement ledger is unavailable"],
      [{ code: "chain_unreadable", network: "cronos-testnet", read: "state" }, "Service unavailable: cannot read cronos-testnet state"],
      [{ code: "chain_unreadable", network: "cronos-mainnet", read: "simulation" }, "Service unavailable: cannot simulate settlement on cronos-mainnet"],
      [{ code: "chain_unreadable", network: "cronos-testnet", read: "fees" }, "Service unavailable: cannot read the fees on cronos-testnet"],
      [{ code: "fee_cap", neededWei: 100n * 10n ** 9n, capWei: 50n * 10n ** 9n }, "Service unavailable: the network asks 100 gwei per gas, above MAX_FEE_PER_GAS_GWEI (50 gwei); nothing was sent"],
      [{ code: "not_sent", network: "cronos-testnet", why: "noKeyHolder" }, "Service unavailable: nothing sent on cronos-testnet: no relayer key holder sent the settlement in time"],
      [{ code: "not_sent", network: "cronos-testnet", why: "givenUp" }, "Service unavailable: nothing sent on cronos-testnet: the settlement was given up before anything was sent"],
      [{ code: "not_sent", network: "cronos-testnet", why: "refused", detail: "nonce too low" }, "Service unavailable: nothing sent on cronos-testnet: the relayer could not send (nonce too low)"],
      [{ code: "payment_undecided", network: "cronos-testnet", reason: "logs unreadable" }, "Service unavailable: it is not known yet whether the settlement on cronos-testnet was paid (logs unreadable); retry"],
      [
        { code: "payment_undecided", network: "cronos-testnet", txHash: HASH, reason: "logs unreadable" },
        `Service unavailable: settlement transaction ${HASH} on cronos-testnet reverted and it is not known yet whether the authorization was paid elsewhere (logs unreadable); retry`,
      ],
      [{ code: "hook_failed", hook: "onBeforeSettle", failure: "threw", timeoutMs: 1_000 }, "Service unavailable: the operator's onBeforeSettle hook failed; nothing was sent"],
      [{ code: "hook_failed", hook: "onBeforeVerify", failure: "timedOut", timeoutMs: 250 }, "Service unavailable: the operator's onBeforeVerify hook did not answer within 250 ms; nothing was sent"],
    ];
    for (const [facts, text] of FAULTS) expect(faultText(facts), facts.code).to.equal(text);
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
