// POST /v2/x402/verify: the payment read in its dialect, the operator's before-hook, verify's checks, the payment identifier's gate, the after- or failure hook, the answer.
import type { RequestHandler } from "express";
import { identifierGate } from "../../../settlement/payment-identifier.js";
import { verifyPayment } from "../../../settlement/verify.js";
import { refuse, type VerifyAnswerOutcome } from "../../../settlement/verify-outcome.js";
import type { HookRequest, VerifiedHookRequest } from "../../hooks.js";
import { answer, answerFault, failed, readPayment, type PaymentRequest, type RouteContext } from "../payment-request.js";

/**
 * The verify route: the operator's `onBeforeVerify` (which may refuse the payment), verify's checks in the spec's
 * order, then the payment identifier's gate (a payment the id is bound to elsewhere refused; one settled under it
 * before answered valid, as a repeat); `onAfterVerify` or `onVerifyFailure`; answered 200 in the request's dialect;
 * a fault 500.
 */
export function verifyRoute(context: RouteContext): RequestHandler {
  return async (req, res) => {
    const request = readPayment(context, "verify", req, res);
    if (!request) return;
    const { codec, echo, clock } = request;
    try {
      const outcome = await verifyOutcome(context, request);
      const told = outcome.isValid
        ? context.hooks.after<VerifiedHookRequest>("onAfterVerify", {
            ...request.hook,
            authorization: outcome.payload.authorization,
            result: { payer: outcome.payload.authorization.from, network: outcome.runtime.config.network, repeat: "repeat" in outcome },
          })
        : failed(context, request, { kind: "refused", code: outcome.code, reason: codec.verifyText(outcome) });
      if (told) await told;
      answer(request, res, codec.verifyAnswer(outcome, echo));
      clock.verified();
      const counted = clock.start();
      context.record({
        requestId: request.requestId,
        route: "verify",
        dialect: codec.name,
        status: 200,
        network: request.network,
        payer: outcome.payload?.authorization.from,
        payee: outcome.payload?.authorization.to,
        amount: outcome.payload?.authorization.value,
        outcome: outcome.isValid ? "valid" : codec.verifyText(outcome),
        code: outcome.isValid ? "valid" : outcome.code,
        durationMs: performance.now() - request.started,
      });
      clock.stop("metrics", counted);
    } catch (error) {
      await answerFault(context, request, res, error);
    }
  };
}

/** What verify answers: the before-hook's refusal, or the checks' outcome through the payment identifier's gate. */
async function verifyOutcome(context: RouteContext, request: PaymentRequest): Promise<VerifyAnswerOutcome> {
  const { payment, clock } = request;
  const asked = context.hooks.before<HookRequest>("onBeforeVerify", request.hook);
  const refused = asked && (await asked);
  if (refused !== undefined) return refuse("refused", refused);
  const checked = await verifyPayment(payment, context.deps, { clock });
  const since = clock.start();
  const gate = await identifierGate(context.deps, checked, payment.paymentId);
  clock.stop("ledgerReads", since);
  if (gate.verdict === "refuse") {
    return refuse("paymentId", payment.paymentId, { ...(checked.payload ? { payload: checked.payload } : {}), ...(checked.runtime ? { runtime: checked.runtime } : {}) });
  }
  if (gate.verdict === "repeat" && checked.runtime && checked.payload) return { isValid: true, repeat: true, runtime: checked.runtime, payload: checked.payload, txHash: gate.transfer.txHash };
  return checked;
}
