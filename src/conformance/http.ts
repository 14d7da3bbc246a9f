import { brief } from "./brief.js";
import { KitErrorOf } from "../protocol/errors.js";

/** The paths of the facilitator's operations. */
export const PATHS = {
  health: "/healthcheck",
  supported: "/v2/x402/supported",
  verify: "/v2/x402/verify",
  settle: "/v2/x402/settle",
} as const;

/** One answer of the facilitator, as it came over the wire. */
export interface Answer {
  status: number;
  headers: Headers;
  /** The `Content-Type` header, or "" when absent. */
  contentType: string;
  text: string;
  /** The body parsed as JSON; `undefined` when it is not JSON. */
  json: unknown;
}

/** A request to the facilitator. `body` is sent as given when a string, else as JSON. */
export interface HttpRequest {
  method?: "GET" | "POST";
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** Answer a 429 instead of waiting it out (the rate-limit checks look at it). */
  acceptRateLimit?: boolean;
  /** This request's time-out; default the client's. */
  timeoutMs?: number;
}

/** Options of {@link createFacilitatorHttp}. */
export interface FacilitatorHttpOptions {
  /** The facilitator's base URL (`/healthcheck` and `/v2/x402/…` are under it). */
  baseUrl: string;
  /** Per request; settle blocks until its transaction is confirmed. Default 150 s. */
  timeoutMs?: number;
  /** The longest this client waits out a 429 before it gives up on a request. Default 180 s. */
  maxRateLimitWaitMs?: number;
  /** Told when a request waits for the facilitator's rate limit. */
  onWait?: (line: string) => void;
  fetch?: typeof fetch;
  /** Headers every POST carries (e.g. `Authorization: Bearer <seller API key>`); never printed. */
  postHeaders?: Record<string, string>;
  /** How the client waits out a 429; default a timer. */
  sleep?: (ms: number) => Promise<void>;
}

/** The facilitator as the checks speak to it: raw answers, 429s waited out unless asked for. */
export interface FacilitatorHttp {
  readonly baseUrl: string;
  request(request: HttpRequest): Promise<Answer>;
  get(path: string): Promise<Answer>;
  /** POST of a JSON body with the headers the spec names (`Content-Type: application/json`, `X402-Version`). */
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Answer>;
}

/** A facilitator that could not be reached (connection refused, time-out, reset). */
export class UnreachableError extends KitErrorOf("UnreachableError", "unreachable") {}

/** Creates the HTTP side of a conformance run. */
export function createFacilitatorHttp(options: FacilitatorHttpOptions): FacilitatorHttp {
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 150_000;
  const maxWaitMs = options.maxRateLimitWaitMs ?? 180_000;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));

  async function once(request: HttpRequest): Promise<Answer> {
    const method = request.method ?? (request.body === undefined ? "GET" : "POST");
    const headers = method === "POST" ? { ...options.postHeaders, ...request.headers } : (request.headers ?? {});
    const init: RequestInit = { method, headers, signal: AbortSignal.timeout(request.timeoutMs ?? timeoutMs), redirect: "manual" };
    if (request.body !== undefined) init.body = typeof request.body === "string" ? request.body : JSON.stringify(request.body);
    let response: Response;
    try {
      response = await doFetch(`${baseUrl}${request.path}`, init);
    } catch (error) {
      throw new UnreachableError(`${method} ${request.path}: ${describeFetchError(error)}`);
    }
    const text = await response.text();
    let json: unknown;
    try {
      json = text === "" ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: response.status, headers: response.headers, contentType: response.headers.get("content-type") ?? "", text, json };
  }

  async function request(request: HttpRequest): Promise<Answer> {
    let waited = 0;
    for (;;) {
      const answer = await once(request);
      if (answer.status !== 429 || request.acceptRateLimit) return answer;
      const seconds = retryAfterSeconds(answer);
      if (waited + seconds * 1000 > maxWaitMs) return answer;
      options.onWait?.(`waiting ${seconds} s: the facilitator's rate limit on ${request.path} (Retry-After)`);
      await sleep(seconds * 1000);
      waited += seconds * 1000;
    }
  }

  return {
    baseUrl,
    request,
    get: (path) => request({ method: "GET", path }),
    post: (path, body, headers = {}) =>
      request({ method: "POST", path, body, headers: { "Content-Type": "application/json", "X402-Version": "1", ...headers } }),
  };
}

/** Seconds to wait after a 429: `Retry-After` (seconds), else the body's `retryAfter`, else a minute. */
function retryAfterSeconds(answer: Answer): number {
  const header = Number(answer.headers.get("retry-after"));
  if (Number.isFinite(header) && header > 0) return Math.min(Math.ceil(header), 60);
  const body = (answer.json as { retryAfter?: unknown } | undefined)?.retryAfter;
  if (typeof body === "number" && body > 0) return Math.min(Math.ceil(body), 60);
  return 60;
}

function describeFetchError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error.name === "TimeoutError") return "no answer in time";
  const cause = error.cause as { code?: string; message?: string } | undefined;
  return cause?.code ? `${error.message} (${cause.code})` : error.message;
}

/** An answer in a few words for messages: status, content type and the start of the body. */
export function describeAnswer(answer: Answer): string {
  const type = answer.contentType ? answer.contentType.split(";")[0] : "no Content-Type";
  const body = answer.json !== undefined ? brief(answer.json) : answer.text === "" ? "(empty body)" : brief(answer.text, 120);
  return `HTTP ${answer.status} ${type} ${body}`;
}

/** Whether an answer declares JSON (`application/json`, any parameters). */
export function isJsonAnswer(answer: Answer): boolean {
  return /^application\/json\b/i.test(answer.contentType.trim());
}
