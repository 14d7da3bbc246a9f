import { SpanKind } from "@opentelemetry/api";
import type { z } from "zod";
import { X402_VERSION } from "../protocol/reasons.js";
import {
  v2SettleResponseSchema,
  v2VerifyResponseSchema,
  X402_V2_VERSION,
  type V2SettleResponse,
  type V2VerifyResponse,
} from "../protocol/x402v2.js";
import {
  describeZodError,
  settlementStatusSchema,
  settleResponseSchema,
  supportedResponseSchema,
  verifyResponseSchema,
  type PaymentRequirementsInput,
  type SettlementStatus,
  type SettleResponse,
  type SupportedResponse,
  type VerifyResponse,
} from "../protocol/schemas.js";
import { KitError } from "../protocol/errors.js";
import { globalTracer, inSpan } from "../telemetry/spans.js";
import { injectTraceHeaders } from "../telemetry/traceparent.js";

/** A `fetch` implementation (the global one, or a test double). */
export type FetchFunction = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** What went wrong talking to the facilitator. */
export type FacilitatorErrorCode =
  /** The connection failed (refused, reset, DNS). */
  | "unreachable"
  /** No complete answer within `timeoutMs`. */
  | "timeout"
  /** The facilitator answered with a non-2xx status (400, 429, 500, 503, …). */
  | "http_status"
  /** A 2xx answer that is not JSON or does not match the protocol's schema. */
  | "malformed";

/** The facilitator operation that failed (`settlements`: a settlement status lookup). */
export type FacilitatorOperation = "supported" | "verify" | "settle" | "settlements";

/**
 * A fault calling the facilitator: it could not be reached, timed out, answered a non-2xx status
 * or answered something that is not a valid protocol response. A negative but well-formed answer
 * (`isValid: false`, `event: "payment.failed"`) is NOT an error: it is returned as a value.
 */
export class FacilitatorError extends KitError<FacilitatorErrorCode> {
  override name = "FacilitatorError";
  readonly operation: FacilitatorOperation;
  /** The HTTP status, for `http_status` (and `malformed`, where the status was 2xx). */
  readonly status?: number;
  /** What was received or what failed: the body text for `http_status`, the schema problem for `malformed`. */
  declare readonly details: string;
  /** For `http_status`: the seconds the facilitator asked to wait (its `Retry-After`, in seconds or as a date), when it said. */
  readonly retryAfterSeconds?: number;

  constructor(options: {
    code: FacilitatorErrorCode;
    operation: FacilitatorOperation;
    details: string;
    status?: number;
    retryAfterSeconds?: number;
    cause?: unknown;
  }) {
    const status = options.status === undefined ? "" : ` (HTTP ${options.status})`;
    super(options.code, `facilitator ${options.operation} failed: ${options.code}${status}: ${options.details}`, { cause: options.cause, details: options.details });
    this.operation = options.operation;
    if (options.status !== undefined) this.status = options.status;
    if (options.retryAfterSeconds !== undefined) this.retryAfterSeconds = options.retryAfterSeconds;
  }

  /** The facilitator is busy or briefly unavailable (it answered 429 or 503): a retry later may succeed. */
  get busy(): boolean {
    return this.code === "http_status" && (this.status === 429 || this.status === 503);
  }
}

/**
 * The seconds a `Retry-After` value asks for (delay-seconds or an HTTP date), or `undefined` when it is
 * absent or unreadable. Bounded to a day: a buggy or hostile value must not park a client for ever.
 */
export function retryAfterSeconds(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  let seconds: number;
  if (/^\d+$/.test(text)) seconds = Number(text);
  else {
    const at = Date.parse(text);
    if (Number.isNaN(at)) return undefined;
    seconds = Math.max(0, Math.ceil((at - now) / 1000));
  }
  return Math.min(seconds, 86_400);
}

/** The body of verify and settle. `x402Version` defaults to 1, the only version the facilitator speaks. */
export interface FacilitatorRequestBody {
  x402Version?: 1;
  /** The buyer's base64 `X-PAYMENT` value, passed through untouched. */
  paymentHeader: string;
  paymentRequirements: PaymentRequirementsInput;
}

/**
 * The body of verify and settle in x402 v2: the buyer's payment (the decoded `PAYMENT-SIGNATURE`,
 * passed through untouched) and the seller's requirements in v2 form. `x402Version: 2` is added.
 */
export interface V2FacilitatorRequestBody {
  paymentPayload: Record<string, unknown>;
  paymentRequirements: Record<string, unknown>;
}

