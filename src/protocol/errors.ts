/** Parameters of {@link KitError}. */
export interface KitErrorParameters extends ErrorOptions {
  /** What this occurrence adds to the short message (by default the cause's account of itself). */
  details?: string;
  /** Lines that help a person act on it (what to check, what to set): the message carries them after the short message. */
  metaMessages?: readonly string[];
  /** Where the documentation explains it: a file of the package and an anchor (`docs/facilitator.md#configuration`). */
  docsPath?: string;
}

/**
 * The kit's one error shape, after viem's `BaseError`. Every error the kit throws on purpose is a `KitError`:
 * `code` is stable (a program tests it, never the message, which is written for people and may be reworded);
 * `shortMessage` is the one-line account; `details` what this occurrence adds (given, or the cause's own account);
 * `metaMessages` lines that help a person act; `docsPath` where the documentation says more; `cause` the error
 * underneath, and {@link walk} follows the causes. The message is the short message, then the meta messages (the
 * details stay a field: the short message names what a person needs, the details what a log keeps).
 *
 * Each kind keeps its own class (`ConfigError`, `LedgerError`, `PaymentError`, …) for `instanceof`; they all
 * extend this one, so `error instanceof KitError` tells the kit's errors from anything else.
 */
export class KitError<Code extends string = string> extends Error {
  override name = "KitError";
  /** What went wrong, as a stable word (snake_case); the class's TSDoc lists its codes. */
  readonly code: Code;
  /** The one-line account, for people. */
  readonly shortMessage: string;
  /** What this occurrence adds: given, else the cause's details or message. Set only when there is some. */
  declare readonly details?: string;
  /** Lines that help a person act on it. Set only when there are some. */
  declare readonly metaMessages?: readonly string[];
  /** Where the documentation explains it: a file of the package and an anchor. Set only when there is one. */
  declare readonly docsPath?: string;

  constructor(code: Code, shortMessage: string, parameters: KitErrorParameters = {}) {
    const { details, metaMessages, docsPath, ...options } = parameters;
    const meta = metaMessages?.length ? ["", ...metaMessages] : [];
    super([shortMessage, ...meta].join("\n"), options);
    this.code = code;
    this.shortMessage = shortMessage;
    const cause = options.cause;
    const told = details ?? (cause instanceof KitError ? (cause.details ?? cause.shortMessage) : cause instanceof Error ? cause.message : undefined);
    if (told !== undefined) this.details = told;
    if (metaMessages?.length) this.metaMessages = metaMessages;
    if (docsPath !== undefined) this.docsPath = docsPath;
  }

  /** The last error of the chain of causes from this one. */
  walk(): unknown;
  /** The first error of the chain of causes from this one (itself included) for which `found` holds; null when none does. */
  walk(found: (error: unknown) => boolean): unknown;
  walk(found?: (error: unknown) => boolean): unknown {
    let error: unknown = this;
    for (let depth = 0; depth < 64; depth++) {
      if (found?.(error)) return error;
      const cause = typeof error === "object" && error !== null && "cause" in error ? error.cause : undefined;
      if (cause === undefined) return found ? null : error;
      error = cause;
    }
    return found ? null : error;
  }
}

/**
 * The base of a {@link KitError} class with one code (and, where the docs explain it, one page): each such class is
 * a line, `export class Fenced extends KitErrorOf("Fenced", "fenced") {}`, constructed with the short message and
 * the {@link KitErrorParameters}.
 */
export function KitErrorOf<const Code extends string>(name: string, code: Code, docsPath?: string) {
  return class extends KitError<Code> {
    override name = name;
    constructor(shortMessage: string, parameters: KitErrorParameters = {}) {
      super(code, shortMessage, docsPath === undefined ? parameters : { docsPath, ...parameters });
    }
  };
}
