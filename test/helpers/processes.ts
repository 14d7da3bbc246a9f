import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { closeAfter } from "./teardown.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// Child processes: the kit's commands run as a CI suite in another language would run them.

/** The kit's root directory. */
export const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** A spawned process with its output collected. */
export interface Spawned {
  child: ChildProcessWithoutNullStreams;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first match of `pattern` in stdout (rejects on exit or after `timeoutMs`). */
  waitFor(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray>;
  /** Resolves with the first stdout line, without its newline (rejects on exit or after `timeoutMs`). */
  firstLine(timeoutMs: number): Promise<string>;
  /** The exit code, or the signal name. */
  exited: Promise<number | NodeJS.Signals>;
  /** SIGKILL to the process group it leads, if anything of it still runs (for `after` / `finally`). */
  kill(): void;
}

/** Options of {@link spawnInRoot}. */
export interface SpawnOptions {
  /** False: the process sees only PATH, HOME and `env` (no variable of the test run leaks in). Default true. */
  inheritEnv?: boolean;
  /** False: stderr is never read, like a parent that only reads stdout (the pipe is left to fill up). Default true. */
  readStderr?: boolean;
}

/**
 * Spawns `command args` in the kit's root, in a process group of its own, with node_modules/.bin first
 * on PATH (so `node`, `npm` and `tsx` are the Node 22 ones), `env` added to the environment.
 */
export function spawnInRoot(command: string, args: readonly string[], env: NodeJS.ProcessEnv = {}, options: SpawnOptions = {}): Spawned {
  const bin = join(ROOT, "node_modules", ".bin");
  const base = options.inheritEnv ?? true ? process.env : { HOME: process.env.HOME ?? "/root" };
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...base, ...env, PATH: `${bin}${delimiter}${process.env.PATH ?? ""}` },
    stdio: ["pipe", "pipe", "pipe"],
    // Its own process group: `kill` reaches what it starts in turn (tsx runs the script in a child).
    detached: true,
  });
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
  if (options.readStderr ?? true) child.stderr.setEncoding("utf8").on("data", (chunk: string) => (err += chunk));
  let done = false;
  const exited = new Promise<number | NodeJS.Signals>((resolve) =>
    child.once("exit", (code, signal) => {
      done = true;
      resolve(code ?? signal ?? -1);
    }),
  );
  function waitFor(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
    return new Promise((resolve, reject) => {
      // A deadline that fails loudly, not a pause: the match ends the wait as soon as it is printed.
      const timer = setTimeout(() => finish(new Error(`no ${pattern} on stdout within ${timeoutMs} ms\nstdout:\n${out}\nstderr:\n${err}`)), timeoutMs);
      const onData = () => {
        const match = out.match(pattern);
        if (match) finish(undefined, match);
      };
      const onExit = () => {
        onData();
        finish(new Error(`exited before printing ${pattern}\nstdout:\n${out}\nstderr:\n${err}`));
      };
      let finished = false;
      function finish(error?: Error, match?: RegExpMatchArray) {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        child.stdout.off("data", onData);
        child.off("exit", onExit);
        if (error) reject(error);
        else resolve(match!);
      }
      child.stdout.on("data", onData);
      child.once("exit", onExit);
      onData();
      if (done) onExit();
    });
  }
  const kill = () => {
    // The whole group, even when the direct child is gone: a grandchild would keep the pipes open.
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    } catch {
      // ESRCH: nothing left in the group
    }
  };
  // Whatever the test left running is killed with the scope that spawned it; its pipes close with it.
  closeAfter(`process ${command} ${args.join(" ")}`.slice(0, 120), async () => {
    kill();
    await exited;
    child.stdout.destroy();
    child.stderr.destroy();
    child.stdin.destroy();
  });
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitFor,
    firstLine: async (timeoutMs) => (await waitFor(/^(.*)\n/, timeoutMs))[1]!,
    kill,
  };
}

/**
 * The processes (pid and command line) whose environment holds `name=value`: everything a command
 * spawned with that variable started, however deep and whoever adopted it since (Linux /proc).
 */
export function processesWithEnv(name: string, value: string): Array<{ pid: number; command: string }> {
  const wanted = `${name}=${value}`;
  const found: Array<{ pid: number; command: string }> = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // A zombie's environment reads empty: only running processes match.
      if (!readFileSync(`/proc/${entry}/environ`, "utf8").split("\0").includes(wanted)) continue;
      found.push({ pid: Number(entry), command: readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ").trim() });
    } catch {
      // exited meanwhile, or not ours to read
    }
  }
  return found;
}
