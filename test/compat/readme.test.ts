import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { ROOT } from "../helpers/processes.js";

/** A snippet file as docs/x402-packages.md shows it: without its first comment line, the kit imported by its package name. */
function asInDocs(file: string): string {
  const text = readFileSync(join(ROOT, file), "utf8");
  return text.slice(text.indexOf("\n") + 1).replaceAll('"../../src/protocol/index.js"', '"cronos-x402-facilitator-kit/protocol"');
}

describe("docs/x402-packages.md: the @x402 snippets are the code the compatibility matrix runs", () => {
  it("shows scripts/snippets/x402-seller.ts and x402-buyer.ts verbatim, and no other TypeScript", () => {
    const doc = readFileSync(join(ROOT, "docs", "x402-packages.md"), "utf8");
    const blocks = [...doc.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]);
    expect(blocks).to.deep.equal([asInDocs("scripts/snippets/x402-seller.ts"), asInDocs("scripts/snippets/x402-buyer.ts")]);
  });
});
