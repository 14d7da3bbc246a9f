import { expect } from "chai";
import { PaymentError, type PaymentErrorCode } from "../../src/buyer/index.js";
import { rejection as rejectionOf } from "./reject.js";

// Helpers only: importing this file runs nothing.

/** Awaits `promise`, asserts it rejects with a {@link PaymentError} of `code`, and returns the error. */
export async function rejection(promise: Promise<unknown>, code: PaymentErrorCode): Promise<PaymentError> {
  const error = await rejectionOf(promise, PaymentError, `a payment expected to fail with ${code}`);
  expect(error.code).to.equal(code);
  return error;
}
