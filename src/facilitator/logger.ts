/** The logging surface the facilitator uses (pino-compatible). Secrets are never passed to it. */
export interface Logger {
  info(fields: object, message?: string): void;
  warn(fields: object, message?: string): void;
  error(fields: object, message?: string): void;
  debug(fields: object, message?: string): void;
  child(bindings: object): Logger;
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
};
