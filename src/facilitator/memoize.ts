/**
 * Shares one run of `task` between callers for `ttlMs` after it started (and while it runs), so an
 * endpoint that reads the chain cannot be turned into a flood of RPC requests. A failed run is not kept.
 */
export function memoizeFor<T>(ttlMs: number, task: () => Promise<T>, now: () => number = Date.now): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | undefined;
  return () => {
    const at = now();
    if (!last || at - last.at >= ttlMs) {
      const value = task();
      const run = { at, value };
      last = run;
      value.catch(() => {
        if (last === run) last = undefined;
      });
    }
    return last.value;
  };
}
