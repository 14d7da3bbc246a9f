import { expect } from "chai";
import type { Address, Hex } from "viem";
import { MemorySettleGuards, penaltySubjects, type PayerAccount } from "../../src/facilitator/settle-guards.js";

const TOKEN: Address = "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0";
const PAYER: Address = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
const OTHER: Address = "0x90F79bf6EB2c4f870365E785982E1f101E93b906";
const CODE: Hex = `0x${"ab".repeat(32)}`;
const account: PayerAccount = { chainId: 338, token: TOKEN, payer: PAYER };
const nonce = (n: number): Hex => `0x${n.toString(16).padStart(64, "0")}`;

describe("settle guards (in memory): balance reservations and revert penalties", () => {
  let now: number;
  let guards: MemorySettleGuards;
  beforeEach(() => {
    now = 1_000_000;
    guards = new MemorySettleGuards({ now: () => now });
  });
  const reserve = (id: number, amount: bigint, balance = 100n, block = 10n, ttlMs = 60_000) =>
    guards.reserve(account, { id: nonce(id), amount, balance, block, ttlMs });

  it("reserves up to the balance and refuses what would exceed it; a release without spending frees the amount", async () => {
    expect(await reserve(1, 60n)).to.equal(true);
    expect(await reserve(2, 40n)).to.equal(true);
    expect(await reserve(3, 1n)).to.equal(false);
    await guards.release(account, nonce(2));
    expect(await reserve(3, 40n)).to.equal(true);
    expect(await reserve(4, 1n)).to.equal(false);
  });

  it("keeps a spent reservation counting against balances read before its block, not at or after it", async () => {
    expect(await reserve(1, 60n, 100n, 10n)).to.equal(true);
    await guards.release(account, nonce(1), 11n);
    // A balance read at block 10 does not show the transfer mined in block 11 yet.
    expect(await reserve(2, 50n, 100n, 10n)).to.equal(false);
    // Read at block 11 the balance is 40 and already shows it.
    expect(await reserve(2, 40n, 40n, 11n)).to.equal(true);
  });

  it("treats reserving the same authorization again as a replacement, and separates payers, tokens and chains", async () => {
    expect(await reserve(1, 100n)).to.equal(true);
    expect(await reserve(1, 100n)).to.equal(true);
    expect(await guards.reserve({ ...account, payer: OTHER }, { id: nonce(2), amount: 100n, balance: 100n, block: 10n, ttlMs: 1 })).to.equal(true);
    expect(await guards.reserve({ ...account, chainId: 25 }, { id: nonce(2), amount: 100n, balance: 100n, block: 10n, ttlMs: 1 })).to.equal(true);
    expect(await guards.reserve({ ...account, payer: PAYER.toLowerCase() as Address }, { id: nonce(2), amount: 1n, balance: 100n, block: 10n, ttlMs: 1 })).to.equal(false);
  });

  it("lets a reservation that was never ended lapse after its ttl, and a spent one after a minute at most", async () => {
    expect(await reserve(1, 100n, 100n, 10n, 180_000)).to.equal(true);
    now += 179_999;
    expect(await reserve(2, 1n)).to.equal(false);
    now += 1;
    expect(await reserve(2, 100n, 100n, 10n, 180_000)).to.equal(true);
    await guards.release(account, nonce(2), 50n);
    now += MemorySettleGuards.SPENT_RETENTION_MS - 1;
    expect(await reserve(3, 1n, 100n, 10n)).to.equal(false);
    now += 1;
    expect(await reserve(3, 100n, 100n, 10n)).to.equal(true);
  });

  it("penalizes a payer and a code hash until a chain time, per token and chain; a later penalty extends, an earlier one does not shorten", async () => {
    const scope = { chainId: 338, token: TOKEN };
    await guards.penalize(scope, penaltySubjects(PAYER, CODE), 1_600n);
    expect(await guards.penalized(scope, [{ kind: "payer", address: PAYER }], 1_599n)).to.equal(true);
    expect(await guards.penalized(scope, penaltySubjects(OTHER, CODE), 1_599n)).to.equal(true);
    expect(await guards.penalized(scope, penaltySubjects(OTHER, undefined), 1_599n)).to.equal(false);
    expect(await guards.penalized({ ...scope, chainId: 25 }, penaltySubjects(PAYER, CODE), 1_599n)).to.equal(false);
    expect(await guards.penalized(scope, [{ kind: "payer", address: PAYER }], 1_600n)).to.equal(false);

    await guards.penalize(scope, penaltySubjects(OTHER, undefined), 2_000n);
    await guards.penalize(scope, penaltySubjects(OTHER, undefined), 1_700n);
    expect(await guards.penalized(scope, [{ kind: "payer", address: OTHER }], 1_999n)).to.equal(true);
    expect(await guards.penalized(scope, [{ kind: "payer", address: OTHER }], 2_000n)).to.equal(false);
  });
});
