import { ConfigError, loadConfig } from "../../src/facilitator/config/index.js";
import { thrown } from "./reject.js";

/**
 * The message of the {@link ConfigError} that `loadConfig(env)` throws; fails the test when the
 * configuration is accepted or something else is thrown. `label` names the case in a failure.
 */
export function configRefusal(env: Record<string, string>, label?: string): string {
  return thrown(() => loadConfig(env), ConfigError, label ?? JSON.stringify(env)).message;
}
