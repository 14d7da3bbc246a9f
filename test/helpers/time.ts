import { expect } from "chai";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// Times in answers (waiting is test/helpers/wait.ts).

/** An ISO-8601 UTC time as `Date#toISOString` writes it. */
export const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Asserts `body.timestamp` is an ISO time and returns the body without it, for deep-equal checks. */
export function withoutTimestamp(body: unknown): Record<string, unknown> {
  const { timestamp, ...rest } = body as Record<string, unknown>;
  expect(timestamp).to.match(ISO_TIME);
  return rest;
}

/** Waiting lives in test/helpers/wait.ts; this name stays importable from here for tests written before it moved. */
export { waitUntil } from "./wait.js";
