import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { ROOT } from "../helpers/processes.js";

/** A snippet file as the README shows it: without its first comment line, the kit imported by its package name. */
function asInReadme(file: string): string {
  const text = readFileSync(join(ROOT, file), "utf8");
  return text.slice(text.indexOf("\n") + 1).replaceAll('"../../src/protocol/index.js"', '"cronos-x402-facilitator-kit/protocol"');
}

describe("README: the @x402 snippets are the code the compatibility matrix runs", () => {
  it("shows scripts/snippets/x402-seller.ts and x402-buyer.ts verbatim under Using the @x402 packages", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("## Using the @x402 packages"), readme.indexOf("## The facilitator"));
    const blocks = [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]);
    expect(blocks).to.deep.equal([asInReadme("scripts/snippets/x402-seller.ts"), asInReadme("scripts/snippets/x402-buyer.ts")]);
  });
});
