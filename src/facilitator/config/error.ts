/** A configuration problem; the message names the variable and what was found. */
export class ConfigError extends Error {
  override name = "ConfigError";
}
