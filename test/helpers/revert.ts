import { assert } from "chai";
import { BaseError, ContractFunctionRevertedError } from "viem";
import { rejection } from "./reject.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).

function isRevertError(error: unknown): error is ContractFunctionRevertedError {
  return (
    error instanceof ContractFunctionRevertedError ||
    (error instanceof Error && error.name === "ContractFunctionRevertedError" && "reason" in error)
  );
}

/**
 * Awaits `promise` and asserts that it failed because the contract reverted with exactly
 * `reason` (a Solidity `Error(string)`). Fails if the promise resolves, if the error is not a
 * contract revert, or if the revert reason differs in any character. Returns the revert error.
 */
export async function expectRevert(promise: Promise<unknown>, reason: string): Promise<ContractFunctionRevertedError> {
  const caught = await rejection(promise, Error, `a call expected to revert with "${reason}"`);
  const reverted =
    caught instanceof BaseError ? caught.walk(isRevertError) : isRevertError(caught) ? caught : null;
  if (!isRevertError(reverted)) {
    const message = caught instanceof BaseError ? caught.shortMessage : String(caught);
    assert.fail(`expected a revert with "${reason}", but got a different error: ${message}`);
  }
  assert.strictEqual(reverted.reason, reason, "revert reason");
  return reverted;
}
