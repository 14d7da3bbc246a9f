import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { FAILURE_ROWS, FAILURE_TABLE_HEADING } from "../helpers/failures.js";
import { ROOT } from "../helpers/processes.js";

// The README's table "to test how your seller/buyer handles …" names exactly the rows test/e2e/failures.test.ts
// runs, and says for each what that test asserts the buyer sees.

/** The table's rows: the cells of each line after its header and separator. */
function tableRows(): string[][] {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const start = readme.indexOf(`\n${FAILURE_TABLE_HEADING}\n`);
  expect(start, FAILURE_TABLE_HEADING).to.be.greaterThan(0);
  const section = readme.slice(start + 1, readme.indexOf("\n### ", start + 1));
  const lines = section.split("\n");
  const header = lines.findIndex((line) => line.startsWith("| to test how your seller/buyer handles |"));
  expect(header, "the table's header").to.be.greaterThan(0);
  const rows: string[][] = [];
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(line.slice(1, -1).split(" | ").map((cell) => cell.trim()));
  }
  return rows;
}

describe("README: every failure on demand, one row per test of test/e2e/failures.test.ts", () => {
  it("names the rows the test runs, in its order", () => {
    expect(tableRows().map((cells) => cells[0])).to.deep.equal(Object.values(FAILURE_ROWS).map((row) => row.what));
  });

  for (const [key, row] of Object.entries(FAILURE_ROWS)) {
    it(`says what the buyer sees for ${key}: the status${"error" in row ? ", the error" : ""}${"reason" in row ? ", the reason" : ""}${"retryAfter" in row ? ", Retry-After" : ""} the test asserts`, () => {
      const cells = tableRows().find((cells) => cells[0] === row.what);
      expect(cells, row.what).to.have.length(3);
      const sees = cells![2]!;
      expect(sees.startsWith(String(row.status)), sees).to.equal(true);
      if ("error" in row) expect(sees).to.contain(`\`${row.error}\``);
      if ("reason" in row) expect(sees).to.contain(`reason \`${row.reason}\``);
      if ("retryAfter" in row && row.retryAfter === "2") expect(sees).to.contain("`Retry-After: 2`");
      if ("retryAfter" in row && row.retryAfter === "busy") expect(sees).to.contain("`Retry-After`");
    });
  }
});
