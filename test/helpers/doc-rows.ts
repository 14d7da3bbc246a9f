import { readFileSync } from "node:fs";
import { join } from "node:path";
import { blanked } from "../../scripts/test-audit.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// The `it(` blocks of a test file, for the checks that a claim of docs/conformance.md is what its tests assert
// (that each row names tests that exist is test/conformance/rows.test.ts).

/** The `it(` blocks of a test file: each title's opening text (up to its first quote's end) and its body. */
export function itBlocks(root: string, file: string): Array<{ title: string; body: string }> {
  const text = readFileSync(join(root, file), "utf8");
  const code = blanked(text);
  const blocks: Array<{ title: string; body: string }> = [];
  for (const match of code.matchAll(/\bit\(\s*(["'`])/g)) {
    const start = match.index + match[0].length - 1;
    const title = /^(["'`])((?:\\.|(?!\1)[^\\])*)\1/.exec(text.slice(start))?.[2] ?? "";
    const open = code.indexOf("{", start + title.length + 2);
    let depth = 0;
    let end = open;
    for (; end < code.length; end++) {
      if (code[end] === "{") depth++;
      else if (code[end] === "}" && --depth === 0) break;
    }
    blocks.push({ title, body: text.slice(open, end + 1) });
  }
  return blocks;
}
