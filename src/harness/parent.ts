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
