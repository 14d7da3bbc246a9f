// POST /v2/x402/settle: the payment read in its dialect, settle's checks, the payer's quota, the operator's before-hook, the settler, the catalog, the after- or failure hook, the answer.
import type { RequestHandler } from "express";
import { RequestError } from "../../../protocol/reasons.js";
import { PayerQuotaExceeded } from "../../../settlement/faults.js";
import { checkSettle, settleChecked, type SettleOutcome } from "../../../settlement/settle.js";
import { isSettleErrorCode, settleErrorText } from "../../dialects/codec.js";
import { writeCatalogEntry, type CatalogWrites } from "../catalog-write.js";
import type { QuotaHolder } from "../edge.js";
import type { ProvenHookRequest, SettledHookRequest } from "../../hooks.js";
import { answer, answerFault, failed, readPayment, type PaymentRequest, type RouteContext } from "../payment-request.js";

/** What the settle route is given besides the app's. */
export interface SettleRouteOptions {
  /**
   * The per-payer quota, asked once the signature is proven the payer's (never before: a request that only
   * names a payer must not spend its quota): the seconds to wait when the payer is over it.
   */
  admit?: (payer: string, authorization: string) => Promise<number | undefined>;
  onRateLimited?: (route: "settle", by: QuotaHolder) => void;
  /** The discovery catalog a settlement's declared resource is written to. */
  catalog?: CatalogWrites;
}

/**
 * The settle route: settle's checks (verify again, the revert penalty, the payment identifier's gate), the payer's
 * quota (429), the operator's `onBeforeSettle`, then the settler, the settlement's catalog entry, `onAfterSettle` or
 * `onSettleFailure`, and the answer in the request's dialect: 200 with `payment.settled` or `payment.failed`; a
 * fault 503 with `Retry-After`.
 */
export function settleRoute(context: RouteContext, options: SettleRouteOptions = {}): RequestHandler {
  return async (req, res) => {
    const request = readPayment(context, "settle", req, res);
    if (!request) return;
    const { payment, codec, echo } = request;
    try {
      const outcome = await settleOutcome(context, options, request);
      if (outcome.settled && options.catalog) await writeCatalogEntry(options.catalog, context.deps, req, payment, outcome);
      const told = outcome.settled
        ? context.hooks.after<SettledHookRequest>("onAfterSettle", {
            ...request.hook,
            // Settled: the payer's part was read (a body without one is refused before anything is claimed).
            authorization: request.hook.authorization!,
            result: { txHash: outcome.txHash, payer: outcome.from, payee: outcome.to, value: outcome.value, blockNumber: outcome.blockNumber, timestamp: outcome.timestamp, repeat: outcome.repeat === true },
          })
        : failed(context, request, { kind: "refused", code: outcome.code, reason: settleErrorText(outcome, codec.verifyText), ...(outcome.txHash ? { txHash: outcome.txHash } : {}) });
      if (told) await told;
      answer(request, res, codec.settleAnswer(outcome, echo));
      const authorization = payment.payload.ok ? payment.payload.payload.authorization : undefined;
      context.record({
        requestId: request.requestId,
        route: "settle",
        dialect: codec.name,
        status: 200,
        network: request.network,
        ...(outcome.settled
          ? { payer: outcome.from, payee: outcome.to, amount: outcome.value.toString() }
          : authorization
            ? { payer: authorization.from, payee: authorization.to, amount: authorization.value }
            : {}),
        outcome: outcome.settled ? "settled" : settleErrorText(outcome, codec.verifyText),
        // A verify refusal settle has no word of its own for (a header, a network, an amount…) counts as `refused`.
        code: outcome.settled ? "settled" : isSettleErrorCode(outcome.code) ? outcome.code : "refused",
        txHash: outcome.txHash,
        durationMs: performance.now() - request.started,
      });
    } catch (error) {
      if (error instanceof PayerQuotaExceeded) {
        // The payer's own quota (its signature is proven): the edge limiters' 429, counted as theirs are.
        await failed(context, request, { kind: "limited", retryAfterSeconds: error.retryAfterSeconds });
        options.onRateLimited?.("settle", "payer");
        res.set("Retry-After", String(error.retryAfterSeconds));
        res.status(429).json({ error: RequestError.tooManyRequests, retryAfter: error.retryAfterSeconds });
        return;
      }
      await answerFault(context, request, res, error);
    }
  };
}

/**
 * What settle answers: settle's checks (refused, or a repeat, answered at once); for a payment they proved, the
 * payer's quota ({@link PayerQuotaExceeded}), the operator's `onBeforeSettle` (which may refuse it), then the settler.
 */
async function settleOutcome(context: RouteContext, options: SettleRouteOptions, request: PaymentRequest): Promise<SettleOutcome> {
  const checked = await checkSettle(context.deps, request.payment);
  if ("answer" in checked) return checked.answer;
  const { runtime, payload } = checked.ready;
  const wait = options.admit ? await admit(context, options.admit, runtime.config, payload.authorization) : undefined;
  if (wait !== undefined) throw new PayerQuotaExceeded(wait);
  const asked = context.hooks.before<ProvenHookRequest>("onBeforeSettle", { ...request.hook, authorization: payload.authorization, network: runtime.config.network });
  const refused = asked && (await asked);
  if (refused !== undefined) return { settled: false, code: "refused", detail: refused };
  return settleChecked(context.deps, checked);
}

/** The payer's quota for one authorization; a quota store that fails lets the settle through, as the edge's limiters do. */
async function admit(
  context: RouteContext,
  ask: NonNullable<SettleRouteOptions["admit"]>,
  config: { chainId: number; token: string; network: string },
  authorization: { from: string; nonce: string },
): Promise<number | undefined> {
  const id = `${config.chainId}:${config.token}:${authorization.from}:${authorization.nonce}`.toLowerCase();
  return ask(authorization.from, id).catch((error: unknown) => {
    context.deps.logger.warn({ network: config.network, err: String(error) }, "payer quota unavailable; settle let through");
    return undefined;
  });
}
