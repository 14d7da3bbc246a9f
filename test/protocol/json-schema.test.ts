import { expect } from "chai";
import { conformsToSchema } from "../../src/protocol/json-schema.js";

describe("protocol: extension schemas checked without running payers' regular expressions", () => {
  it("does not evaluate a pattern: one made to backtrack catastrophically answers at once (it would hold the event loop for hours)", () => {
    // (a+)+$ against 40 a's and a mismatch is ~2^40 steps for a backtracking engine; this test would time out.
    expect(conformsToSchema({ type: "string", pattern: "^(a+)+$" }, `${"a".repeat(40)}!`)).to.equal(true);
    expect(conformsToSchema({ type: "object", patternProperties: { "^(x+)+$": { type: "number" } } }, { [`${"x".repeat(40)}!`]: 1 })).to.equal(true);
  });

  it("still checks everything else of the schema", () => {
    const schema = { type: "object", properties: { city: { type: "string", pattern: "^[a-z]+$", maxLength: 5 } }, required: ["city"] };
    expect(conformsToSchema(schema, { city: "oslo" })).to.equal(true);
    expect(conformsToSchema(schema, { city: "OSLO1" })).to.equal(true); // the pattern alone is not evaluated
    expect(conformsToSchema(schema, { city: "stockholm" })).to.equal(false);
    expect(conformsToSchema(schema, {})).to.equal(false);
    expect(conformsToSchema(schema, { city: 7 })).to.equal(false);
  });
});
