import { KitError } from "../../protocol/errors.js";

/** A configuration problem; the message names the variable and what was found. */
export class ConfigError extends KitError<"config_invalid"> {
  override name = "ConfigError";
  constructor(message: string, options?: ErrorOptions) {
    super("config_invalid", message, { ...options, docs: "docs/facilitator.md#configuration" });
  }
}
