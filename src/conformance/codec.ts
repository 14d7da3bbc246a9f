import type { Address, Hex } from "viem";
import type { PaymentRequirementsInput } from "../protocol/schemas.js";
import type { ExpectedReason } from "./expected-reason.js";
import type { RefusalCase } from "./cases.js";
import type { Dialect } from "./check.js";
import type { Answer, FacilitatorHttp } from "./http.js";
import type { Target } from "./target.js";

/** A payment as the cases build it: a Cronos header and the requirements it is judged against. */
export interface CasePayment {
  paymentHeader: string;
  paymentRequirements: PaymentRequirementsInput;
}

/** What a settle answer said about its transaction. */
export interface SettledAnswer {
  txHash: Hex;
  /** When the dialect's answer carries them (the Cronos one does). */
  blockNumber?: number;
  timestamp?: string;
}

/**
 * One dialect as the checks speak it: how a payment goes over the wire and how each answer must look.
 * The checks themselves (which payment, which outcome) are the same for every dialect.
 */
export interface Codec {
  dialect: Dialect;
  /** The network as this dialect names it (`cronos-testnet`, `eip155:338`): in answers and result names. */
  networkName(target: Target): string;
  /** Whether a refusal case has a form in this dialect (a header that is not base64 has none in x402 v2). */
  expresses(refusal: RefusalCase): boolean;
  /** POSTs `payment` to verify or settle. */
  send(http: FacilitatorHttp, operation: "verify" | "settle", payment: CasePayment): Promise<Answer>;
  /** The refusal of `payment` with the expected reason (settle: its own word for it); the transaction settle named, if any. */
  expectRefused(operation: "verify" | "settle", answer: Answer, expected: ExpectedReason, payment: CasePayment): { txHash?: Hex };
  /** verify's acceptance of a payment by `payer`. */
  expectValid(answer: Answer, payer: Address): void;
  /** settle's success for this payment, every field as the dialect's clients insist. */
  expectSettled(answer: Answer, expected: { payer: Address; payTo: Address; value: bigint; target: Target }): SettledAnswer;
  /** Whether an answer reports a settlement (to count the winners of a race). */
  isSettled(answer: Answer): boolean;
}
