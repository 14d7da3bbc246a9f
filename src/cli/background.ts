// `cronos-x402 start --background` (with `cronos-x402 stop`, stop.ts): the local stack for a CI job in any language
// in three lines (start, run the suite, stop), without a fifo, jq or a job-control shell. The stack runs
// as a detached process; a state file (stack-state.ts: pid and the process's start time, so a reused pid is never
// signalled) lets `stop` find it, stop it and wait until it has gone.
import { spawn } from "node:child_process";
import { closeSync, constants as fsConstants, mkdirSync, openSync, readSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_STATE_DIR, type BackgroundOptions } from "../harness/cli.js";
import type { LocalStackNetwork } from "../harness/stack.js";
import { writeEnvFile } from "./env-file.js";
import { processStartTime, readState, signal, STATE_FILE, stillRuns, waitUntilGone, writeFileAtomically, type StackState } from "./stack-state.js";

/** Set (to "1") in the environment of the detached stack; read and removed by it at once. */
export const DETACHED_VARIABLE = "X402_KIT_DETACHED";

/** What the detached stack prints on stdout once ready, for the `start --background` that waits for it. */
export interface DetachedReadyLine {
  /** The public `--json` line. */
  line: { facilitatorUrl: string; harnessUrl: string; relayer: string; networks: Partial<Record<string, LocalStackNetwork>> };
  /** The human summary, as `start` prints it without `--json`. */
  summary: string;
  /** The suggested seller `payTo` (for the env file). */
  seller: string;
}

const LOG_FILE = "stack.log";
/** The ready line carries every buyer of every network (at most 100 each): far below this. */
const MAX_READY_LINE_BYTES = 1024 * 1024;
/** Why a start failed when the stack ended by itself before its ready line. */
const EXITED = "it exited before it was ready";

/** The last `lines` lines of a file (its last 64 KiB at most), or "" when it cannot be read. */
function tailOf(path: string, lines: number): string {
  try {
    const fd = openSync(path, "r");
    try {
      const size = statSync(path).size;
      const length = Math.min(size, 64 * 1024);
      const buffer = Buffer.alloc(length);
      readSync(fd, buffer, 0, length, size - length);
      return buffer.toString("utf8").trimEnd().split("\n").slice(-lines).join("\n");
    } finally {
      closeSync(fd);
    }
  } catch {
    return "";
  }
}

/** The first line of `stdout` (at most {@link MAX_READY_LINE_BYTES}); rejects when the stream ends first. */
function readFirstLine(stdout: NodeJS.ReadableStream): Promise<string> {
  return new Promise((resolveLine, reject) => {
    let text = "";
    const onData = (chunk: Buffer | string) => {
      text += chunk.toString();
      const end = text.indexOf("\n");
      if (end >= 0) {
        done();
        resolveLine(text.slice(0, end));
      } else if (text.length > MAX_READY_LINE_BYTES) {
        done();
        reject(new Error(`its ready line exceeded ${MAX_READY_LINE_BYTES} bytes`));
      }
    };
    const onEnd = () => {
      done();
      reject(new Error(EXITED));
    };
    const done = () => {
      stdout.off("data", onData);
      stdout.off("end", onEnd);
    };
    stdout.on("data", onData);
    stdout.once("end", onEnd);
  });
}

/** Where the `cronos-x402` entry of this very code is (dist/cli/bin.js, or src/cli/bin.ts under tsx in the kit's clone). */
function binEntry(): string {
  return fileURLToPath(new URL(import.meta.url.endsWith(".ts") ? "./bin.ts" : "./bin.js", import.meta.url));
}

/** What {@link runInBackground} reports: the printing is its caller's. */
export interface BackgroundIo {
  stdout(text: string): void;
  stderr(text: string): void;
}

/**
 * `cronos-x402 start --background`: starts the stack as a detached process (its log in the state
 * folder), waits until it is ready (at most `readyTimeoutMs`), writes the state file and the env file,
 * prints what `start` prints (`json`: the JSON line), and returns 0; the stack keeps running. Returns
 * 1 when a stack of the same state folder still runs, or when the stack fails or is not ready in time
 * (it is stopped then, and its error said).
 */
