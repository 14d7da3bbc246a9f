import { readFileSync } from "node:fs";
import { basename } from "node:path";

/**
 * Calls `onExit` once, with the old parent's pid, when this process's parent goes away (the process is
 * re-parented: its ppid changes). A wrapper that a signal ends without passing the signal on would
 * leave a long-running command behind: SIGTERM to `npx cronos-x402 start` ends npx and the shell it ran
 * the command in, and the stack kept serving, re-parented to init. scripts/bootstrap.mjs watches the
 * same way for the clone's npm scripts. Polled every `everyMs`; the timer never keeps the process
 * alive. Returns a function that stops watching.
 */
export function whenParentExits(onExit: (parentPid: number) => void, everyMs = 250): () => void {
  const parentPid = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parentPid) return;
    clearInterval(timer);
    onExit(parentPid);
  }, everyMs).unref();
  return () => clearInterval(timer);
}

/** Shells that run a command for `-c`, as npm runs every npx command (`sh -c '<bin>' args`). */
const SHELLS = new Set(["sh", "dash", "bash", "ash", "ksh", "mksh", "zsh", "busybox"]);
/** SIGINT's bit in /proc/PID/status's SigCgt mask (signal 2). */
const SIGINT_BIT = 1n << 1n;

/** How often `pid` has been scheduled in (voluntary and involuntary context switches), from /proc; undefined once it is gone. */
function timesScheduled(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const count = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)$`, "m").exec(status)?.[1] ?? Number.NaN);
    const total = count("voluntary_ctxt_switches") + count("nonvoluntary_ctxt_switches");
    return Number.isFinite(total) ? total : undefined;
  } catch {
    return undefined;
  }
}

/** Whether `pid` is a shell running a command string (`sh -c …`) that catches SIGINT. */
function isShellCatchingSigint(pid: number): boolean {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    if (!SHELLS.has(basename(argv[0] ?? "")) || !argv.includes("-c")) return false;
    const caught = /^SigCgt:\s+([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
    return caught !== undefined && (BigInt(`0x${caught}`) & SIGINT_BIT) !== 0n;
  } catch {
    return false;
  }
}

/**
 * Calls `onSignal` once, with the shell's pid, when the shell this process runs under (`sh -c …`)
 * receives a signal it does not pass on. npx runs its command through `sh -c` and forwards SIGINT to
 * that shell only; Debian's sh (dash) catches SIGINT while it waits for the command and acts on it only
 * once the command has exited, so the command never hears of it: SIGINT to `npx cronos-x402 start` left
 * the stack running. A shell waiting for its one command sleeps until a signal wakes it, and the signals
 * it can get then are SIGINT and SIGCHLD, sent when this process stops or continues; so a wake-up (its
 * count of context switches, in /proc) that our own SIGCONT does not explain is the relayed SIGINT. A
 * wake-up is confirmed on the next poll; a SIGCONT in between (handled after the poll that saw the
 * wake-ups of its stop and continue, or before) takes the count as it is then. A shell that does
 * not catch SIGINT dies of it (see {@link whenParentExits}); off Linux nothing is watched. Polled every
 * `everyMs`; the timer never keeps the process alive. Returns a function that stops watching.
 */
export function whenWrapperShellSignalled(onSignal: (shellPid: number) => void, everyMs = 250): () => void {
  const shell = process.ppid;
  if (process.platform !== "linux" || !isShellCatchingSigint(shell)) return () => {};
  let baseline = timesScheduled(shell);
  if (baseline === undefined) return () => {};
  let continued = false;
  let suspected = false;
  const onContinue = () => (continued = true);
  process.on("SIGCONT", onContinue);
  const stop = () => {
    clearInterval(timer);
    process.off("SIGCONT", onContinue);
  };
  const timer = setInterval(() => {
    const count = timesScheduled(shell);
    if (count === undefined || process.ppid !== shell) return stop();
    if (continued) {
      // This process was stopped and continued: the shell woke for that (SIGCHLD), not for a signal.
      [baseline, continued, suspected] = [count, false, false];
      return;
    }
    if (count === baseline) return;
    if (!suspected) {
      suspected = true;
      return;
    }
    stop();
    onSignal(shell);
  }, everyMs).unref();
  return stop;
}
