import { expect } from "chai";
import { nestsWithin } from "../../src/protocol/bazaar.js";

describe("nestsWithin: how deep a payer's JSON nests, without recursion", () => {
  const nested = (depth: number, leaf: unknown = "x", wrap: (inner: unknown) => unknown = (inner) => ({ a: inner })) => {
    let value = leaf;
    for (let i = 0; i < depth; i++) value = wrap(value);
    return value;
  };

  it("counts objects and arrays alike; a scalar is depth 0; the bound is inclusive", () => {
    expect([nestsWithin("x", 0), nestsWithin(null, 0), nestsWithin({}, 0), nestsWithin({}, 1), nestsWithin([], 1)]).to.deep.equal([true, true, false, true, true]);
    expect([nestsWithin(nested(64), 64), nestsWithin(nested(65), 64)]).to.deep.equal([true, false]);
    expect([nestsWithin(nested(64, 1, (inner) => [inner]), 64), nestsWithin(nested(65, 1, (inner) => [1, inner]), 64)]).to.deep.equal([true, false]);
    // The deepest branch counts, wherever it is.
    expect(nestsWithin({ shallow: 1, list: [{}, { deep: nested(70) }] }, 64)).to.equal(false);
  });

  it("answers for a value nested 100,000 levels deep, which JSON.stringify cannot even write", () => {
    const deep = nested(100_000);
    expect(() => JSON.stringify(deep)).to.throw(RangeError);
    expect(nestsWithin(deep, 64)).to.equal(false);
  });
});
