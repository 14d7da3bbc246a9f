import { expect } from "chai";
import { PaymentError, type PaymentErrorCode } from "../../src/buyer/index.js";

// Helpers only: importing this file runs nothing.

/** Awaits `promise`, asserts it rejects with a {@link PaymentError} of `code`, and returns the error. */
export async function rejection(promise: Promise<unknown>, code: PaymentErrorCode): Promise<PaymentError> {
  try {
    await promise;
  } catch (error) {
    expect(error).to.be.instanceOf(PaymentError);
    if (error instanceof PaymentError) {
      expect(error.code).to.equal(code);
      return error;
    }
  }
  throw new Error(`expected PaymentError ${code}`);
}
