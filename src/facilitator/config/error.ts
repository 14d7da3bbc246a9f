import { KitErrorOf } from "../../protocol/errors.js";

/** A configuration problem; the message names the variable and what was found. */
export class ConfigError extends KitErrorOf("ConfigError", "config_invalid", "docs/facilitator.md#configuration") {}
