import { expect } from "chai";
import { ConfigError, loadConfig } from "../../src/facilitator/config/index.js";

/**
 * The message of the {@link ConfigError} that `loadConfig(env)` throws; fails the test when the
 * configuration is accepted or something else is thrown. `label` names the case in a failure.
 */
export function configRefusal(env: Record<string, string>, label?: string): string {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error, label).to.be.instanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error(`accepted ${label ?? JSON.stringify(env)}`);
}
