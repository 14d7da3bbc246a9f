import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "chai";
import { itBlocks } from "../helpers/doc-rows.js";

// docs/conformance.md claims only what its tests assert: the Statuses rows whose claim is about every test of a
// file, read against those tests' bodies (that each row names tests that exist is rows.test.ts).

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

describe("docs/conformance.md Statuses rows: what their tests assert", function () {
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
