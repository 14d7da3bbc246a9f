/** The logging the settlement room does (pino-compatible; the facilitator's logger is one). */
export interface SettlementLogger {
  info(fields: object, message?: string): void;
  warn(fields: object, message?: string): void;
  error(fields: object, message?: string): void;
  debug(fields: object, message?: string): void;
}
