import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "chai";
import { itBlocks, rowClaims } from "../helpers/doc-rows.js";

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

  it("the Statuses rows \"verify outcome 200\" and \"settle outcome 200\": every test of verify-reasons.test.ts and settle-errors.test.ts that sends a verify or settle asserts its 200", () => {
    for (const [file, route] of [
      ["test/facilitator/verify-reasons.test.ts", "verify"],
      ["test/facilitator/settle-errors.test.ts", "settle"],
    ] as const) {
      // The file's own helper asserts the status (`verify(opened, …)` / `settle(opened, …)`); a test may assert it itself.
      const helper = new RegExp(`\\b${route}\\(opened\\b`);
      const sends = new RegExp(`${helper.source}|\\.post\\(["'\`]/v2/x402/${route}`);
      const asserts = new RegExp(`${helper.source}|\\.status\\)[^;]*\\.to\\.equal\\(200\\)|\\.fill\\(200\\)`);
      const blocks = itBlocks(ROOT, file);
      expect(blocks.length, file).to.be.above(5);
      const unasserted = blocks.filter(({ body }) => sends.test(body) && !asserts.test(body)).map(({ title }) => title);
      expect(unasserted, `${file}: tests that send a ${route} and never assert its 200`).to.deep.equal([]);
      expect(blocks.filter(({ body }) => sends.test(body)).length, `${file}: tests that send a ${route}`).to.be.above(blocks.length / 2);
    }
  });

  it("the Statuses row \"RPC down: nothing sent\": each of its tests checks the relayer's nonce and the authorization's state", () => {
    const named = [
      ["test/facilitator/http-statuses.test.ts", "answers verify 500 and settle 503, in JSON, when the chain cannot be read"],
      ["test/facilitator/faults.test.ts", "when the RPC never answers"],
      ["test/facilitator/faults.test.ts", "when the RPC port is closed"],
    ] as const;
    for (const [file, fragment] of named) {
      const blocks = itBlocks(ROOT, file).filter(({ title }) => title.includes(fragment));
      expect(blocks, `${file} › …${fragment}…`).to.have.length(1);
      const body = blocks[0]!.body;
      // Directly, or through the file's expectNothingSent (which reads both).
      const checks = /expectNothingSent\(/.test(body) ? readFileSync(join(ROOT, file), "utf8") : body;
      expect(/getTransactionCount\(|relayerNonce\(/.test(checks) && /authorizationState\(/.test(checks), `${file} › …${fragment}… checks the relayer's nonce and authorizationState`).to.equal(true);
    }
  });
});
