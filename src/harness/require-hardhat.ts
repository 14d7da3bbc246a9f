/** Hardhat's minimum Node version (Hardhat 3 refuses to run below it). */
export const HARDHAT_MIN_NODE = "22.13.0";

/** What a project installs to use the harness: the kit and Hardhat, its one optional peer dependency. */
export const HARNESS_INSTALL = "npm install -D cronos-x402-facilitator-kit hardhat";

/** The harness cannot run here: Hardhat is missing, or Node is older than Hardhat needs. */
export class HarnessUnavailableError extends Error {
  override name = "HarnessUnavailableError";
}

/** Whether `version` (a `process.versions.node`) is at least {@link HARDHAT_MIN_NODE}. */
export function nodeRunsHardhat(version: string = process.versions.node): boolean {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  const [needMajor = 0, needMinor = 0] = HARDHAT_MIN_NODE.split(".").map(Number);
  return major > needMajor || (major === needMajor && minor >= needMinor);
}

/**
 * Throws {@link HarnessUnavailableError} with what to do when the harness cannot run: Node below
 * {@link HARDHAT_MIN_NODE}, or no `hardhat` package where this module can find it. `cliCommand` is the
 * `cronos-x402` command the message suggests re-running on Node 22 (default `start`).
 */
export function assertHarnessCanRun(cliCommand = "start"): void {
  if (!nodeRunsHardhat()) {
    throw new HarnessUnavailableError(
      `the local chains need Node >= ${HARDHAT_MIN_NODE} (Hardhat 3); this is Node ${process.versions.node}. Install Node 22 (e.g. nvm install 22), or run the CLI on a Node 22 from npm: npx -y -p node@22 -c "cronos-x402 ${cliCommand}"`,
    );
  }
  try {
    import.meta.resolve("hardhat/hre");
  } catch {
    throw new HarnessUnavailableError(`the harness needs the package "hardhat" (an optional peer dependency of the kit): ${HARNESS_INSTALL}`);
  }
}

/** Hardhat's runtime module, once {@link assertHarnessCanRun} passes. */
export async function loadHardhat(): Promise<typeof import("hardhat/hre")> {
  assertHarnessCanRun();
  return import("hardhat/hre");
}
