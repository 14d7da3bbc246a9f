// RPC URLs often carry an API key in their path or query (`https://host/v2/<key>`, `?apikey=…`):
// whatever reaches a log line, a healthcheck, an answer or a start-up message shows scheme and host only.

const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'`<>()[\]{},;]+/gi;

/** `https://user:pass@rpc.example/v2/KEY?apikey=K` → `https://rpc.example` (scheme, host and port only). */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}`;
  } catch {
    return "[unparseable URL]";
  }
}

/** Replaces every URL found in `text` by {@link redactUrl} of it. */
export function redactUrls(text: string): string {
  return text.includes("://") ? text.replace(URL_IN_TEXT, (url) => redactUrl(url)) : text;
}

const CAUSES: Array<[RegExp, (code: string) => string]> = [
  [/^ECONNREFUSED$/, () => "connection refused"],
  [/^(ENOTFOUND|EAI_AGAIN|EAI_NONAME|EAI_FAIL|EAI_NODATA)$/, (code) => `DNS lookup failed, ${code}`],
  [/^(ETIMEDOUT|UND_ERR_CONNECT_TIMEOUT)$/, () => "connection timed out"],
  [/^(ECONNRESET|EPIPE|UND_ERR_SOCKET)$/, () => "connection reset"],
  [/^(EHOSTUNREACH|ENETUNREACH|EHOSTDOWN|ENETDOWN)$/, (code) => `unreachable, ${code}`],
  [/^(CERT_|ERR_TLS_|DEPTH_ZERO|UNABLE_TO_|SELF_SIGNED)/, (code) => `TLS failure, ${code}`],
];

/**
 * Why an RPC request failed, in a few words: `connection refused`, `DNS lookup failed, ENOTFOUND`,
 * `no answer within 500 ms`, `HTTP 401`, `JSON-RPC error -32000: header not found`, … Walks the error's
 * causes (viem wraps Node's fetch errors twice; a JSON-RPC error may be a plain `{code, message}` object).
 * Never contains a URL's path or query.
 */
export function describeRpcFailure(error: unknown, options: { timeoutMs?: number } = {}): string {
  let status: number | undefined;
  let rpcError: string | undefined;
  let innermost = "";
  for (const cause of causes(error)) {
    const { code, name } = cause as { code?: unknown; name?: unknown };
    if (typeof code === "string") {
      for (const [pattern, describe] of CAUSES) if (pattern.test(code)) return describe(code);
    }
    if (name === "TimeoutError") return options.timeoutMs ? `no answer within ${options.timeoutMs} ms` : "timed out";
    const causeStatus = (cause as { status?: unknown }).status;
    if (typeof causeStatus === "number" && status === undefined) status = causeStatus;
    if (typeof code === "number" && rpcError === undefined) {
      // viem keeps the node's own words in `details`; a plain JSON-RPC error object has them in `message`.
      const { details, message } = cause as { details?: unknown; message?: unknown };
      const text = typeof details === "string" && details !== "" ? details : typeof message === "string" ? message : "";
      rpcError = `JSON-RPC error ${code}${text ? `: ${text.split("\n")[0]}` : ""}`;
    }
    innermost = firstLine(cause);
  }
  if (status !== undefined) return `HTTP ${status}`;
  if (rpcError !== undefined) return redactUrls(rpcError);
  return redactUrls(innermost || "unknown error");
}

/** The error, its `cause` chain, and the members of any AggregateError on the way (bounded). */
function causes(error: unknown): unknown[] {
  const found: unknown[] = [];
  const queue: unknown[] = [error];
  while (queue.length > 0 && found.length < 16) {
    const next = queue.shift();
    if (next === undefined || next === null || found.includes(next)) continue;
    found.push(next);
    if (typeof next !== "object") continue;
    const { cause, errors } = next as { cause?: unknown; errors?: unknown };
    if (Array.isArray(errors)) queue.push(...errors);
    queue.push(cause);
  }
  return found;
}

function firstLine(error: unknown): string {
  const text =
    error instanceof Error
      ? ((error as { shortMessage?: string }).shortMessage ?? error.message)
      : typeof error === "object" && error !== null
        ? json(error)
        : String(error);
  return text.split("\n")[0] ?? text;
}

/** An object as JSON for a message, bounded (a JSON-RPC error object is small; anything else is cut). */
function json(value: object): string {
  try {
    return (JSON.stringify(value) ?? "").slice(0, 200);
  } catch {
    return "an unreadable error object";
  }
}
