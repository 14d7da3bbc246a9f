import { KitError } from "../protocol/errors.js";

/**
 * A start-up check failed: the message is one line naming the network, the variable and what was found. Codes:
 * `startup_check_failed`; `port_in_use` (a listener's port is taken: another port, or stop what uses it).
 */
export class StartupError extends KitError<"startup_check_failed" | "port_in_use"> {
  override name = "StartupError";
  constructor(message: string, options: ErrorOptions & { code?: "port_in_use" } = {}) {
    const { code = "startup_check_failed", ...rest } = options;
    super(code, message, { ...rest, docsPath: "docs/operations.md#start-up-checks" });
  }
}
