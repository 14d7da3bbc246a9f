// `npm run build` (and `prepack`, so `npm pack` of a fresh clone makes a complete tarball): src/ compiled
// to dist/ as ES modules with declarations and declaration maps, the dashboard's page beside its code,
// and the compiled token and Multicall3 (ABI and code only) in dist/artifacts/, so that a project that
// installs the package compiles nothing. Run after the contracts' compile step (bootstrap does both).
import { spawnSync } from "node:child_process";
import { chmod, cp, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { KIT_CONTRACTS } from "../src/harness/hardhat.js";

const root = new URL("../", import.meta.url).pathname;
const dist = join(root, "dist");
const started = performance.now();

await rm(dist, { recursive: true, force: true });
const tsc = spawnSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.build.json"], { cwd: root, stdio: "inherit" });
if (tsc.status !== 0) {
  process.stderr.write("build: tsc failed (above)\n");
  process.exit(1);
}
await cp(join(root, "src", "facilitator", "dashboard", "public"), join(dist, "facilitator", "dashboard", "public"), { recursive: true });
await mkdir(join(dist, "artifacts"), { recursive: true });
for (const name of KIT_CONTRACTS) {
  const artifact = JSON.parse(await readFile(join(root, "artifacts", "contracts", `${name}.sol`, `${name}.json`), "utf8")) as Record<string, unknown>;
  const { contractName, sourceName, abi, bytecode, deployedBytecode } = artifact;
  await writeFile(join(dist, "artifacts", `${name}.json`), `${JSON.stringify({ contractName, sourceName, abi, bytecode, deployedBytecode })}\n`);
}
await chmod(join(dist, "cli", "bin.js"), 0o755);
process.stderr.write(`build: dist/ written in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
