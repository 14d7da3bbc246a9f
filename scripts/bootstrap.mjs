#!/usr/bin/env node
// Entry of every npm script (`exec node scripts/bootstrap.mjs <script name>` in package.json). Plain
// JavaScript that runs on Node 20, so any documented command works as the first one on a fresh clone
// of a machine whose only Node is 20: it installs the dependencies once with npm running on Node 22
// (Hardhat 3 and its EDR native binding need Node >= 22.13), then runs the real command on the Node 22
// that the `node` devDependency puts in node_modules/.bin.
//
// Signals: `exec` in the npm script makes the shell replace itself, so the SIGINT / SIGTERM that npm
// forwards reaches this process (`sh -c` would keep it), and from here the running step and everything
// it started, as Ctrl+C in a terminal reaches every process of the job.
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync, realpathSync, statSync, writeFileSync } from "node:fs";
import { delimiter, dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bin = join(root, "node_modules", ".bin");
const stampFile = join(root, "node_modules", ".kit-install-stamp");
const env = { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ""}` };

/** Hardhat 3's minimum. */
const MIN_NODE = [22, 13];

/** A TypeScript entry point on the project's Node 22. Not the tsx CLI: its wrapper process kills a child busy starting up when a signal arrives. */
const typescript = (file) => [{ run: ["node", "--import", "tsx", file] }];

/**
 * What each npm script runs: a list of steps; arguments after `--` go to the last step. A step may
 * announce itself (`before`) and report what it did (`after`), both on stderr.
 */
export const COMMANDS = {
  setup: [],
  start: typescript("scripts/start.ts"),
  stop: typescript("scripts/stop.ts"),
  facilitator: typescript("scripts/facilitator.ts"),
  conformance: typescript("scripts/conformance.ts"),
  instances: typescript("scripts/instances.ts"),
  // Compile first: the type check reads the typed artifacts Hardhat generates.
  test: [compileStep(), typeCheckStep(), testRunner()],
  "test:only": [compileStep(), testRunner()],
  compile: [compileStep()],
  // The package: dist/ from src/ and the compiled contracts (also `prepack`).
  build: [compileStep(), ...typescript("scripts/build.ts")],
  prepack: [compileStep(), ...typescript("scripts/build.ts")],
  typecheck: [typeCheckStep()],
  "example:seller": typescript("scripts/example-seller.ts"),
  "example:buyer": typescript("scripts/example-buyer.ts"),
  "bench:verify": typescript("bench/verify-wrk.ts"),
  "bench:verify-node": typescript("bench/verify.ts"),
  "bench:settle": typescript("bench/settle.ts"),
  "bench:startup": typescript("bench/startup.ts"),
  "bench:ledger": typescript("bench/ledger.ts"),
  "bench:lifecycle": typescript("bench/lifecycle.ts"),
  "bench:remote-rpc": typescript("bench/remote-rpc.ts"),
  "bench:state-index": typescript("bench/state-index.ts"),
  "bench:background": typescript("bench/background.ts"),
  "bench:catalog": typescript("bench/catalog.ts"),
  "bench:lookup": typescript("bench/lookup.ts"),
  "bench:floods": typescript("bench/floods.ts"),
  "bench:seller": typescript("bench/seller.ts"),
  "bench:faults": typescript("bench/faults.ts"),
  "bench:migration": typescript("bench/migration.ts"),
  "bench:schema-bombs": typescript("bench/schema-bombs.ts"),
  // The wallets it measures are compiled contracts.
  "bench:gas": [compileStep(), ...typescript("bench/settle-gas.ts")],
};

function log(line) {
  process.stderr.write(`[kit] ${line}\n`);
}

function seconds(startedMs) {
  return `${((Date.now() - startedMs) / 1000).toFixed(1)} s`;
}

/** Files under `dir` (relative to it) whose name passes `keep`; none when `dir` does not exist. */
function filesUnder(dir, keep) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true })
    .map(String)
    .filter((file) => keep(file))
    .sort();
}

function compileStep() {
  return { run: ["hardhat", "compile", "--quiet"], after: reportCompile };
}

function typeCheckStep() {
  return { run: ["tsc", "--noEmit"], after: (started) => `type check: no errors (tsc --noEmit, ${seconds(started)})` };
}

/** The contracts, and whether Hardhat just wrote their artifacts (a compile that finds nothing changed writes none). */
function reportCompile(startedMs) {
  const sources = filesUnder(join(root, "contracts"), (file) => file.endsWith(".sol"));
  const artifacts = join(root, "artifacts", "contracts");
  const compiled = sources.filter((source) =>
    filesUnder(join(artifacts, source), (file) => file.endsWith(".json")).some((file) => statSync(join(artifacts, source, file)).mtimeMs >= startedMs),
  );
  const names = (list) => list.join(", ");
  if (compiled.length === 0) return `contracts: up to date, unchanged since the last compile (${sources.length} Solidity files: ${names(sources)})`;
  return `contracts: compiled ${compiled.length} of ${sources.length} Solidity files in ${seconds(startedMs)} (${names(compiled)})`;
}

/**
 * The test step. Hardhat's `test` runs every runner and prints an empty "Running Solidity tests"
 * section when there are none, so without Solidity tests (`*.t.sol` in contracts/, `.sol` in test/)
 * only the Mocha runner runs, and says so. The contracts were compiled by the step before.
 */
function testRunner() {
  const solidityTests = [
    ...filesUnder(join(root, "contracts"), (file) => file.endsWith(".t.sol")).map((file) => join("contracts", file)),
    ...filesUnder(join(root, "test"), (file) => file.endsWith(".sol")).map((file) => join("test", file)),
  ];
  if (solidityTests.length > 0) {
    return { run: ["hardhat", "test"], before: () => `tests: the Solidity tests (${solidityTests.join(", ")}) and the Mocha suites under test/` };
  }
  return { run: ["hardhat", "test", "mocha", "--no-compile"], before: () => "tests: the Mocha suites under test/ (the project has no Solidity tests)" };
}

/** The version of the `node` devDependency that package-lock.json pins. */
export function lockedNodeVersion(lock) {
  const version = lock?.packages?.["node_modules/node"]?.version;
  if (typeof version !== "string") throw new Error('package-lock.json pins no "node" devDependency (packages["node_modules/node"].version)');
  return version;
}

/**
 * The command that installs the dependencies. npm must itself run on Node >= 22.13 or it skips EDR's
 * native binding (engines >= 22). On an older Node it runs under the very Node the lock pins, taken
 * from npm's platform package (`node-<os>-<arch>`, as the `node` package's own installer names it):
 * unlike `node`, it has no install script, so it works under npm's allowScripts policy, which only a
 * project's package.json can relax. `npm install --no-save` installs exactly the locked versions and
 * leaves the lock untouched; `npm ci` refuses this lock wherever the registry lacks EDR's binaries for
 * other platforms (as ours does).
 */
export function installCommand({ nodeVersion, platform, arch, lock }) {
  const install = ["install", "--no-save", "--no-audit", "--no-fund"];
  const [major, minor] = nodeVersion.split(".").map(Number);
  if (major > MIN_NODE[0] || (major === MIN_NODE[0] && minor >= MIN_NODE[1])) return { command: "npm", args: install, node: nodeVersion };
  const version = lockedNodeVersion(lock);
  const os = platform === "win32" ? "win" : platform;
  const cpu = os === "win" && arch === "ia32" ? "x86" : arch;
  const prefix = platform === "darwin" && arch === "arm64" ? "node-bin" : "node";
  return { command: "npx", args: ["-y", "-p", `${prefix}-${os}-${cpu}@${version}`, "npm", ...install], node: `${version} (from npm)` };
}

function lockHash() {
  return createHash("sha256").update(readFileSync(join(root, "package-lock.json"))).digest("hex");
}

// ---- running steps, with signals --------------------------------------------------------------

/** The step running now. */
let current;
/** The first signal that asked us to stop, if any. */
let stopping;
const lastForwarded = new Map();
/** What a signal reached: waited for (a while) before this process exits. */
const signalled = new Set();

/** [pid, parent pid] of every process: from /proc on Linux, else from `ps`. */
function processTable() {
  if (!existsSync("/proc/self/stat")) {
    const ps = spawnSync("ps", ["-A", "-o", "pid=,ppid="], { encoding: "utf8" });
    return (ps.stdout ?? "").trim().split("\n").map((line) => line.trim().split(/\s+/).map(Number));
  }
  const rows = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // "pid (comm) state ppid …"; comm may hold spaces and parentheses.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      rows.push([Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])]);
    } catch {
      // exited meanwhile
    }
  }
  return rows;
}

/** `pid` and every process below it. */
function processTree(pid) {
  const children = new Map();
  for (const [child, parent] of processTable()) children.set(parent, [...(children.get(parent) ?? []), child]);
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) tree.push(...(children.get(tree[i]) ?? []));
  return tree;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function onSignal(signal) {
  stopping ??= signal;
  // Ctrl+C under npm arrives twice at once (from the terminal and forwarded by npm): pass it on once;
  // a later one (pressed again) goes through, and the step decides what a second one means.
  const now = Date.now();
  if (now - (lastForwarded.get(signal) ?? -Infinity) < 1_000) return;
  lastForwarded.set(signal, now);
  if (current?.pid === undefined) return;
  // As Ctrl+C reaches every process of the terminal's job: the step and all it started (a test's child
  // processes, tsx's esbuild service), also those in process groups of their own.
  for (const pid of processTree(current.pid)) {
    try {
      process.kill(pid, signal);
      signalled.add(pid);
    } catch {
      // gone meanwhile
    }
  }
}

/** Runs one step; resolves with how it ended. */
function run(command, args, options = {}) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: root, stdio: options.stdio ?? "inherit", env: options.env ?? env });
    current = child;
    child.on("error", (error) => resolve({ code: 127, signal: null, error }));
    child.on("exit", (code, signal) => resolve({ code, signal }));
  }).finally(() => (current = undefined));
}

/** After a stop: waits (up to 10 s) until what the signal reached has gone, so our exit means "stopped". */
async function awaitSignalled() {
  const deadline = Date.now() + 10_000;
  while ([...signalled].some(alive) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
}

/** Ends this process as the step ended: by the same signal, or with its exit status. */
function finish({ code, signal }) {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
}

async function ensureInstalled() {
  const wanted = lockHash();
  const installed = existsSync(stampFile) && readFileSync(stampFile, "utf8").trim() === wanted;
  if (installed && existsSync(join(bin, "node")) && existsSync(join(bin, "hardhat"))) return false;
  const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8"));
  const { command, args, node } = installCommand({ nodeVersion: process.versions.node, platform: process.platform, arch: process.arch, lock });
  log(`installing dependencies with Node ${node}: ${command} ${args.join(" ")}`);
  const started = Date.now();
  // npm prints nothing while it works when stderr is not a terminal: a line every 10 s says it still does.
  const heartbeat = setInterval(() => log(`still installing (${seconds(started)}; 30–60 s from npm's cache, longer from the registry)`), 10_000);
  // stdout of the install goes to stderr: stdout stays clean for `npm start -- --json`.
  const { code, signal, error } = await run(command, args, { stdio: ["ignore", 2, 2], env: process.env }).finally(() => clearInterval(heartbeat));
  if (stopping) {
    await awaitSignalled();
    return true;
  }
  if (code !== 0) {
    log(`dependency install failed (${error ? error.message : `exit ${code ?? signal}`}); see the messages above`);
    process.exit(code || 1);
  }
  writeFileSync(stampFile, `${wanted}\n`);
  log(`dependencies installed in ${seconds(started)}`);
  return true;
}

async function main(argv) {
  const [name, ...rest] = argv;
  if (!Object.hasOwn(COMMANDS, name ?? "")) {
    log(`usage: node scripts/bootstrap.mjs <${Object.keys(COMMANDS).join("|")}> [args]`);
    process.exit(2);
  }
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, onSignal);
  // Run directly (the README's CI job) or by npm: when our parent goes away, stop as if signalled, so
  // a stack started by a CI job never outlives it (SIGKILL of npm reaches no one else).
  const parentPid = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid === parentPid) return;
    clearInterval(watch);
    onSignal("SIGTERM");
  }, 250).unref();

  const installedNow = await ensureInstalled();
  if (!installedNow && name === "setup") log("dependencies up to date (package-lock.json unchanged since the last install)");
  const steps = COMMANDS[name];
  for (const [index, step] of steps.entries()) {
    if (stopping) return finish({ signal: stopping });
    if (step.before) log(step.before());
    const started = Date.now();
    const args = [...step.run.slice(1), ...(index === steps.length - 1 ? rest : [])];
    const result = await run(join(bin, step.run[0]), args);
    if (stopping) {
      await awaitSignalled();
      // A command that stops cleanly on the signal (the stack exits 0) reports that; the rest end by the signal.
      return finish(result.signal || result.code === null ? { signal: result.signal ?? stopping } : { code: result.code });
    }
    if (result.error) {
      log(`cannot run ${relative(root, join(bin, step.run[0]))}: ${result.error.message}`);
      return finish({ code: 1 });
    }
    if (result.signal || result.code !== 0) return finish(result);
    if (step.after) log(step.after(started));
  }
  finish({ code: 0 });
}

// Run as a script, not when a test imports the functions above.
if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) await main(process.argv.slice(2));
