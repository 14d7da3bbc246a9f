#!/usr/bin/env node
// Entry of `npm start`, `npm test` and `npm run setup`. Plain JavaScript that runs on Node 20, so a
// fresh clone works on a machine whose only Node is 20: it installs the dependencies once with npm
// running on Node 22 (Hardhat 3 and its EDR native binding need Node >= 22.13), then runs the real
// command on the Node 22 that the `node` devDependency puts in node_modules/.bin.
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bin = join(root, "node_modules", ".bin");
const stampFile = join(root, "node_modules", ".kit-install-stamp");
const env = { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ""}` };

// Each command is a list of steps; arguments after `--` go to the last step.
const COMMANDS = {
  // Not the tsx CLI: its wrapper process kills a child that is busy starting up when a signal arrives.
  start: [["node", "--import", "tsx", "scripts/start.ts"]],
  facilitator: [["node", "--import", "tsx", "scripts/facilitator.ts"]],
  // Compile first: the type check reads the typed artifacts Hardhat generates.
  test: [["hardhat", "compile", "--quiet"], ["tsc", "--noEmit"], ["hardhat", "test"]],
  setup: [],
};

function log(line) {
  process.stderr.write(`[kit] ${line}\n`);
}

function lockHash() {
  return createHash("sha256").update(readFileSync(join(root, "package-lock.json"))).digest("hex");
}

function nodeAtLeast(major, minor) {
  const [ma, mi] = process.versions.node.split(".").map(Number);
  return ma > major || (ma === major && mi >= minor);
}

function ensureInstalled() {
  const wanted = lockHash();
  const installed = existsSync(stampFile) && readFileSync(stampFile, "utf8").trim() === wanted;
  if (installed && existsSync(join(bin, "node")) && existsSync(join(bin, "hardhat"))) return;
  // npm must itself run on Node >= 22 or it skips EDR's native binding (engines >= 22).
  // `npm install --no-save` installs exactly the locked versions and leaves the lock untouched; `npm ci`
  // refuses this lock wherever the registry lacks EDR's binaries for other platforms (as ours does).
  const install = ["install", "--no-save", "--no-audit", "--no-fund"];
  const [command, args] = nodeAtLeast(22, 13) ? ["npm", install] : ["npx", ["-y", "-p", "node@22", "npm", ...install]];
  log(`installing dependencies with Node ${nodeAtLeast(22, 13) ? process.versions.node : "22 (from npm)"}: ${command} ${args.join(" ")}`);
  const started = Date.now();
  // stdout of the install goes to stderr: stdout stays clean for `npm start -- --json`.
  const result = spawnSync(command, args, { cwd: root, stdio: ["ignore", 2, 2], env: process.env });
  if (result.status !== 0) {
    log(`dependency install failed (exit ${result.status ?? result.signal}); see the messages above`);
    process.exit(result.status || 1);
  }
  writeFileSync(stampFile, `${wanted}\n`);
  log(`dependencies installed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

const [name, ...rest] = process.argv.slice(2);
if (!(name in COMMANDS)) {
  log(`usage: node scripts/bootstrap.mjs <${Object.keys(COMMANDS).join("|")}> [args]`);
  process.exit(2);
}
ensureInstalled();
const steps = COMMANDS[name];

let child;
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child?.kill(signal));
}
// `npm start` runs us under `sh -c`, and a SIGTERM to npm does not reach us: when our parent goes
// away, stop the command as if signalled, so a stack started by a CI job never outlives it.
const parentPid = process.ppid;
setInterval(() => {
  if (process.ppid !== parentPid) child?.kill("SIGTERM");
}, 250).unref();

function run(step, args) {
  return new Promise((resolve) => {
    child = spawn(join(bin, step[0]), [...step.slice(1), ...args], { cwd: root, stdio: "inherit", env });
    child.on("exit", (code, signal) => resolve({ code, signal }));
  });
}

for (const [index, step] of steps.entries()) {
  const { code, signal } = await run(step, index === steps.length - 1 ? rest : []);
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else if (code !== 0) {
    process.exit(code ?? 1);
  }
}
process.exit(0);
