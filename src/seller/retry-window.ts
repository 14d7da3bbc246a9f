// One payment, one answer and its retries: a settled payment is served again only within maxTimeoutSeconds of its block's time,
// from the facilitator's record of that authorization paying this route's price to its payee, and only on the route it was
// first served on.
import type { PaymentRequirements, SettlementStatus } from "../protocol/schemas.js";
import { EvmReason, networkOfAnyForm } from "../protocol/x402v2.js";
import type { Exchange } from "./exchange.js";
import { FacilitatorError } from "./facilitator-client.js";
import { PaidRoutes } from "./paid-routes.js";
import { REQUIREMENTS_DEFAULTS } from "./requirements.js";
import { SellerError } from "./options.js";

/** The routes this process's sellers served payments on (every route of every `requirePayment` shares it). */
const paidRoutes = new PaidRoutes();

/** A route's retry window, in milliseconds. */
function windowOf(exchange: Exchange): number {
  return (exchange.requirements.maxTimeoutSeconds ?? REQUIREMENTS_DEFAULTS.maxTimeoutSeconds) * 1000;
}

/**
 * Whether a settled payment (`settledAt`, ms) may be served on this route: the route it was first served on in
 * this process, or any when it was served on none (it is bound to this one now, until its window ends). On another
 * route it is answered 402 saying which one it paid for. A route is its resource: the requirements' `resource` as
 * the seller wrote it, else the request's path and query (not its host: the instances of one seller behind a
 * proxy answer one resource under several names). Without the authorization (a header the seller did not
 * decode) it serves.
 */
export function onItsRoute(exchange: Exchange, network: string, authorization: { from: string; nonce: string } | undefined, settledAt: number): boolean {
  if (!authorization) return true;
  const route = exchange.requirements.resource ?? exchange.req.originalUrl;
  const key = `${networkOfAnyForm(network) ?? network}:${authorization.from}:${authorization.nonce}`.toLowerCase();
  const bound = paidRoutes.bind(key, route, settledAt + windowOf(exchange), exchange.settings.clock());
  if (bound === route) return true;
  exchange.paymentRequired(
    SellerError.paymentAlreadyUsed,
    `this payment was made for ${bound}, and a payment is served again only on the resource it paid for; sign a new payment for this one`,
    EvmReason.nonceAlreadyUsed,
  );
  return false;
}

/** A settlement status that says settled, with the hash, block and time a settled one carries. */
export type Settled = SettlementStatus & { txHash: string; blockNumber: number; timestamp: string };

/** Whether a payment settled at `timestamp` may still be served; if not, it is answered 402 saying why. */
export function withinRetryWindow(exchange: Exchange, timestamp: string): boolean {
  const windowMs = windowOf(exchange);
  const settledAt = Date.parse(timestamp);
  const until = settledAt + windowMs;
  if (exchange.settings.clock() <= until) return true;
  exchange.paymentRequired(
    SellerError.paymentAlreadyUsed,
    `this payment was settled at ${new Date(settledAt).toISOString()}, and a payment is served again only within maxTimeoutSeconds (${windowMs / 1000} s) of its settlement, until ${new Date(until).toISOString()}; sign a new payment`,
    EvmReason.nonceAlreadyUsed,
  );
  return false;
}

/**
 * The facilitator's record of the authorization's settlement when it confirms one of this route's price to
 * its payee (built from the receipt: the money truth), else `undefined`. Throws on a lookup fault.
 */
export async function settledRecord(exchange: Exchange, network: string, authorization: { from: string; nonce: string }): Promise<Settled | undefined> {
  const status = await exchange.settings.facilitator.settlement({ network, from: authorization.from, nonce: authorization.nonce });
  return status && settles(status, authorization.from, exchange.requirements) ? status : undefined;
}

/**
 * A payment the facilitator calls used: a retry of one it settled for this route's price is served again within
 * the window on the route it was served on (`serve`), one after it or on another route gets 402 saying so, and
 * anything else `refuse()`s as before. A busy
 * facilitator is 503 (the retry may yet be served); another lookup fault keeps the refusal.
 */
export async function retry(
  exchange: Exchange,
  network: string,
  authorization: { from: string; nonce: string } | undefined,
  serve: (status: Settled) => void,
  refuse: () => void,
): Promise<void> {
  let status: Settled | undefined;
  try {
    status = authorization && (await settledRecord(exchange, network, authorization));
  } catch (error) {
    if (error instanceof FacilitatorError && error.busy) return exchange.unavailable("lookup", error);
    exchange.logFault("lookup", error);
  }
  if (!status) return refuse();
  if (withinRetryWindow(exchange, status.timestamp) && onItsRoute(exchange, network, authorization, Date.parse(status.timestamp))) serve(status);
}

/**
 * Whether the facilitator's record says this payer's authorization settled this route's price to its
 * payee (a record of the same nonce paying another payee or value is not this route's payment).
 */
function settles(status: SettlementStatus, from: string, requirements: PaymentRequirements): status is Settled {
  return (
    status.status === "settled" &&
    status.txHash !== null &&
    status.blockNumber !== undefined &&
    status.timestamp !== undefined &&
    status.from.toLowerCase() === from.toLowerCase() &&
    status.to.toLowerCase() === requirements.payTo.toLowerCase() &&
    status.value === requirements.maxAmountRequired
  );
}
