// `cronos-x402 start --background` and `cronos-x402 stop`: the local stack for a CI job in any language
// in three lines (start, run the suite, stop), without a fifo, jq or a job-control shell. The stack runs
// as a detached process; a state file (pid and the process's start time, so a reused pid is never
// signalled) lets `stop` find it, stop it and wait until it has gone.
import { spawn, spawnSync } from "node:child_process";
import { closeSync, constants as fsConstants, mkdirSync, openSync, readFileSync, readSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { DEFAULT_STATE_DIR, DEFAULT_STOP_TIMEOUT_SECONDS, seconds, UsageError, type BackgroundOptions } from "../harness/cli.js";
import type { LocalStackNetwork } from "../harness/stack.js";

/** Set (to "1") in the environment of the detached stack; read and removed by it at once. */
export const DETACHED_VARIABLE = "X402_KIT_DETACHED";

/** What the detached stack prints on stdout once ready, for the `start --background` that waits for it. */
export interface DetachedReadyLine {
  /** The public `--json` line. */
  line: { facilitatorUrl: string; relayer: string; networks: Partial<Record<string, LocalStackNetwork>> };
  /** The human summary, as `start` prints it without `--json`. */
  summary: string;
  /** The suggested seller `payTo` (for the env file). */
  seller: string;
}

/**
 * The names {@link envFileLines} writes. A job that loads the env file into its environment (GitHub's
 * `$GITHUB_ENV`, `set -a`) and starts the stack again hands them to it: the stack leaves them out of the
 * facilitator's environment, whose unknown-variable check takes RPC_URL for a typo of CRONOS_*_RPC_URL.
 */
export const ENV_FILE_NAMES: readonly string[] = [
  "FACILITATOR_URL",
  "NETWORK",
  "CHAIN_ID",
  "RPC_URL",
  "WS_URL",
  "TOKEN_ADDRESS",
  "BUYER_ADDRESS",
  "BUYER_PRIVATE_KEY",
  "BUYER_PRIVATE_KEYS",
  "PAY_TO",
  "TESTNET_RPC_URL",
  "TESTNET_TOKEN_ADDRESS",
  "MAINNET_RPC_URL",
  "MAINNET_TOKEN_ADDRESS",
];

/** What the stack's env file holds: its URLs, the first network's token and buyers. */
export interface EnvFileStack {
  facilitatorUrl: string;
  seller: string;
  networks: Partial<Record<string, LocalStackNetwork>>;
}

const STATE_FILE = "stack.json";
const LOG_FILE = "stack.log";
/** A state file is a few hundred bytes: anything past this is not ours, and is not read. */
const MAX_STATE_BYTES = 64 * 1024;
/** The ready line carries every buyer of every network (at most 100 each): far below this. */
const MAX_READY_LINE_BYTES = 1024 * 1024;
/** Why a start failed when the stack ended by itself before its ready line. */
const EXITED = "it exited before it was ready";

const stateSchema = z.strictObject({
  kind: z.literal("cronos-x402 local stack"),
  pid: z.number().int().positive(),
  /** The process's start time as the system reports it (Linux: clock ticks since boot; else `ps -o lstart`). */
  processStart: z.string().optional(),
  startedAt: z.string(),
  facilitatorUrl: z.string().optional(),
  log: z.string(),
  envFile: z.string().optional(),
});
type StackState = z.infer<typeof stateSchema>;

/**
 * The `NAME=value` lines of the env file: readable by `set -a; . FILE`, `docker --env-file`, dotenv and
 * `node --env-file`, and appendable to GitHub Actions' `$GITHUB_ENV` (no comments, no quotes: every value
 * is a URL, a number or hex). The first network is cronos-testnet when it runs.
 */
export function envFileLines(stack: EnvFileStack): string[] {
  const names = Object.keys(stack.networks);
  const first = names.includes("cronos-testnet") ? "cronos-testnet" : names[0];
  const network = first === undefined ? undefined : stack.networks[first];
  const lines = [`FACILITATOR_URL=${stack.facilitatorUrl}`];
  if (first !== undefined && network) {
    lines.push(
      `NETWORK=${first}`,
      `CHAIN_ID=${network.chainId}`,
      `RPC_URL=${network.rpcUrl}`,
      `WS_URL=${network.wsUrl}`,
      `TOKEN_ADDRESS=${network.token}`,
      ...(network.buyers[0] ? [`BUYER_ADDRESS=${network.buyers[0].address}`, `BUYER_PRIVATE_KEY=${network.buyers[0].privateKey}`] : []),
      `BUYER_PRIVATE_KEYS=${network.buyers.map((buyer) => buyer.privateKey).join(",")}`,
    );
  }
  lines.push(`PAY_TO=${stack.seller}`);
  for (const [name, info] of Object.entries(stack.networks)) {
    const prefix = name === "cronos-testnet" ? "TESTNET" : name === "cronos-mainnet" ? "MAINNET" : undefined;
    if (prefix && info) lines.push(`${prefix}_RPC_URL=${info.rpcUrl}`, `${prefix}_TOKEN_ADDRESS=${info.token}`);
  }
  return lines;
}

/**
 * Writes `text` to `path` in one step (a reader never sees half of it), readable by its owner only. The
 * file is made new (O_EXCL: never written through a link planted at its name) and renamed over `path`,
 * which replaces a link there rather than following it.
 */
function writeFileAtomically(path: string, text: string): void {
  mkdirSync(dirname(resolve(path)), { recursive: true });
  const partial = `${path}.${process.pid}.partial`;
  rmSync(partial, { force: true });
  writeFileSync(partial, text, { mode: 0o600, flag: "wx" });
  renameSync(partial, path);
}

/** Writes the env file (see {@link envFileLines}). */
export function writeEnvFile(path: string, stack: EnvFileStack): void {
  writeFileAtomically(path, `${envFileLines(stack).join("\n")}\n`);
}

/** When `pid` started, as the system reports it, to tell it from a later process given the same pid; undefined when it is gone (or unknown here). */
export function processStartTime(pid: number): string | undefined {
  if (process.platform === "linux") {
    try {
      // "pid (comm) state ppid …": starttime is field 22, the 20th after the command's closing parenthesis.
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return fields[0] === "Z" ? undefined : fields[19];
    } catch {
      return undefined;
    }
  }
  const ps = spawnSync("ps", ["-o", "lstart=", "-p", String(pid)], { encoding: "utf8" });
  return ps.status === 0 ? ps.stdout.trim() || undefined : undefined;
}

/** Whether the process the state names still runs (the same process: a reused pid is another). */
function stillRuns(state: StackState): boolean {
  const start = processStartTime(state.pid);
  if (process.platform === "linux" || state.processStart !== undefined) return start !== undefined && (state.processStart === undefined || start === state.processStart);
  try {
    process.kill(state.pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The state file's contents, or a one-line reason it cannot be used. */
function readState(path: string): { state: StackState } | { missing: true } | { problem: string } {
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    return { missing: true };
  }
  if (size > MAX_STATE_BYTES) return { problem: `${path} is ${size} bytes, not a state file of \`cronos-x402 start --background\`` };
  try {
    const parsed = stateSchema.safeParse(JSON.parse(readFileSync(path, "utf8")));
    if (parsed.success) return { state: parsed.data };
    return { problem: `${path} is not a state file of \`cronos-x402 start --background\` (${parsed.error.issues[0]?.path.join(".") || "its shape"}: ${parsed.error.issues[0]?.message})` };
  } catch (error) {
    return { problem: `${path} is not a state file of \`cronos-x402 start --background\` (${(error as Error).message.split("\n")[0]})` };
  }
}

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

/** Sends `signal` to `pid`; false when it is gone. */
function signal(pid: number, name: NodeJS.Signals): boolean {
  try {
    process.kill(pid, name);
    return true;
  } catch {
    return false;
  }
}

/** Resolves true once the process the state names has gone, false after `timeoutMs`. */
async function waitUntilGone(state: StackState, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (stillRuns(state)) {
    if (performance.now() > deadline) return false;
    await new Promise((resolveWait) => setTimeout(resolveWait, 100));
  }
  return true;
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
  writeFileAtomically(statePath, `${JSON.stringify({ ...state, facilitatorUrl: ready.line.facilitatorUrl })}\n`);
  if (options.envFile !== undefined) writeEnvFile(options.envFile, { facilitatorUrl: ready.line.facilitatorUrl, seller: ready.seller, networks: ready.line.networks });
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

/** The `cronos-x402 stop --help` text. */
export function stopUsage(): string {
  return [
    "Usage: cronos-x402 stop [--state-dir DIR] [--timeout S]",
    "",
    "Stops the local stack that `cronos-x402 start --background` started from this folder (or with the same",
    "--state-dir), and returns once it has gone: chains and facilitator stopped, ports free. A stack that does",
    `not stop within --timeout seconds [default: ${DEFAULT_STOP_TIMEOUT_SECONDS}] is killed. Nothing to stop is not an error.`,
    "",
    "Exit status: 0 once stopped (or when nothing ran), 1 when it had to be killed or the state file is not",
    "one of start --background's, 2 for a bad option.",
  ].join("\n");
}

/** `cronos-x402 stop`: see {@link stopUsage}. Returns the exit status. */
export async function runStop(argv: readonly string[], io: BackgroundIo): Promise<number> {
  let stateDir = DEFAULT_STATE_DIR;
  let timeoutMs: number;
  try {
    const { parseArgs } = await import("node:util");
    const { values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: { "state-dir": { type: "string" }, timeout: { type: "string" }, help: { type: "boolean", short: "h" } },
    });
    if (values.help) {
      io.stdout(`${stopUsage()}\n`);
      return 0;
    }
    if (values["state-dir"] !== undefined) {
      if (values["state-dir"].trim() === "") throw new UsageError('--state-dir: needs a path, got ""');
      stateDir = values["state-dir"];
    }
    timeoutMs = seconds("--timeout", values.timeout, DEFAULT_STOP_TIMEOUT_SECONDS);
  } catch (error) {
    io.stderr(`error: ${(error as Error).message.split("\n")[0]}\n\n${stopUsage()}\n`);
    return 2;
  }
  const statePath = join(resolve(stateDir), STATE_FILE);
  const read = readState(statePath);
  if ("missing" in read) {
    io.stderr(`[stop] nothing to stop: no stack state in ${resolve(stateDir)} (\`cronos-x402 start --background\` writes it)\n`);
    return 0;
  }
  if ("problem" in read) {
    io.stderr(`error: ${read.problem}; nothing was signalled\n`);
    return 1;
  }
  const { state } = read;
  if (!stillRuns(state)) {
    rmSync(statePath, { force: true });
    io.stderr(`[stop] nothing to stop: the stack (pid ${state.pid}, started ${state.startedAt}) is no longer running; its log: ${state.log}\n`);
    return 0;
  }
  io.stderr(`[stop] stopping the local stack (pid ${state.pid}${state.facilitatorUrl ? `, ${state.facilitatorUrl}` : ""})\n`);
  signal(state.pid, "SIGTERM");
  if (await waitUntilGone(state, timeoutMs)) {
    rmSync(statePath, { force: true });
    io.stderr(`[stop] stopped (its log: ${state.log})\n`);
    return 0;
  }
  signal(state.pid, "SIGKILL");
  const gone = await waitUntilGone(state, 5_000);
  if (gone) rmSync(statePath, { force: true });
  io.stderr(`error: the stack (pid ${state.pid}) did not stop within ${timeoutMs / 1000} s${gone ? ": killed" : ", and is still there after SIGKILL"}; its log: ${state.log}\n`);
  return 1;
}
