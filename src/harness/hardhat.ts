import { existsSync } from "node:fs";
import { readFile, readdir, stat, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { HardhatRuntimeEnvironment } from "hardhat/types/hre";
import type { Hex } from "viem";
import type { TokenArtifact } from "../chain/deploy.js";
import { KIT_HARDHAT_NETWORKS } from "./hardhat-networks.js";
import { loadHardhat } from "./require-hardhat.js";

/** The kit's root: the clone, or the installed package's folder (found from this file, so the cwd does not matter). */
export const PROJECT_ROOT = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Run from the clone's sources (TypeScript, as the kit's own scripts and tests do), the contracts are
 * compiled on demand with its hardhat.config.ts. Compiled code (`dist/`: an installed package, or a clone's
 * build that another project links to) uses the artifacts the build put beside it (`dist/artifacts/`) and
 * the networks in code: it never loads a TypeScript config.
 */
const KIT_CONFIG = join(PROJECT_ROOT, "hardhat.config.ts");
const IN_CLONE = import.meta.url.endsWith(".ts") && existsSync(KIT_CONFIG) && existsSync(join(PROJECT_ROOT, "contracts"));
const SHIPPED_ARTIFACTS = new URL("../artifacts/", import.meta.url);

let kitHre: Promise<HardhatRuntimeEnvironment> | undefined;

/**
 * A Hardhat runtime for the kit's chains, created once per process (independent of the cwd): from the
 * clone's hardhat.config.ts, or, installed, from the same two networks given in code (nothing to compile).
 */
export function kitHardhat(): Promise<HardhatRuntimeEnvironment> {
  kitHre ??= (async () => {
    const { createHardhatRuntimeEnvironment, importUserConfig } = await loadHardhat();
    if (IN_CLONE) return createHardhatRuntimeEnvironment(await importUserConfig(KIT_CONFIG), { config: KIT_CONFIG }, PROJECT_ROOT);
    return createHardhatRuntimeEnvironment({ networks: { ...KIT_HARDHAT_NETWORKS } }, {}, PROJECT_ROOT);
  })();
  // A failed attempt is not remembered: the next call tries again.
  kitHre.catch(() => (kitHre = undefined));
  return kitHre;
}

/** The kit's contracts the harness places on its chains. */
export type KitContract = "BridgedUSDC" | "Multicall3";

const artifacts = new WeakMap<HardhatRuntimeEnvironment, Map<KitContract, Promise<TokenArtifact>>>();
const builds = new WeakMap<HardhatRuntimeEnvironment, Promise<void>>();

/**
 * The compiled BridgedUSDC, built first when needed: `build` true always runs Hardhat's build,
 * false never, and by default it runs when the artifact is missing or a contract, hardhat.config.ts
 * or package-lock.json changed since the last build (Hardhat's own no-op check costs ~0.7 s of start-up).
 * Shared per runtime: two builds at once in one project race on the same cache files.
 */
export function loadTokenArtifact(hre: HardhatRuntimeEnvironment, options: { build?: boolean } = {}): Promise<TokenArtifact> {
  return loadKitArtifact(hre, "BridgedUSDC", options);
}

/** A compiled contract of the kit (see {@link loadTokenArtifact} for when it is built). */
export function loadKitArtifact(hre: HardhatRuntimeEnvironment, name: KitContract, options: { build?: boolean } = {}): Promise<TokenArtifact> {
  let byName = artifacts.get(hre);
  if (!byName) artifacts.set(hre, (byName = new Map()));
  const cached = byName.get(name);
  if (cached && options.build === undefined) return cached;
  const loading = (async () => {
    if (!IN_CLONE) return readArtifact(new URL(`${name}.json`, SHIPPED_ARTIFACTS));
    await ensureBuilt(hre, options.build);
    // Read from disk, not through hre.artifacts: its index predates a build this runtime just ran.
    return readArtifact(artifactPath(hre, name));
  })();
  byName.set(name, loading);
  loading.catch(() => byName.delete(name));
  return loading;
}

/** One freshness check (and build) per runtime, shared by every artifact it loads. */
function ensureBuilt(hre: HardhatRuntimeEnvironment, build: boolean | undefined): Promise<void> {
  const cached = builds.get(hre);
  if (cached && build === undefined) return cached;
  const running = (async () => {
    if (build ?? !(await artifactIsFresh(hre))) await buildContracts(hre);
  })();
  builds.set(hre, running);
  running.catch(() => builds.delete(hre));
  return running;
}

async function artifactIsFresh(hre: HardhatRuntimeEnvironment): Promise<boolean> {
  try {
    const artifact = Math.min(...(await Promise.all(KIT_CONTRACTS.map(async (name) => (await stat(artifactPath(hre, name))).mtimeMs))));
    // A no-op build leaves the artifact's time alone, so the last build is stamped separately.
    const stamped = await stat(buildStamp(hre)).then((s) => s.mtimeMs, () => 0);
    const built = Math.max(artifact, stamped);
    const inputs = [join(hre.config.paths.root, "hardhat.config.ts"), join(hre.config.paths.root, "package-lock.json")];
    for (const entry of await readdir(join(hre.config.paths.root, "contracts"), { recursive: true })) {
      if (entry.endsWith(".sol")) inputs.push(join(hre.config.paths.root, "contracts", entry));
    }
    for (const input of inputs) {
      const changed = await stat(input).then((s) => s.mtimeMs, () => 0);
      if (changed > built) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/** The kit's contracts, as the package ships them. */
export const KIT_CONTRACTS: readonly KitContract[] = ["BridgedUSDC", "Multicall3"];

/** The ABI and code of a Hardhat artifact (or of the trimmed copy the package ships). */
export async function readArtifact(file: string | URL): Promise<TokenArtifact> {
  const artifact = JSON.parse(await readFile(file, "utf8")) as { abi: TokenArtifact["abi"]; bytecode: Hex; deployedBytecode: Hex };
  return { abi: artifact.abi, bytecode: artifact.bytecode, deployedBytecode: artifact.deployedBytecode };
}

/** Where Hardhat writes a kit contract's artifact in the clone. */
export function artifactPath(hre: HardhatRuntimeEnvironment, name: KitContract): string {
  return join(hre.config.paths.artifacts, "contracts", `${name}.sol`, `${name}.json`);
}

function buildStamp(hre: HardhatRuntimeEnvironment): string {
  return join(hre.config.paths.cache, "harness-build.stamp");
}

async function buildContracts(hre: HardhatRuntimeEnvironment): Promise<void> {
  const startedAt = new Date();
  try {
    await hre.tasks.getTask("build").run({ quiet: true, noTests: true });
  } catch {
    // Another process (a test run) may have been building the same project: once more, after it.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await hre.tasks.getTask("build").run({ quiet: true, noTests: true });
  }
  // Stamped with the time the build started: a file changed during the build still counts as newer.
  await writeFile(buildStamp(hre), `${startedAt.toISOString()}\n`).catch(() => {});
  await utimes(buildStamp(hre), startedAt, startedAt).catch(() => {});
}