export async function runInBackground(argv: readonly string[], options: { json: boolean; envFile?: string; background: BackgroundOptions }, io: BackgroundIo): Promise<number> {
  const dir = resolve(options.background.stateDir);
  const statePath = join(dir, STATE_FILE);
  const logPath = join(dir, LOG_FILE);
  const previous = readState(statePath);
  if ("problem" in previous) {
    io.stderr(`error: ${previous.problem}; delete it, or choose another folder with --state-dir DIR\n`);
    return 1;
  }
  if ("state" in previous && stillRuns(previous.state)) {
    io.stderr(
      `error: a stack started by \`cronos-x402 start --background\` already runs (pid ${previous.state.pid}${previous.state.facilitatorUrl ? `, ${previous.state.facilitatorUrl}` : ""}); stop it first with \`cronos-x402 stop\`${options.background.stateDir === DEFAULT_STATE_DIR ? "" : ` --state-dir ${options.background.stateDir}`}, or give this one another --state-dir\n`,
    );
    return 1;
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // Not through a link planted at its name: O_NOFOLLOW fails on one (ELOOP), said below.
  let log: number;
  try {
    log = openSync(logPath, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC | fsConstants.O_NOFOLLOW, 0o600);
  } catch (error) {
    io.stderr(`error: cannot write the stack's log ${logPath} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}: a link there is not followed); remove it, or choose another folder with --state-dir DIR\n`);
    return 1;
  }
  // The detached stack gets the same options but the ones only this process uses.
  const childArgs = withoutBackgroundFlags(argv);
  const child = spawn(process.execPath, [...process.execArgv, binEntry(), "start", ...childArgs], {
    // Its own session: a terminal's Ctrl+C or the CI step's end reaches this process, not the stack.
    detached: true,
    stdio: ["ignore", "pipe", log],
    env: { ...process.env, [DETACHED_VARIABLE]: "1" },
  });
  closeSync(log);
  const state: StackState = {
    kind: "cronos-x402 local stack",
    pid: child.pid!,
    ...(child.pid !== undefined && processStartTime(child.pid) !== undefined ? { processStart: processStartTime(child.pid)! } : {}),
    startedAt: new Date().toISOString(),
    log: logPath,
    ...(options.envFile !== undefined ? { envFile: resolve(options.envFile) } : {}),
  };
  // Written before waiting: if this process is killed while the stack starts, `stop` still finds it.
  writeFileAtomically(statePath, `${JSON.stringify(state)}\n`);

  const exited = new Promise<string>((resolveExit) => child.once("exit", (code, name) => resolveExit(name ?? `exit ${code}`)));
  let timer: NodeJS.Timeout | undefined;
  const interrupted = new Promise<string>((resolveSignal) => {
    for (const name of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.once(name, () => resolveSignal(name));
  });
  const outcome = await Promise.race([
    readFirstLine(child.stdout!).then(
      (line) => ({ line }),
      (error: Error) => ({ failed: error.message }),
    ),
    new Promise<{ failed: string }>((resolveTimeout) => {
      timer = setTimeout(() => resolveTimeout({ failed: `it was not ready within ${options.background.readyTimeoutMs / 1000} s` }), options.background.readyTimeoutMs);
    }),
    interrupted.then((name) => ({ failed: `${name} arrived while it started` })),
  ]);
  clearTimeout(timer);

  let ready: DetachedReadyLine | undefined;
  if ("line" in outcome) {
    try {
      ready = JSON.parse(outcome.line) as DetachedReadyLine;
    } catch {
      ready = undefined;
    }
  }
  if (!ready) {
    const failed = "failed" in outcome ? outcome.failed : "its ready line was not JSON";
    // Stopped (killed when it does not stop in time), and nothing recorded: nothing is left running.
    if (signal(state.pid, "SIGTERM") && !(await waitUntilGone(state, 20_000))) signal(state.pid, "SIGKILL");
    await Promise.race([exited, new Promise((resolveWait) => setTimeout(resolveWait, 2_000))]);
    rmSync(statePath, { force: true });
    // The stack's own one-line reason (a port in use, a bad fork URL, …) when it said one; else its last lines.
    const tail = tailOf(logPath, 40).split("\n");
    const said = tail.filter((line) => line.startsWith("error: "));
    const exitedItself = "failed" in outcome && outcome.failed === EXITED;
    if (!exitedItself) io.stderr(`error: the local stack did not start: ${failed}; it was stopped (pid ${state.pid})\n`);
    if (said.length > 0) io.stderr(`${said.join("\n")}\n(the local stack's log: ${logPath})\n`);
    else io.stderr(`${exitedItself ? `error: the local stack did not start: ${failed}; ` : ""}the end of its log (${logPath}):\n${tail.slice(-10).join("\n")}\n`);
    return 1;
  }
  child.stdout!.destroy();
  child.unref();
  writeFileAtomically(statePath, `${JSON.stringify({ ...state, facilitatorUrl: ready.line.facilitatorUrl, harnessUrl: ready.line.harnessUrl })}\n`);
  if (options.envFile !== undefined) writeEnvFile(options.envFile, { facilitatorUrl: ready.line.facilitatorUrl, harnessUrl: ready.line.harnessUrl, seller: ready.seller, networks: ready.line.networks });
  io.stdout(options.json ? `${JSON.stringify(ready.line)}\n` : ready.summary);
  io.stderr(
    `[start] running in the background (pid ${state.pid}); its log: ${logPath}${options.envFile !== undefined ? `; its URLs and a buyer key: ${options.envFile}` : ""}; \`cronos-x402 stop\`${options.background.stateDir === DEFAULT_STATE_DIR ? "" : ` --state-dir ${options.background.stateDir}`} stops it\n`,
  );
  return 0;
}

/** `argv` without `--background`, `--state-dir`, `--ready-timeout` and `--write-env` (with their values). */
function withoutBackgroundFlags(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const name = arg.split("=")[0]!;
    if (name === "--background") continue;
    if (["--state-dir", "--ready-timeout", "--write-env"].includes(name)) {
      if (!arg.includes("=")) i++;
      continue;
    }
    out.push(arg);
  }
  // The detached stack answers with its ready line whatever was asked; this process prints what was asked.
  return out.filter((arg) => arg !== "--json");
}

