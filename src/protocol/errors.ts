/**
 * The kit's one error shape. Every error the kit throws on purpose is a `KitError`: `code` is stable (a
 * program tests it, never the message, which is written for people and may be reworded), and `docs`, where
 * the documentation says more, names the page and section (`docs/facilitator.md#configuration`).
 *
 * Each kind keeps its own class (`ConfigError`, `LedgerError`, `PaymentError`, …) for `instanceof`; they
 * all extend this one, so `error instanceof KitError` tells the kit's errors from anything else.
 */
export class KitError<Code extends string = string> extends Error {
  override name = "KitError";
  /** What went wrong, as a stable word (snake_case); the class's TSDoc lists its codes. */
  readonly code: Code;
  /** Where the documentation explains it: a file of the package and an anchor. Set only when there is one. */
  declare readonly docs?: string;

  constructor(code: Code, message: string, options: ErrorOptions & { docs?: string } = {}) {
    super(message, options);
    this.code = code;
    if (options.docs !== undefined) this.docs = options.docs;
  }
}
