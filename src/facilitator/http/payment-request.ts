// What the verify and settle routes share: a request read as a payment in its dialect, its answer, its fault, its record.
import type { Request, Response } from "express";
import type { Payment } from "../../protocol/payment.js";
import { RequestError } from "../../protocol/reasons.js";
import type { SettlementDeps } from "../../settlement/deps.js";
import { FacilitatorFault } from "../../settlement/faults.js";
import { faultText } from "../dialects/codec.js";
import { dialectOf, type DialectCodec, type Echo, type PaymentRoute } from "../dialects/index.js";
import type { FailedHookRequest, HookFailure, HookRequest, HookRunner } from "../hooks.js";
import type { Logger } from "../logger.js";
import { QUIET_REQUEST_CLOCK, type RequestClock } from "../metrics/stages.js";
import type { OutcomeRecord } from "../outcome-record.js";

/** The `Retry-After` of a settle answered 503 (a fault: nothing sent, or no verdict yet). */
const SETTLE_RETRY_AFTER_SECONDS = 2;

/** What the payment routes are given by the app. */
export interface RouteContext {
  deps: SettlementDeps<Logger>;
  /** Times verify's stages (`METRICS_VERIFY_STAGES`); the quiet clock times nothing. */
  clock: RequestClock;
  /** Records one verify or settle outcome (metrics, the log line, the dashboard's feed). */
  record(record: OutcomeRecord): void;
  /** The operator's lifecycle hooks ({@link NO_HOOKS} when none). */
  hooks: HookRunner;
}

/** One verify or settle request, read as a payment by its dialect. */
export interface PaymentRequest {
  route: PaymentRoute;
  requestId: string;
  /** `performance.now()` when its handler began. */
  started: number;
  codec: DialectCodec;
  payment: Payment;
  /** What the answer repeats from the request (the network as the caller wrote it, the payer). */
  echo: Echo;
  /** The network as the checks see it (x402 v2's `eip155:338` is `cronos-testnet`): what records name. */
  network: string;
  /** The clock of this request: verify's budget, or the quiet one. */
  clock: RequestClock;
  /** What the hooks are told of it (their `signal` is the runner's). */
  hook: Omit<HookRequest, "signal">;
}

/**
 * Reads a verify or settle body as a payment in its dialect. A body that is not one is answered here (400 in the
 * endpoint's shape, recorded): undefined.
 */
export function readPayment(context: RouteContext, route: PaymentRoute, req: Request, res: Response): PaymentRequest | undefined {
  const started = performance.now();
  // The verify budget (METRICS_VERIFY_STAGES) times verify only.
  const clock = route === "verify" ? context.clock : QUIET_REQUEST_CLOCK;
  const since = clock.start();
  const requestId = String(res.locals.requestId);
  const codec = dialectOf(req.body);
  clock.stop("schema", since);
  const read = codec.read(req.body, req.get("X402-Version"), clock);
  if (!read.ok) {
    res.status(400).json(codec.refusal(route, "invalid", read.text, read.echo));
    const network = read.echo.network;
    context.record({ requestId, route, dialect: codec.name, status: 400, network, outcome: read.text, code: "invalid_request", durationMs: performance.now() - started, edge: true });
    return undefined;
  }
  // Records name the network as the checks saw it (x402 v2's eip155:338 is cronos-testnet); answers echo the caller's.
  const { payment } = read;
  const network = payment.requirements.network;
  const hook: Omit<HookRequest, "signal"> = {
    route,
    requestId,
    dialect: codec.name,
    network,
    requirements: payment.requirements,
    ...(payment.payload.ok ? { authorization: payment.payload.payload.authorization } : {}),
    ...(payment.paymentId !== undefined ? { paymentId: payment.paymentId } : {}),
  };
  return { route, requestId, started, codec, payment, echo: read.echo, network, clock, hook };
}

/**
 * Writes a 200 JSON answer: the text and headers `res.json` would send (`application/json; charset=utf-8`,
 * Content-Length), set without Express's generic path, the answer's making and its write timed apart.
 */
export function answer(request: PaymentRequest, res: Response, body: object): void {
  const { clock } = request;
  let since = clock.start();
  const text = JSON.stringify(body);
  res.setHeader("Content-Type", "application/json; charset=utf-8");
  res.setHeader("Content-Length", Buffer.byteLength(text));
  since = clock.lap("answer", since);
  res.end(text);
  clock.stop("write", since);
}

/**
 * Answers a request whose checks threw: a fault is verify 500 and settle 503 (decisions.md: nothing was sent, or
 * what was sent is not decided yet; no verdict either way, `Retry-After`), worded from its code at this edge; any
 * other error is an internal one. Logged and recorded.
 */
export async function answerFault(context: RouteContext, request: PaymentRequest, res: Response, error: unknown): Promise<void> {
  const { route, codec, echo, network, requestId } = request;
  const fault = error instanceof FacilitatorFault ? error : undefined;
  if (fault && fault.facts.code !== "hook_failed") context.deps.observer.rpcError(network);
  const status = route === "verify" ? 500 : 503;
  const text = fault ? faultText(fault.facts) : RequestError.internal;
  await failed(context, request, { kind: "fault", code: fault?.code ?? "internal", reason: text });
  context.deps.logger.error({ requestId, route, dialect: codec.name, network, err: errorSummary(error) }, "request fault");
  // The seller (or buyer) may try again shortly: a retry claims afresh, or gets the decided outcome.
  if (status === 503) res.set("Retry-After", String(SETTLE_RETRY_AFTER_SECONDS));
  res.status(status).json(codec.refusal(route, fault ? "unavailable" : "internal", text, echo));
  context.record({ requestId, route, dialect: codec.name, status, network, outcome: text, code: "fault", durationMs: performance.now() - request.started });
}

/** An error in one line, with its cause's first line: what a log keeps. */
export function errorSummary(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message.split("\n")[0]}` : "";
    return `${error.name}: ${error.message.split("\n")[0]}${cause}`;
  }
  return String(error);
}

/** Tells the request's failure hook (`onVerifyFailure`, `onSettleFailure`) how it ended; at once when there is none. */
export function failed(context: RouteContext, request: PaymentRequest, failure: HookFailure): Promise<void> | undefined {
  return context.hooks.after<FailedHookRequest>(request.route === "verify" ? "onVerifyFailure" : "onSettleFailure", { ...request.hook, failure });
}
