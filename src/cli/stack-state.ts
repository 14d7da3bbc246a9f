// The state file of a stack started in the background: which process it is (its pid and start time, so a reused pid is
// never signalled), where its log is; and the process checks `start --background` and `stop` share.
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { z } from "zod";

/** The state file's name in the state folder. */
export const STATE_FILE = "stack.json";
/** A state file is a few hundred bytes: anything past this is not ours, and is not read. */
const MAX_STATE_BYTES = 64 * 1024;

const stateSchema = z.strictObject({
  kind: z.literal("cronos-x402 local stack"),
  pid: z.number().int().positive(),
  /** The process's start time as the system reports it (Linux: clock ticks since boot; else `ps -o lstart`). */
  processStart: z.string().optional(),
  startedAt: z.string(),
  facilitatorUrl: z.string().optional(),
  /** The stack's control endpoint: where `cronos-x402 fault` and `time` find it. */
  harnessUrl: z.string().optional(),
  log: z.string(),
  envFile: z.string().optional(),
});
/** What the state file holds. */
export type StackState = z.infer<typeof stateSchema>;

/**
 * Writes `text` to `path` in one step (a reader never sees half of it), readable by its owner only. The
 * file is made new (O_EXCL: never written through a link planted at its name) and renamed over `path`,
 * which replaces a link there rather than following it.
 */
export function writeFileAtomically(path: string, text: string): void {
  mkdirSync(dirname(resolve(path)), { recursive: true });
  const partial = `${path}.${process.pid}.partial`;
  rmSync(partial, { force: true });
  writeFileSync(partial, text, { mode: 0o600, flag: "wx" });
  renameSync(partial, path);
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
export function stillRuns(state: StackState): boolean {
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
export function readState(path: string): { state: StackState } | { missing: true } | { problem: string } {
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

/** Sends `signal` to `pid`; false when it is gone. */
export function signal(pid: number, name: NodeJS.Signals): boolean {
  try {
    process.kill(pid, name);
    return true;
  } catch {
    return false;
  }
}

/** Resolves true once the process the state names has gone, false after `timeoutMs`. */
export async function waitUntilGone(state: StackState, timeoutMs: number): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (stillRuns(state)) {
    if (performance.now() > deadline) return false;
    await new Promise((resolveWait) => setTimeout(resolveWait, 100));
  }
  return true;
}

/**
 * The control endpoint of the stack `start --background` runs from `stateDir` (its state file's
 * `harnessUrl`), or a one-line reason there is none.
 */
export function harnessUrlOf(stateDir: string): { url: string } | { problem: string } {
  const statePath = join(resolve(stateDir), STATE_FILE);
  const read = readState(statePath);
  if ("missing" in read) return { problem: `no stack state in ${resolve(stateDir)}: start one with \`cronos-x402 start --background\`, or name it with --url URL (or HARNESS_URL)` };
  if ("problem" in read) return { problem: read.problem };
  if (!stillRuns(read.state)) return { problem: `the stack of ${statePath} (pid ${read.state.pid}) is no longer running` };
  if (!read.state.harnessUrl) return { problem: `${statePath} names no harness URL (a stack started by an older kit, or still starting): name it with --url URL` };
  return { url: read.state.harnessUrl };
}
