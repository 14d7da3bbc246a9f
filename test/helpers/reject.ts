import { expect } from "chai";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// The one way the tests expect a failure: the call must fail, with an error of the named class.

type ErrorClass<E> = abstract new (...args: never[]) => E;

/**
 * Awaits `work` (a promise, or a function whose result is awaited) and asserts it rejects with an
 * instance of `type`; resolves with the error. Fails when it resolves, naming `what` and the value.
 */
export async function rejection<E extends Error>(work: Promise<unknown> | (() => unknown), type: ErrorClass<E>, what = "the call"): Promise<E> {
  let value: unknown;
  try {
    value = await (typeof work === "function" ? work() : work);
  } catch (error) {
    expect(error, `${what} failed with the wrong error`).to.be.instanceOf(type);
    return error as E;
  }
  expect.fail(`expected ${what} to fail with ${type.name}, but it gave ${String(value)}`);
}

/** The same for a synchronous call: asserts `work()` throws an instance of `type`, and returns the error. */
export function thrown<E extends Error>(work: () => unknown, type: ErrorClass<E>, what = "the call"): E {
  let value: unknown;
  try {
    value = work();
  } catch (error) {
    expect(error, `${what} failed with the wrong error`).to.be.instanceOf(type);
    return error as E;
  }
  expect.fail(`expected ${what} to throw ${type.name}, but it gave ${String(value)}`);
}
