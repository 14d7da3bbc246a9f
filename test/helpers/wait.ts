// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// Waiting for something another part (a timer, a process, a chain) does: the only way tests wait. Each
// wait polls its condition and, past its deadline, fails naming what it waited for and what it last saw.
// A sleep is never a wait: "nothing happened" is checked after something that proves time passed (a later
// block, a later answer from the same server, a counter that advanced), not after a pause.

/**
 * The default deadline, and the least any wait gets: a deadline only says when to give up (a wait that
 * fails always fails loudly), so a loaded machine must not fail a wait that was about to succeed. Well
 * inside Mocha's 60 s per test.
 */
export const WAIT_MS = 30_000;

/** The default pause between two polls. */
const EVERY_MS = 20;

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function shown(value: unknown): string {
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  try {
    const text = JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? `${v}n` : v));
    return text === undefined ? String(value) : text.length > 500 ? `${text.slice(0, 500)}…` : text;
  } catch {
    return String(value);
  }
}

/** What a check waits for, when the caller does not say: its source text (`() => index.status().state === "following"`). */
function described(check: () => unknown): string {
  return check.toString().replace(/\s+/g, " ").slice(0, 300);
}

/**
 * Reads `read()` every `everyMs` until `done(value)` holds, and resolves with that value. Past `timeoutMs`
 * it rejects with `what` and the last value read. An error thrown by `read` fails the wait at once.
 */
export async function waitFor<T>(read: () => T | Promise<T>, done: (value: T) => boolean, what: string, timeoutMs = WAIT_MS, everyMs = EVERY_MS): Promise<T> {
  const deadline = Math.max(timeoutMs, WAIT_MS);
  const started = Date.now();
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() - started >= deadline) throw new Error(`waited ${deadline} ms for ${what}; last seen: ${shown(value)}`);
    await pause(everyMs);
  }
}

type Check = () => boolean | Promise<boolean>;

/**
 * Polls `check` every `everyMs` until it returns true; past `timeoutMs` it rejects naming `what` (by
 * default the check's own source). Resolves with `true`, so `expect(await waitUntil(…)).to.equal(true)`
 * reads as before. `waitUntil("what it waits for", check, timeoutMs?, everyMs?)` names it first.
 */
export async function waitUntil(what: string, check: Check, timeoutMs?: number, everyMs?: number): Promise<true>;
export async function waitUntil(check: Check, timeoutMs?: number, everyMs?: number, what?: string): Promise<true>;
export async function waitUntil(first: string | Check, ...rest: [unknown?, unknown?, unknown?]): Promise<true> {
  const [check, timeoutMs, everyMs, what] =
    typeof first === "string" ? [rest[0] as Check, rest[1] as number | undefined, rest[2] as number | undefined, first] : [first, rest[0] as number | undefined, rest[1] as number | undefined, rest[2] as string | undefined];
  await waitFor(check, (ok) => ok, what ?? described(check), timeoutMs ?? WAIT_MS, everyMs ?? EVERY_MS);
  return true;
}

/**
 * Runs `attempt` every `everyMs` until it resolves (e.g. a block of assertions, or a read of a server still
 * starting) and resolves with its value; past `timeoutMs` it rejects with `what` and the last error.
 */
export async function eventually<T>(attempt: () => T | Promise<T>, what = described(attempt), timeoutMs = WAIT_MS, everyMs = EVERY_MS): Promise<T> {
  const deadline = Math.max(timeoutMs, WAIT_MS);
  const started = Date.now();
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() - started >= deadline) {
        throw new Error(`waited ${deadline} ms for ${what}; last error: ${shown(error)}`, { cause: error });
      }
    }
    await pause(everyMs);
  }
}
