import { redactUrl } from "../chain/rpc-url.js";
import type { Logger } from "../facilitator/logger.js";

/** Log levels, most severe first (pino's names). */
export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
/** One of {@link LOG_LEVELS}. */
export type LogLevel = (typeof LOG_LEVELS)[number];

const RANK: Record<LogLevel, number> = { fatal: 60, error: 50, warn: 40, info: 30, debug: 20, trace: 10, silent: Infinity };

/**
 * A facilitator {@link Logger} writing one readable line per entry to a stream (stderr by default,
 * so stdout stays free for the stack's summary or JSON line).
 */
export function lineLogger(
  level: LogLevel,
  options: { name?: string; write?: (line: string) => void; bindings?: Record<string, unknown> } = {},
): Logger {
  const write = options.write ?? ((line: string) => process.stderr.write(line));
  const prefix = options.name ? `[${options.name}] ` : "";
  const bindings = options.bindings ?? {};
  const entry = (entryLevel: LogLevel) => (fields: object, message?: string) => {
    if (RANK[entryLevel] < RANK[level]) return;
    const merged = { ...bindings, ...fields };
    const extra = Object.keys(merged).length > 0 ? ` ${JSON.stringify(merged, bigintSafe)}` : "";
    write(`${prefix}${entryLevel}: ${message ?? ""}${extra}\n`);
  };
  return {
    info: entry("info"),
    warn: entry("warn"),
    error: entry("error"),
    debug: entry("debug"),
    child: (more) => lineLogger(level, { ...options, bindings: { ...bindings, ...more } }),
    isLevelEnabled: (asked) => asked in RANK && RANK[asked as LogLevel] >= RANK[level],
  };
}

function bigintSafe(_key: string, value: unknown): unknown {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Error) return { name: value.name, message: value.message };
  return value;
}

/** Where log lines go; {@link LogSink.flush} before exiting. */
export interface LogSink {
  write(line: string): void;
  /** Resolves once queued lines are written, or after `timeoutMs`. */
  flush(timeoutMs: number): Promise<void>;
}

/**
 * Log lines to stderr with a bounded queue: a parent that reads only stdout (a CI suite after the
 * --json line) never drains the pipe, and Node would queue every line in memory. Past
 * `maxQueuedBytes` lines are dropped and counted; a reader that closes stderr is ignored. Past
 * `maxTotalBytes` written in all (a log file nobody rotates: the detached stack's), the rest is dropped,
 * said once.
 */
export function stderrSink(
  maxQueuedBytes = 1024 * 1024,
  stream: NodeJS.WritableStream & { writableLength: number } = process.stderr,
  maxTotalBytes = Number.POSITIVE_INFINITY,
): LogSink {
  let broken = false;
  let dropped = 0;
  let total = 0;
  // The reader went away (EPIPE): nothing more can be shown, but the stack keeps running.
  stream.on("error", () => (broken = true));
  return {
    write(line) {
      if (broken || total > maxTotalBytes) return;
      total += Buffer.byteLength(line);
      if (total > maxTotalBytes) {
        stream.write(`[log] ${maxTotalBytes} bytes written: later lines are dropped (the stack keeps running)\n`);
        return;
      }
      if (stream.writableLength > maxQueuedBytes) {
        dropped++;
        return;
      }
      if (dropped > 0) {
        stream.write(`[log] ${dropped} line(s) dropped: stderr was not being read\n`);
        dropped = 0;
      }
      stream.write(line);
    },
    flush(timeoutMs) {
      if (broken || stream.writableLength === 0) return Promise.resolve();
      return new Promise((resolve) => {
        const timer = setTimeout(resolve, timeoutMs);
        timer.unref();
        stream.write("", () => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}

const URL_IN_TEXT = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'`<>()[\]{},;]+/gi;

/**
 * The URLs a user handed in (flags, environment variables) that carry more than a scheme and host: a
 * fork or RPC URL may hold a provider's key in its path, query or user part. Longest first.
 */
export function givenUrls(argv: readonly string[], env: NodeJS.ProcessEnv): string[] {
  const found = new Set<string>();
  for (const text of [...argv, ...Object.values(env)]) {
    if (!text?.includes("://")) continue;
    for (const [url] of text.matchAll(URL_IN_TEXT)) if (redactUrl(url) !== url) found.add(url);
  }
  return [...found].sort((a, b) => b.length - a.length);
}

/**
 * `text` with each of `urls` (from {@link givenUrls}) cut to its scheme and host. Other URLs stay whole:
 * a library's link to its documentation or to a known bug is what the reader needs.
 */
export function redactGivenUrls(text: string, urls: readonly string[]): string {
  return urls.reduce((cut, url) => (cut.includes(url) ? cut.split(url).join(redactUrl(url)) : cut), text);
}
