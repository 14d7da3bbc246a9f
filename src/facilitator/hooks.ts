// Lifecycle hooks: an operator's code around verify and settle (allowlists, audit logs, custom limits), each bounded in time.
import type { Address, Hex } from "viem";
import type { NetworkName } from "../protocol/networks.js";
import type { PayerPayload, PaymentTerms } from "../protocol/payment.js";
import type { SettleFailureCode } from "../settlement/settle.js";
import type { VerifyReasonCode } from "../protocol/reasons.js";
import { FacilitatorFault } from "../settlement/faults.js";
import type { DialectName, PaymentRoute } from "./dialects/index.js";
import { StartupError } from "./startup-error.js";

/** A verify or settle request as a hook sees it: the payment as its dialect carried it, decoded. */
export interface HookRequest {
  route: PaymentRoute;
  /** The request's id (its `X-Request-Id`, or one made for it), as the logs name it. */
  requestId: string;
  dialect: DialectName;
  /** The network as the checks see it (x402 v2's `eip155:338` is `cronos-testnet`), or as sent when unknown. */
  network: string;
  /** What the seller asks for. */
  requirements: PaymentTerms;
  /** What the payer signed (its signature included: public, never a secret), when its part could be read. */
  authorization?: PayerPayload["authorization"];
  /** The payer's payment identifier (x402 v2 `payment-identifier`), when it sent one. */
  paymentId?: string;
  /** Aborted once the hook's time ({@link FacilitatorHooks.timeoutMs}) is up: a hook that waits on I/O may stop there. */
  signal: AbortSignal;
}

/** A settle request whose checks passed: its authorization is proven the payer's, valid now, and funded. */
export interface ProvenHookRequest extends HookRequest {
  authorization: PayerPayload["authorization"];
  network: NetworkName;
}

/** What a before-hook answers to refuse the payment: `reason` is put in the answer's words (`Payment refused: <reason>`). */
export interface HookAbort {
  abort: true;
  reason: string;
}

/** A verify answered valid. */
export interface VerifiedHookRequest extends HookRequest {
  authorization: PayerPayload["authorization"];
  result: {
    payer: Address;
    network: NetworkName;
    /** Answered valid as a repeat of a payment settled before under its payment identifier. */
    repeat: boolean;
  };
}

/** How a request ended without the payment: refused (200 with the reason), limited (429), or a fault (500/503). */
export type HookFailure =
  | { kind: "refused"; code: VerifyReasonCode | SettleFailureCode; reason: string; txHash?: Hex }
  | { kind: "limited"; retryAfterSeconds: number }
  | { kind: "fault"; code: string; reason: string };

/** A verify or settle that did not end valid or settled: what its answer said. */
export interface FailedHookRequest extends HookRequest {
  failure: HookFailure;
}

/** A settle answered settled. */
export interface SettledHookRequest extends HookRequest {
  authorization: PayerPayload["authorization"];
  result: {
    txHash: Hex;
    payer: Address;
    payee: Address;
    value: bigint;
    blockNumber: bigint;
    /** The block's time, ISO-8601. */
    timestamp: string;
    /** Answered again for a payment settled before (a repeat under its payment identifier): nothing new happened. */
    repeat: boolean;
  };
}

type Maybe<T> = T | Promise<T>;

/**
 * An operator's code around verify and settle, given to {@link createFacilitator} / `startFacilitator` as `hooks`.
 * Each request whose body reads as a payment passes, in order: its before-hook, then exactly one of its after-hook
 * (valid / settled) or its failure hook (refused, limited, fault), each awaited before the answer is written and each
 * bounded by `timeoutMs`. A before-hook may refuse the payment ({@link HookAbort}); a before-hook that throws or takes
 * longer is a fault (verify 500, settle 503 with `Retry-After`: nothing was claimed or sent). An after- or failure
 * hook that throws or takes longer is logged and the answer stands: a settlement made is answered settled.
 */
export interface FacilitatorHooks {
  /** Before verify's checks, on the payment as sent (nothing proven yet). May refuse it. */
  onBeforeVerify?(request: HookRequest): Maybe<HookAbort | void>;
  /** A verify answered valid. */
  onAfterVerify?(request: VerifiedHookRequest): Maybe<void>;
  /** A verify answered invalid, or a fault (500). */
  onVerifyFailure?(request: FailedHookRequest): Maybe<void>;
  /** Once settle's checks proved the payment (and the payer's quota let it through), before it is claimed or sent. May refuse it. */
  onBeforeSettle?(request: ProvenHookRequest): Maybe<HookAbort | void>;
  /** A settle answered settled (a repeat under its payment identifier included). */
  onAfterSettle?(request: SettledHookRequest): Maybe<void>;
  /** A settle answered `payment.failed`, 429, or a fault (503). */
  onSettleFailure?(request: FailedHookRequest): Maybe<void>;
  /** How long each hook may take, in ms (default 1,000; 1 to 60,000). */
  timeoutMs?: number;
}

