// `cronos-x402 stop`: stops the stack `cronos-x402 start --background` started, and returns once it has gone.
import { rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { DEFAULT_STATE_DIR, DEFAULT_STOP_TIMEOUT_SECONDS, seconds, UsageError } from "../harness/cli.js";
import type { BackgroundIo } from "./background.js";
import { readState, signal, STATE_FILE, stillRuns, waitUntilGone } from "./stack-state.js";

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
