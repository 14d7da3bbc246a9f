// POST /v2/x402/verify: the payment read in its dialect, verify's checks, the payment identifier's gate, the answer.
import type { RequestHandler } from "express";
import type { Authorization } from "../../../protocol/schemas.js";
import type { NetworkName } from "../../../protocol/networks.js";
import { identifierGate } from "../../../settlement/payment-identifier.js";
import { verifyPayment } from "../../../settlement/verify.js";
import { refuse, type VerifyAnswerOutcome } from "../../../settlement/verify-outcome.js";
import { answer, answerFault, errorSummary, readPayment, type RouteContext } from "../payment-request.js";

/** A payment verify found valid: its network and the authorization it carries (signature included). */
export interface ValidPayment {
  network: NetworkName;
  authorization: Authorization;
}

/** What the verify route is given besides the app's: the local stack's hook after a valid verify. */
export interface VerifyRouteOptions {
  afterVerify?: (payment: ValidPayment) => Promise<void>;
}

/**
 * The verify route: verify's checks in the spec's order, then the payment identifier's gate (a payment the
 * id is bound to elsewhere refused; one settled under it before answered valid, as a repeat), answered 200 in
 * the request's dialect; a fault 500.
 */
export function verifyRoute(context: RouteContext, options: VerifyRouteOptions = {}): RequestHandler {
  return async (req, res) => {
    const request = readPayment(context, "verify", req, res);
    if (!request) return;
    const { payment, codec, echo, clock } = request;
    try {
      const checked = await verifyPayment(payment, context.deps, { clock });
      const since = clock.start();
      const gate = await identifierGate(context.deps, checked, payment.paymentId);
      clock.stop("ledgerReads", since);
      let outcome: VerifyAnswerOutcome = checked;
      if (gate.verdict === "refuse") outcome = refuse("paymentId", payment.paymentId, { ...(checked.payload ? { payload: checked.payload } : {}), ...(checked.runtime ? { runtime: checked.runtime } : {}) });
      else if (gate.verdict === "repeat" && checked.runtime && checked.payload) outcome = { isValid: true, repeat: true, runtime: checked.runtime, payload: checked.payload, txHash: gate.transfer.txHash };
      else if (checked.isValid && options.afterVerify) {
        await options.afterVerify({ network: checked.runtime.config.network, authorization: checked.payload.authorization }).catch((error: unknown) =>
          context.deps.logger.warn({ requestId: request.requestId, err: errorSummary(error) }, "after-verify hook failed; the answer stands"),
        );
      }
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
      answerFault(context, request, res, error);
    }
  };
}