/** The name of each hook. */
export type HookName = Exclude<keyof FacilitatorHooks, "timeoutMs">;

/** The longest a refusal's reason is answered with (the rest cut). */
const MAX_REASON = 200;
const DEFAULT_TIMEOUT_MS = 1_000;

/** A before-hook's refusal as the answer words it: one line, printable, at most {@link MAX_REASON} characters. */
function reasonOf(abort: HookAbort): string {
  const text = String(abort.reason)
    .replace(/[\u0000-\u001f\u007f-\u009f]+/g, " ")
    .trim();
  return text.length > 0 ? text.slice(0, MAX_REASON) : "no reason given";
}

/** Where an after- or failure hook that failed is told (the facilitator's log): what it threw, or that it timed out. */
export type HookWarn = (hook: HookName, requestId: string, problem: { threw: unknown } | { timedOutMs: number }) => void;

/**
 * The hooks as the routes run them: each returns `undefined` at once where no hook is set (nothing awaited on the
 * request's path), else a promise bounded by the time-out.
 */
export class HookRunner {
  readonly #hooks: FacilitatorHooks;
  readonly #timeoutMs: number;
  readonly #warn: HookWarn;

  constructor(hooks: FacilitatorHooks, warn: HookWarn) {
    const timeoutMs = hooks.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 60_000) throw new StartupError(`hooks.timeoutMs: must be an integer from 1 to 60000 (ms), got ${String(timeoutMs)}`);
    this.#hooks = hooks;
    this.#timeoutMs = timeoutMs;
    this.#warn = warn;
  }

  /** Runs a before-hook: the refusal's reason, or undefined to go on; throws {@link FacilitatorFault} (`hook_failed`) when it throws or times out. */
  before<R extends HookRequest>(name: "onBeforeVerify" | "onBeforeSettle", request: Omit<R, "signal">): Promise<string | undefined> | undefined {
    const hook = this.#hooks[name] as ((request: R) => Maybe<HookAbort | void>) | undefined;
    if (!hook) return undefined;
    return this.#bounded(request, hook).then((ran) => {
      if (!ran.ok) throw new FacilitatorFault({ code: "hook_failed", hook: name, failure: ran.why, timeoutMs: this.#timeoutMs }, ran.why === "threw" ? { cause: ran.error } : undefined);
      const abort = ran.value;
      return abort && typeof abort === "object" && abort.abort === true ? reasonOf(abort) : undefined;
    });
  }

  /** Runs an after- or failure hook; one that throws or times out is told to the log, and the request goes on. */
  after<R extends HookRequest>(name: "onAfterVerify" | "onVerifyFailure" | "onAfterSettle" | "onSettleFailure", request: Omit<R, "signal">): Promise<void> | undefined {
    const hook = this.#hooks[name] as ((request: R) => Maybe<void>) | undefined;
    if (!hook) return undefined;
    return this.#bounded(request, hook).then((ran) => {
      if (!ran.ok) this.#warn(name, request.requestId, ran.why === "timedOut" ? { timedOutMs: this.#timeoutMs } : { threw: ran.error });
    });
  }

  async #bounded<R extends HookRequest, T>(
    request: Omit<R, "signal">,
    hook: (request: R) => Maybe<T>,
  ): Promise<{ ok: true; value: T } | { ok: false; why: "threw"; error: unknown } | { ok: false; why: "timedOut" }> {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timedOut">((resolve) => {
      timer = setTimeout(() => {
        controller.abort();
        resolve("timedOut");
      }, this.#timeoutMs);
    });
    try {
      // A hook that throws at once, or returns a promise that rejects, alike.
      const ran = Promise.resolve().then(() => hook({ ...request, signal: controller.signal } as R));
      // Its late rejection, after the time-out, is nobody's to handle.
      ran.catch(() => undefined);
      const first = await Promise.race([ran.then((value) => ({ value })), timedOut]);
      if (first === "timedOut") return { ok: false, why: "timedOut" };
      return { ok: true, value: first.value };
    } catch (error) {
      return { ok: false, why: "threw", error };
    } finally {
      clearTimeout(timer);
    }
  }
}

/** The runner of no hooks. */
export const NO_HOOKS = new HookRunner({}, () => {});

/** The runner of `hooks` (none: {@link NO_HOOKS}), telling `logger` of an after- or failure hook that failed. Throws {@link StartupError} for a bad `timeoutMs`. */
export function hookRunner(hooks: FacilitatorHooks | undefined, logger: { warn(fields: object, message: string): void }): HookRunner {
  if (!hooks) return NO_HOOKS;
  return new HookRunner(hooks, (hook, requestId, problem) =>
    logger.warn({ requestId, hook, err: "threw" in problem ? summary(problem.threw) : `no answer within ${problem.timedOutMs} ms` }, "lifecycle hook failed; the answer stands"),
  );
}

/** What a hook threw, in one line. */
function summary(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message.split("\n")[0]}` : String(error);
}
