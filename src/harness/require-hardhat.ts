import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { KitErrorOf } from "../protocol/errors.js";

/** Hardhat's minimum Node version (Hardhat 3 refuses to run below it). */
export const HARDHAT_MIN_NODE = "22.13.0";

/** What a project installs to use the harness: the kit and Hardhat, its one optional peer dependency. */
export const HARNESS_INSTALL = "npm install -D cronos-x402-facilitator-kit hardhat";

/** The install command that brings EDR's native binding: npm itself on a Node 22 from the npm registry. */
export const NODE22_INSTALL = "npx -y -p node@22 npm install";

/** The harness cannot run here: Hardhat is missing, its native binding is missing, or Node is older than Hardhat needs. */
export class HarnessUnavailableError extends KitErrorOf("HarnessUnavailableError", "harness_unavailable", "docs/install.md#what-each-part-needs") {}

/** Whether `version` (a `process.versions.node`) is at least {@link HARDHAT_MIN_NODE}. */
export function nodeRunsHardhat(version: string = process.versions.node): boolean {
  const [major = 0, minor = 0] = version.split(".").map(Number);
  const [needMajor = 0, needMinor = 0] = HARDHAT_MIN_NODE.split(".").map(Number);
  return major > needMajor || (major === needMajor && minor >= needMinor);
}

/** A missing EDR binding: the platform package this machine needs, and the project whose node_modules lacks it. */
export interface MissingBinding {
  /** e.g. `@nomicfoundation/edr-linux-x64-gnu`. */
  platformPackage: string;
  /** The folder holding the `node_modules` Hardhat was found in: where to reinstall. */
  project: string;
}

/**
 * Whether Hardhat's EDR (the local chains' engine) has its native binding for this machine installed.
 * npm leaves the binding out when npm itself runs on a Node older than EDR's engines (>= 22): a project
 * installed on a Node 20 machine then fails on Node 22 with "Cannot find native binding". Found by
 * resolving the platform packages EDR lists (nothing is loaded); undefined when one resolves, or when
 * EDR lists none for this platform (Hardhat says so itself) or cannot be found.
 */
export function missingEdrBinding(hardhatEntry: string): MissingBinding | undefined {
  let edrEntry: string;
  let candidates: string[];
  try {
    edrEntry = createRequire(hardhatEntry).resolve("@nomicfoundation/edr");
    const manifest = JSON.parse(readFileSync(join(dirname(edrEntry), "package.json"), "utf8")) as { optionalDependencies?: Record<string, string> };
    candidates = Object.keys(manifest.optionalDependencies ?? {}).filter((name) => name.startsWith(`@nomicfoundation/edr-${process.platform}-${process.arch}`));
  } catch {
    return undefined;
  }
  if (candidates.length === 0) return undefined;
  const fromEdr = createRequire(edrEntry);
  for (const candidate of candidates) {
    try {
      fromEdr.resolve(candidate);
      return undefined;
    } catch {
      // not installed: try the next (gnu / musl)
    }
  }
  return { platformPackage: pickForThisLibc(candidates), project: projectOf(hardhatEntry) };
}

/** The folder holding the `node_modules` a package file was found in. */
function projectOf(file: string): string {
  const modules = `${sep}node_modules${sep}`;
  return file.includes(modules) ? file.slice(0, file.lastIndexOf(modules)) : dirname(file);
}

/** On Linux EDR ships a glibc (`-gnu`) and a musl build: the one this Node runs on. */
function pickForThisLibc(candidates: readonly string[]): string {
  if (candidates.length === 1) return candidates[0]!;
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  const libc = header?.glibcVersionRuntime ? "-gnu" : "-musl";
  return candidates.find((name) => name.endsWith(libc)) ?? candidates[0]!;
}

/** What to say about a missing binding; on a Node too old for Hardhat, `cliCommand` is what to run after reinstalling. */
function missingBindingMessage(missing: MissingBinding, cliCommand?: string): string {
  const what = `Hardhat's native EDR binding, and ${missing.platformPackage} is missing from ${join(missing.project, "node_modules")}: npm leaves it out when npm itself runs on a Node older than 22`;
  const reinstall = `Reinstall with npm running on Node 22: \`${NODE22_INSTALL}\` (in ${missing.project})`;
  if (cliCommand === undefined) return `the local chains need ${what} (as on a machine whose default Node is 20). ${reinstall}`;
  return `the local chains need Node >= ${HARDHAT_MIN_NODE} (Hardhat 3), this is Node ${process.versions.node}; they also need ${what}. ${reinstall}, then run the CLI on that Node: \`npx -y -p node@22 -c "cronos-x402 ${cliCommand}"\``;
}

/** Where `hardhat/hre` resolves from here, or undefined when Hardhat is not installed. */
function hardhatEntry(): string | undefined {
  try {
    return fileURLToPath(import.meta.resolve("hardhat/hre"));
  } catch {
    return undefined;
  }
}

/**
 * Throws {@link HarnessUnavailableError} with what to do when the harness cannot run: Node below
 * {@link HARDHAT_MIN_NODE}, no `hardhat` package where this module can find it, or Hardhat without its
 * native EDR binding (installed by npm on an older Node). `cliCommand` is the `cronos-x402` command the
 * message suggests re-running on Node 22 (default `start`).
 */
export function assertHarnessCanRun(cliCommand = "start"): void {
  const entry = hardhatEntry();
  const missing = entry === undefined ? undefined : missingEdrBinding(entry);
  if (!nodeRunsHardhat()) {
    if (missing) throw new HarnessUnavailableError(missingBindingMessage(missing, cliCommand));
    throw new HarnessUnavailableError(
      `the local chains need Node >= ${HARDHAT_MIN_NODE} (Hardhat 3); this is Node ${process.versions.node}. Install Node 22 (e.g. nvm install 22), or run the CLI on a Node 22 from npm: npx -y -p node@22 -c "cronos-x402 ${cliCommand}"`,
    );
  }
  if (entry === undefined) {
    throw new HarnessUnavailableError(`the harness needs the package "hardhat" (an optional peer dependency of the kit): ${HARNESS_INSTALL}`);
  }
  if (missing) throw new HarnessUnavailableError(missingBindingMessage(missing));
}

/**
 * The {@link HarnessUnavailableError} for an error Hardhat threw because a native binding would not
 * load (its HHE27, or the loader's "Cannot find native binding"), which the check before start-up did
 * not foresee; undefined for any other error.
 */
export function nativeBindingFailure(error: unknown): HarnessUnavailableError | undefined {
  const message = error instanceof Error ? error.message : String(error);
  if (!/Cannot find native binding|HHE27\b|couldn't load the native binding/.test(message)) return undefined;
  const entry = hardhatEntry();
  const missing = entry === undefined ? undefined : missingEdrBinding(entry);
  if (missing) return new HarnessUnavailableError(missingBindingMessage(missing));
  return new HarnessUnavailableError(
    `the local chains cannot load a native binding of Hardhat (${message.split("\n")[0]}); reinstall with npm running on Node 22: \`${NODE22_INSTALL}\` (in ${entry ? projectOf(entry) : process.cwd()})`,
  );
}

/** Hardhat's runtime module, once {@link assertHarnessCanRun} passes. */
export async function loadHardhat(): Promise<typeof import("hardhat/hre")> {
  assertHarnessCanRun();
  return import("hardhat/hre");
}
