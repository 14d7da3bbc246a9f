import { redactUrls } from "../chain/rpc-url.js";

/** The logging surface the facilitator uses (pino-compatible). Secrets are never passed to it. */
export interface Logger {
  info(fields: object, message?: string): void;
  warn(fields: object, message?: string): void;
  error(fields: object, message?: string): void;
  debug(fields: object, message?: string): void;
  child(bindings: object): Logger;
  /** Whether a line at `level` would be written (pino has it); without it, every level counts as written. */
  isLevelEnabled?(level: string): boolean;
}

/** A logger that drops everything (tests, embedded use). */
export const silentLogger: Logger = {
  info() {},
  warn() {},
  error() {},
  debug() {},
  child() {
    return silentLogger;
  },
  isLevelEnabled: () => false,
};

const REDACTING = Symbol("redacting");

/**
 * Wraps `logger` so that every URL in a message or field (an RPC URL inside an error text, say) shows
 * its scheme and host only: RPC URLs often carry an API key in their path or query.
 */
export function redactingLogger(logger: Logger): Logger {
  if ((logger as { [REDACTING]?: true })[REDACTING]) return logger;
  // A level the logger drops (pino's isLevelEnabled) is not redacted first: one verify line each, otherwise.
  const wrap = (level: "info" | "warn" | "error" | "debug") => (fields: object, message?: string) => {
    if (logger.isLevelEnabled && !logger.isLevelEnabled(level)) return;
    logger[level](redactValue(fields, 0) as object, message === undefined ? undefined : redactUrls(message));
  };
  return {
    [REDACTING]: true,
    info: wrap("info"),
    warn: wrap("warn"),
    error: wrap("error"),
    debug: wrap("debug"),
    child: (bindings) => redactingLogger(logger.child(redactValue(bindings, 0) as object)),
    ...(logger.isLevelEnabled ? { isLevelEnabled: (level: string) => logger.isLevelEnabled!(level) } : {}),
  } as Logger;
}

function redactValue(value: unknown, depth: number): unknown {
  if (typeof value === "string") return redactUrls(value);
  if (value instanceof Error) return redactUrls(`${value.name}: ${value.message}`);
  if (value === null || typeof value !== "object" || depth > 4) return value;
  if (Array.isArray(value)) return value.map((item) => redactValue(item, depth + 1));
  if (Object.getPrototypeOf(value) === Object.prototype) {
    // A plain object with nothing to redact (every verify's line) is passed on as it is, not copied.
    let copy: Record<string, unknown> | undefined;
    for (const key of Object.keys(value)) {
      const item = (value as Record<string, unknown>)[key];
      const redacted = redactValue(item, depth + 1);
      if (redacted !== item) copy ??= { ...value };
      if (copy) copy[key] = redacted;
    }
    return copy ?? value;
  }
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, redactValue(item, depth + 1)]));
}
