import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "chai";
import { rowClaims } from "../helpers/doc-rows.js";

// docs/conformance.md claims only what its tests assert: each row of its tables names a test file that
// exists, and each fragment of a title it quotes (after `›`) is in that file (test/helpers/doc-rows.ts).

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

describe("docs/conformance.md names existing tests", function () {
  it("finds a missing file, a title no file has, and a row that names no test", () => {
    const doc = [
      "## A section (`conformance/cli.test.ts`)",
      "",
      "| row | test |",
      "|---|---|",
      "| a title the section's file has | › refuses a malformed key without repeating any of it |",
      "| a file that does not exist | `conformance/nowhere.test.ts` |",
      "| a title nobody wrote | `conformance/cli.test.ts` › proves everything at once |",
      "| no test at all | trust us |",
    ].join("\n");
    expect(rowClaims(ROOT, doc).map(({ line, missing }) => [line, missing])).to.deep.equal([
      [5, []],
      [6, ["no file conformance/nowhere.test.ts"]],
      [7, ['"proves everything at once" in test/conformance/cli.test.ts']],
      [8, ["names no test file"]],
    ]);
  });

  it("every row of every table names an existing test file, and every title fragment it quotes is in that file", () => {
    const claims = rowClaims(ROOT);
    expect(claims.length).to.be.above(300);
    const wrong = claims.filter((claim) => claim.missing.length > 0).map((claim) => `docs/conformance.md:${claim.line}: ${claim.missing.join("; ")}`);
    expect(wrong, wrong.join("\n")).to.deep.equal([]);
  });
});
