import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { ROOT } from "../helpers/processes.js";

// The documents a package user reads: what they tell an operator to run in production.

/** The fenced shell blocks of a Markdown file. */
function shellBlocks(file: string): string[] {
  return [...readFileSync(join(ROOT, file), "utf8").matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!);
}

describe("docs: production runs the package's compiled CLI", () => {
  for (const file of ["README.md", "docs/facilitator.md", "docs/operations.md"]) {
    it(`${file}: every block that configures a real relayer key starts the facilitator with \`npx cronos-x402 facilitator\`, never the clone's TypeScript path`, () => {
      const production = shellBlocks(file).filter((block) => /RELAYER_PRIVATE_KEY|\.env\b/.test(block) && /facilitator/.test(block));
      expect(production, file).to.not.deep.equal([]);
      for (const block of production) {
        expect(block, block).to.match(/^npx cronos-x402 facilitator\b/m);
        expect(block, block).to.not.match(/npm run facilitator|tsx|scripts\/facilitator/);
      }
    });
  }
});

describe("docs/harness.md: the GitHub Actions steps it shows are the workflow's", () => {
  it("every line of its yaml block is a line of examples/ci-github-actions/.github/workflows/x402-e2e.yml (run by test/package/package.test.ts)", () => {
    const blocks = [...readFileSync(join(ROOT, "docs", "harness.md"), "utf8").matchAll(/```yaml\n([\s\S]*?)```/g)].map((match) => match[1]!);
    expect(blocks).to.have.length(1);
    const workflow = readFileSync(join(ROOT, "examples", "ci-github-actions", ".github", "workflows", "x402-e2e.yml"), "utf8").split("\n");
    const shown = blocks[0]!.split("\n").filter((line) => line.trim() !== "");
    expect(shown.filter((line) => !workflow.includes(line))).to.deep.equal([]);
  });
});

describe("CHANGELOG.md: its first section is the version package.json carries", () => {
  it("heads with package.json's version and has no Unreleased section above it (a packed tarball describes itself)", () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
    const sections = [...readFileSync(join(ROOT, "CHANGELOG.md"), "utf8").matchAll(/^## (.+)$/gm)].map((match) => match[1]!).filter((heading) => heading !== "Versioning policy");
    expect(sections[0]).to.match(new RegExp(`^\\[?${version.replaceAll(".", "\\.")}\\]?( |$)`));
    expect(sections.filter((heading) => /unreleased/i.test(heading))).to.deep.equal([]);
  });
});
