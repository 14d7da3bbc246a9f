// The faults of verify and settle: not protocol outcomes. Each is a code with its facts; the HTTP edge words the answer.
import type { Hex } from "viem";
import { KitError } from "../protocol/errors.js";
import type { NetworkName } from "../protocol/networks.js";

/** Which chain read failed: the payer's state (verify), the settlement's simulation, or the network's fees. */
export type ChainRead = "state" | "simulation" | "fees";

/** Why a settle gave up before anything was sent: no key holder sent it in time, its claim was given up, or the node refused the send. */
export type NotSentWhy = "noKeyHolder" | "givenUp" | "refused";

/** A fault's code and the facts its answer is worded from. */
export type FaultFacts =
  /** The settlement ledger could not be read or written (nothing was recorded as sent). */
  | { code: "ledger_unavailable" }
  /** A chain read of `network` failed. */
  | { code: "chain_unreadable"; network: NetworkName; read: ChainRead }
  /** The network asks more per gas than MAX_FEE_PER_GAS_GWEI: nothing was sent. */
  | { code: "fee_cap"; neededWei: bigint; capWei: bigint }
  /** Given up before anything was sent; `detail`: the node's own refusal, when it refused. */
  | { code: "not_sent"; network: NetworkName; why: NotSentWhy; detail?: string }
  /**
   * It is not known yet whether the payment was made (a read failed, or the authorization is used and no log
   * of it was found): `txHash` ours, when it was mined; `reason` the decision's account of what it could not read.
   */
  | { code: "payment_undecided"; network: NetworkName; txHash?: Hex; reason: string }
  /** An operator's before-hook (`onBeforeVerify`, `onBeforeSettle`) threw, or did not answer within `timeoutMs`: nothing was claimed or sent. */
  | { code: "hook_failed"; hook: string; failure: "threw" | "timedOut"; timeoutMs: number };

/** A fault's code. */
export type FaultCode = FaultFacts["code"];

/**
 * A fault (RPC down, the ledger unreachable, the fee cap, no verdict yet): not a protocol outcome. `code` and
 * `facts` say what it is; the HTTP edge answers it by route, as decided (verify 500; settle 503: nothing was
 * sent, or what was sent is not decided yet), in words made from them.
 */
export class FacilitatorFault extends KitError<FaultCode> {
  override name = "FacilitatorFault";
  constructor(
    readonly facts: FaultFacts,
    options?: ErrorOptions,
  ) {
    super(facts.code, describe(facts), options);
  }
}

/**
 * A settle refused because the payer (whose signature was proven) spent its settle quota: answered
 * 429 with `Retry-After`. Nothing was claimed or sent.
 */
export class PayerQuotaExceeded extends KitError<"payer_quota_exceeded"> {
  override name = "PayerQuotaExceeded";
  constructor(readonly retryAfterSeconds: number) {
    super("payer_quota_exceeded", `the payer's settle quota is spent; retry in ${retryAfterSeconds} s`);
  }
}

/** A fault's facts in one line, for logs (the answer's words are the HTTP edge's). */
function describe(facts: FaultFacts): string {
  const parts: string[] = [facts.code];
  if ("network" in facts) parts.push(`on ${facts.network}`);
  if ("read" in facts) parts.push(`(${facts.read})`);
  if ("why" in facts) parts.push(`(${facts.why}${facts.detail ? `: ${facts.detail}` : ""})`);
  if ("neededWei" in facts) parts.push(`(${facts.neededWei} wei per gas needed, cap ${facts.capWei})`);
  if ("hook" in facts) parts.push(`(${facts.hook} ${facts.failure === "threw" ? "threw" : `timed out after ${facts.timeoutMs} ms`})`);
  if ("reason" in facts) parts.push(`${facts.txHash ? `after ${facts.txHash} ` : ""}(${facts.reason})`);
  return parts.join(" ");
}