/**
 * One authorization to look up: `GET /v2/x402/settlements?network=&from=&nonce=`. `network` in any form the
 * facilitator takes (`cronos-testnet`, `cronos`, `eip155:338`, …); the answer names it the same way.
 */
export interface SettlementQuery {
  network: string;
  from: string;
  nonce: string;
}

/** Options of {@link createFacilitatorClient}. */
export interface FacilitatorClientOptions {
  /** Base URL of the facilitator, e.g. `https://facilitator.cronoslabs.org`; `/v2/x402/...` is appended. */
  url: string;
  /**
   * The seller's API key for a facilitator that gives sellers their own quotas: sent as
   * `Authorization: Bearer <key>` on every call. It is never logged nor put in an error.
   */
  apiKey?: string;
  /** Limit of supported and verify calls, covering connection, answer and body, in milliseconds. Default 30 000. */
  timeoutMs?: number;
  /**
   * Limit of settle calls. Default 150 000: longer than the facilitator's own receipt wait (120 s by
   * default), so a slow confirmation is answered by the facilitator (with its txHash) rather than cut off here.
   */
  settleTimeoutMs?: number;
  /** The `fetch` to use. Default: the global `fetch`. */
  fetch?: FetchFunction;
}

/** A typed client of the x402 facilitator API. Every method throws {@link FacilitatorError} on faults. */
export interface FacilitatorClient {
  /** The base URL, without a trailing slash. */
  readonly url: string;
  /** `GET /v2/x402/supported`. */
  supported(): Promise<SupportedResponse>;
  /** `POST /v2/x402/verify`. `isValid: false` is returned, not thrown. */
  verify(request: FacilitatorRequestBody): Promise<VerifyResponse>;
  /** `POST /v2/x402/settle`. `event: "payment.failed"` is returned, not thrown. */
  settle(request: FacilitatorRequestBody): Promise<SettleResponse>;
  /** `POST /v2/x402/verify` in the x402 v2 dialect. `isValid: false` is returned, not thrown. */
  verifyV2(request: V2FacilitatorRequestBody): Promise<V2VerifyResponse>;
  /** `POST /v2/x402/settle` in the x402 v2 dialect. `success: false` is returned, not thrown. */
  settleV2(request: V2FacilitatorRequestBody): Promise<V2SettleResponse>;
  /**
   * `GET /v2/x402/settlements?network=&from=&nonce=`: where the settlement of one authorization stands
   * (built by the facilitator from the transaction's receipt), or `undefined` when it answers 404 (it knows
   * none, or it has no such route).
   */
  settlement(query: SettlementQuery): Promise<SettlementStatus | undefined>;
}

/** Default time limit of supported and verify calls. */
export const DEFAULT_FACILITATOR_TIMEOUT_MS = 30_000;
/** Default time limit of settle calls. */
export const DEFAULT_SETTLE_TIMEOUT_MS = 150_000;

// Longer bodies are cut in error details: they end up in logs and 500 answers.
const MAX_DETAILS_CHARS = 1_000;

