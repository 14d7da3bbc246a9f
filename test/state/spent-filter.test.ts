import { expect } from "chai";
import { SpentFilter } from "../../src/state/spent-filter.js";

/** A key as the index makes one: 52 characters of 0–255 (an authorizer's 20 bytes, a nonce's 32). */
const key = () => String.fromCharCode(...crypto.getRandomValues(new Uint8Array(52)));

describe("spent filter: the forgotten spent nonces, in a fixed size", () => {
  it("never says 'not among them' of a key it holds, and rarely 'maybe' of another at its sized load", () => {
    const filter = new SpentFilter(32 * 20_000, 6);
    const held = Array.from({ length: 20_000 }, key);
    held.forEach((k) => filter.add(k));
    expect(held.every((k) => filter.mayHold(k))).to.equal(true);
    expect(filter.count).to.equal(20_000);
    expect(filter.bytes).to.equal(80_000);
    const falsely = Array.from({ length: 20_000 }, key).filter((k) => filter.mayHold(k)).length;
    // Expected about 0.0025 % (6 hashes, 32 bits per key): at most a handful.
    expect(falsely).to.be.below(10);
  });

  it("keeps its size whatever comes in: overloaded ten times, it still holds every key, and says 'maybe' more often", () => {
    const filter = new SpentFilter(32 * 1_000, 6);
    const held = Array.from({ length: 10_000 }, key);
    held.forEach((k) => filter.add(k));
    expect(filter.bytes).to.equal(4_000);
    expect(held.every((k) => filter.mayHold(k))).to.equal(true);
    const falsely = Array.from({ length: 10_000 }, key).filter((k) => filter.mayHold(k)).length;
    expect(falsely).to.be.above(100);
  });

  it("says 'not among them' of anything while empty, and hashes with a seed of its own (another filter sets other bits)", () => {
    const a = new SpentFilter(64, 6);
    const b = new SpentFilter(64, 6);
    expect(a.mayHold(key())).to.equal(false);
    // 64 bits, 6 per key: with other seeds, the same 8 keys leave some bit set in one and not the other (with near certainty).
    const keys = Array.from({ length: 8 }, key);
    keys.forEach((k) => (a.add(k), b.add(k)));
    const probes = Array.from({ length: 200 }, key);
    expect(probes.some((k) => a.mayHold(k) !== b.mayHold(k))).to.equal(true);
  });
});
