// The settler: a verified payment claimed, simulated and sent (or handed to a key holder), and its outcome waited for.
import type { SettlementRecord } from "../ledger/types.js";
import type { SettlementDeps } from "./deps.js";
import type { SettlementResult } from "./result.js";
import { answerOfRow } from "./result.js";
import type { NetworkRuntime } from "./runtime.js";
import { sendClaimed } from "./send.js";
import { simulate } from "./simulate.js";
import { step } from "../telemetry/spans.js";
import type { VerifiedPayment } from "./verify-outcome.js";

/**
 * Settles one verified authorization through the ledger, as one of several instances: claims it (with the
 * payer's balance reservation), so that duplicates and over-committed payers cost no simulation; then
 * simulates it; an instance that holds a relayer key's lease sends it at once, recording each signed
 * transaction before its broadcast; otherwise the claim waits in the ledger for a key holder (the key
 * worker). Either way it then waits, bounded by the settle time-out, for the row's outcome. A claim that
 * exists already is answered from its owner's outcome: one transaction per authorization, whatever
 * instance the settles reach. A ledger call that fails rejects (nothing was recorded as sent).
 */
export async function settleVerified(deps: SettlementDeps, payment: VerifiedPayment): Promise<SettlementResult> {
  try {
    return await claimAndSettle(deps, payment);
  } catch (error) {
    // Cheap when it was not the ledger: the watch probes the database once before it says anything.
    deps.observer.ledgerFault(error);
    throw error;
  }
}

async function claimAndSettle(deps: SettlementDeps, payment: VerifiedPayment): Promise<SettlementResult> {
  const { ledger, settings, instanceId } = deps;
  const { runtime, payload, head } = payment;
  const { config } = runtime;
  const authorization = payload.authorization;
  const deadline = performance.now() + settings.settleTimeoutMs;
  for (;;) {
    const claim = await ledger.claim({
      key: { chainId: config.chainId, token: config.token, authorizer: authorization.from, nonce: authorization.nonce },
      network: config.network,
      payee: authorization.to,
      value: payment.value,
      validBefore: authorization.validBefore,
      balance: payment.balance,
      balanceBlock: head.number,
      owner: instanceId,
      ownerTtlMs: settings.ownerTtlMs,
      deadlineMs: settings.settleTimeoutMs,
    });
    if (claim.outcome === "overBalance") return { kind: "overBalance" };
    if (claim.outcome === "claimed") return deps.inFlight.claim(claim.record.id, () => settleClaimed(deps, claim.record, payment, deadline));
    const { record } = claim;
    if (record.status === "settled") return { kind: "alreadyUsed", record };
    const outcome = (await outcomeOf(deps, record.id, deadline)) ?? record;
    // The settle it joined was given up before anything was sent (its instance lost the database
    // meanwhile, say): nothing is out there, so this one claims the authorization afresh.
    if (outcome.status === "failed" && outcome.errorCode === "notSent" && deadline - performance.now() > 1_000) continue;
    if (outcome.status === "failed") return answerOfRow(deps, runtime, outcome);
    return { kind: "alreadyUsed", record: outcome };
  }
}

/** A claim of this settle's: simulated, then sent from a key this instance holds, or handed to a key holder. */
async function settleClaimed(deps: SettlementDeps, claimed: SettlementRecord, payment: VerifiedPayment, deadline: number): Promise<SettlementResult> {
  const { ledger, instanceId } = deps;
  const network: NetworkRuntime = payment.runtime;
  let simulation;
  try {
    simulation = await step("x402 simulate", {}, () => simulate(deps, payment));
  } catch (error) {
    await ledger.withdraw(claimed.id, { code: "notSent", owner: instanceId }).catch(() => undefined);
    throw error;
  }
  if ("refusal" in simulation) {
    // Refused before sending: the row fails with the reason (and may be claimed again later).
    await ledger.withdraw(claimed.id, { code: simulation.refusal, owner: instanceId });
    return { kind: "failed", code: simulation.refusal };
  }
  const from = network.relayer.pick(deps.keys.held());
  const sent = from ? await sendClaimed(deps, claimed, simulation.call, network, from, deadline) : "fenced";
  if (sent !== "fenced") return sent;
  // No key of ours to send from (or its lease lapsed meanwhile): a key holder sends it.
  if (await ledger.requeue(claimed.id, instanceId, simulation.call)) {
    deps.logger.debug({ id: claimed.id, network: network.config.network }, "settle handed to a relayer key holder");
  }
  let record = (await outcomeOf(deps, claimed.id, deadline)) ?? claimed;
  if (record.status === "claimed") {
    // Nothing was sent in time: withdraw it (while nobody has recorded a transaction), so nothing is sent after the answer.
    const withdrawn = await ledger.withdraw(record.id, { code: "notSent", owner: record.owner ?? null });
    if (withdrawn) return { kind: "notSent", fault: { code: "not_sent", network: network.config.network, why: "noKeyHolder" } };
    record = (await ledger.getById(record.id)) ?? record;
  }
  return answerOfRow(deps, network, record);
}

/**
 * Waits until `deadline` for the outcome of a row another settle or a key holder is working on. The
 * send is out of this settle's hands, so a ledger that stops answering meanwhile is waited out (the
 * other side goes on, and writes its outcome when the database is back); only at the deadline does
 * the error stand.
 */
async function outcomeOf(deps: SettlementDeps, id: number, deadline: number): Promise<SettlementRecord | undefined> {
  for (;;) {
    try {
      return await deps.ledger.waitForOutcome(id, Math.max(0, deadline - performance.now()));
    } catch (error) {
      if (deadline - performance.now() < 500) throw error;
      deps.observer.ledgerFault(error);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}
