import { KitError } from "../protocol/errors.js";

/** A start-up check failed: the message is one line naming the network, the variable and what was found. */
export class StartupError extends KitError<"startup_check_failed"> {
  override name = "StartupError";
  constructor(message: string, options?: ErrorOptions) {
    super("startup_check_failed", message, { ...options, docs: "docs/operations.md#start-up-checks" });
  }
}
