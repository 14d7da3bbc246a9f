// The facilitator's configuration: one zod schema over the environment, parsed once at start-up.
export type * from "./types.js";
export { ConfigError } from "./error.js";
export { CONFIG_VARIABLES, ENV_PREFIX } from "./schema.js";
export { DEFAULT_LEDGER_FILE, loadConfig, type LoadConfigOptions } from "./load.js";
export { defaultConnectionsPerClient } from "./http.js";