/** Creates a {@link FacilitatorClient} for the facilitator at `options.url`. */
export function createFacilitatorClient(options: FacilitatorClientOptions): FacilitatorClient {
  const url = options.url.replace(/\/+$/, "");
  const defaultTimeoutMs = options.timeoutMs ?? DEFAULT_FACILITATOR_TIMEOUT_MS;
  const settleTimeoutMs = options.settleTimeoutMs ?? DEFAULT_SETTLE_TIMEOUT_MS;
  const fetchImpl: FetchFunction = options.fetch ?? ((input, init) => fetch(input, init));
  if (options.apiKey !== undefined && !/^[\x21-\x7e]+$/.test(options.apiKey)) {
    // The key itself is not repeated: messages end up in logs.
    throw new TypeError("apiKey must be a non-empty string of printable ASCII without spaces");
  }
  const auth: Record<string, string> = options.apiKey === undefined ? {} : { Authorization: `Bearer ${options.apiKey}` };

  async function call<S extends z.ZodType>(
    operation: FacilitatorOperation,
    schema: S,
    init: RequestInit,
    query = "",
  ): Promise<z.output<S>> {
    const timeoutMs = operation === "settle" ? settleTimeoutMs : defaultTimeoutMs;
    const controller = new AbortController();
    let timedOut = false;
    let timer: NodeJS.Timeout | undefined;
    // Raced as well as aborted, so an injected fetch that ignores `signal` still times out.
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        timedOut = true;
        controller.abort();
        reject(new Error("time-out"));
      }, timeoutMs);
    });
    const send = async (headers = init.headers) => {
      const response = await fetchImpl(`${url}/v2/x402/${operation}${query}`, { ...init, headers, signal: controller.signal });
      // The body is read under the same time limit: a facilitator may stall mid-answer.
      return { status: response.status, retryAfter: response.headers.get("Retry-After"), text: await response.text() };
    };
    let status: number;
    let text: string;
    let retryAfter: string | null;
    // With an OpenTelemetry SDK registered in this process: the call is a span, and its `traceparent` is sent.
    const tracer = globalTracer();
    const exchange = tracer
      ? () =>
          inSpan(tracer, `x402 facilitator ${operation}`, { kind: SpanKind.CLIENT, attributes: { "http.request.method": init.method ?? "GET" } }, async (span) => {
            const headers = new Headers(init.headers);
            injectTraceHeaders(headers);
            const answer = await send(headers);
            span.setAttribute("http.response.status_code", answer.status);
            return answer;
          })
      : send;
    try {
      ({ status, text, retryAfter } = await Promise.race([exchange(), deadline]));
    } catch (error) {
      if (timedOut) {
        throw new FacilitatorError({ code: "timeout", operation, details: `no answer within ${timeoutMs} ms`, cause: error });
      }
      throw new FacilitatorError({ code: "unreachable", operation, details: describeFetchError(error), cause: error });
    } finally {
      clearTimeout(timer);
    }

    if (status < 200 || status > 299) {
      const wait = retryAfterSeconds(retryAfter);
      throw new FacilitatorError({ code: "http_status", operation, status, details: `HTTP ${status}: ${clip(text)}`, ...(wait === undefined ? {} : { retryAfterSeconds: wait }) });
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new FacilitatorError({ code: "malformed", operation, status, details: `answer is not JSON: ${clip(text)}` });
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      throw new FacilitatorError({
        code: "malformed",
        operation,
        status,
        details: `answer does not match the ${operation} response schema: ${describeZodError(parsed.error)}`,
      });
    }
    return parsed.data;
  }

  const post = (version: number, body: object): RequestInit => ({
    method: "POST",
    headers: { "Content-Type": "application/json", "X402-Version": String(version), ...auth },
    body: JSON.stringify(body),
  });
  const cronosBody = (request: FacilitatorRequestBody) => ({
    x402Version: request.x402Version ?? X402_VERSION,
    paymentHeader: request.paymentHeader,
    paymentRequirements: request.paymentRequirements,
  });
  const v2Body = (request: V2FacilitatorRequestBody) => ({
    x402Version: X402_V2_VERSION,
    paymentPayload: request.paymentPayload,
    paymentRequirements: request.paymentRequirements,
  });

  const get: RequestInit = { method: "GET", headers: { "X402-Version": String(X402_VERSION), ...auth } };
  return {
    url,
    supported: () => call("supported", supportedResponseSchema, get),
    verify: (request) => call("verify", verifyResponseSchema, post(X402_VERSION, cronosBody(request))),
    settle: (request) => call("settle", settleResponseSchema, post(X402_VERSION, cronosBody(request))),
    verifyV2: (request) => call("verify", v2VerifyResponseSchema, post(X402_V2_VERSION, v2Body(request))),
    settleV2: (request) => call("settle", v2SettleResponseSchema, post(X402_V2_VERSION, v2Body(request))),
    async settlement(query) {
      const search = `?${new URLSearchParams({ network: query.network, from: query.from, nonce: query.nonce })}`;
      try {
        return await call("settlements", settlementStatusSchema, get, search);
      } catch (error) {
        if (error instanceof FacilitatorError && error.code === "http_status" && error.status === 404) return undefined;
        throw error;
      }
    },
  };
}

function clip(text: string): string {
  const trimmed = text.trim();
  if (trimmed.length === 0) return "(empty body)";
  return trimmed.length > MAX_DETAILS_CHARS ? `${trimmed.slice(0, MAX_DETAILS_CHARS)}…` : trimmed;
}

/** undici hides the useful part ("ECONNREFUSED 127.0.0.1:1234") in `cause`. */
function describeFetchError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause;
  if (cause instanceof Error && cause.message && cause.message !== error.message) {
    return `${error.message}: ${cause.message}`;
  }
  return error.message;
}
