import { expect } from "chai";
import { formatResultLine, formatSummary } from "../../src/conformance/report/console.js";
import { toJsonDocument } from "../../src/conformance/report/json.js";
import { escapeAttribute, escapeText, toJUnit } from "../../src/conformance/report/junit.js";
import { summarize, type CheckResult, type RunReport } from "../../src/conformance/runner.js";
import { findAll, parseXml } from "../helpers/xml.js";

/** A message with everything XML must escape or drop: markup, quotes, a CDATA end, control characters, a lone surrogate. */
const HOSTILE = `expected "<b>Invalid amount: 9999</b>" & 'more', got ]]> \u0000\u0008\u001b\uD800 <html lang="en">\n\tline two 🙂`;

function report(results: CheckResult[]): RunReport {
  return { facilitator: "http://127.0.0.1:1/?a=1&b=<2>", startedAt: "2026-01-01T00:00:00.123Z", durationMs: 1234, results, summary: summarize(results) };
}

const RESULTS: CheckResult[] = [
  { id: "health.shape", dialect: "cronos", title: "GET /healthcheck answers", spec: "spec 4.1", status: "passed", durationMs: 5 },
  {
    id: "verify.amount-below-price",
    network: "cronos-testnet",
    dialect: "cronos",
    title: "verify refuses <a header> that pays less",
    spec: "spec 7.1 Invalid amount & co",
    status: "failed",
    message: HOSTILE,
    durationMs: 12,
  },
  { id: "settle.pays", network: "cronos-testnet", dialect: "cronos", title: "settle pays", spec: "spec 4.4", status: "skipped", message: "needs --settle \"2 units\"", durationMs: 0 },
  { id: "verify.expired", network: "cronos-mainnet", dialect: "cronos", title: "verify refuses expired", spec: "spec 7.2", status: "passed", message: "ok", durationMs: 3 },
];

describe("conformance reporters", () => {
  describe("JUnit XML", () => {
    it("is well-formed for hostile messages and counts one testcase per check, with failure and skipped elements", () => {
      const xml = toJUnit(report(RESULTS));
      const root = parseXml(xml);
      expect(root.name).to.equal("testsuites");
      expect(root.attributes).to.include({ tests: "4", failures: "1", errors: "0", skipped: "1", time: "1.234" });

      const suites = findAll(root, "testsuite");
      expect(suites.map((suite) => [suite.attributes.name, suite.attributes.tests, suite.attributes.failures, suite.attributes.skipped])).to.deep.equal([
        ["x402 facilitator conformance · cronos · service", "1", "0", "0"],
        ["x402 facilitator conformance · cronos · cronos-testnet", "2", "1", "1"],
        ["x402 facilitator conformance · cronos · cronos-mainnet", "1", "0", "0"],
      ]);
      expect(findAll(suites[0]!, "property")[0]!.attributes).to.deep.equal({ name: "facilitator", value: "http://127.0.0.1:1/?a=1&b=<2>" });

      const cases = findAll(root, "testcase");
      expect(cases.map((c) => c.attributes.name)).to.deep.equal(["health.shape", "verify.amount-below-price@cronos-testnet", "settle.pays@cronos-testnet", "verify.expired@cronos-mainnet"]);
      expect(cases[1]!.attributes.classname).to.equal("x402.conformance.cronos.cronos-testnet");
      expect(cases[1]!.attributes.time).to.equal("0.012");

      // The message survives the round trip, minus the characters XML cannot carry at all.
      const failure = findAll(cases[1]!, "failure");
      expect(failure).to.have.length(1);
      const carried = HOSTILE.replace(/[\u0000\u0008\u001b]|\uD800/g, "");
      expect(failure[0]!.attributes.message).to.equal(carried);
      expect(failure[0]!.text).to.equal(`verify refuses <a header> that pays less\nproves: spec 7.1 Invalid amount & co\n${carried}`);
      expect(findAll(cases[2]!, "skipped")[0]!.attributes.message).to.equal('needs --settle "2 units"');
      expect(findAll(cases[0]!, "failure").length + findAll(cases[0]!, "skipped").length).to.equal(0);
      expect(findAll(cases[3]!, "system-out")[0]!.text).to.equal("verify refuses expired\nproves: spec 7.2\nok");
    });

    it("escapes text and attribute values", () => {
      expect(escapeText(`a<b>&c]]>`)).to.equal("a&lt;b&gt;&amp;c]]&gt;");
      expect(escapeAttribute(`"x"\n'y'\t`)).to.equal("&quot;x&quot;&#10;&apos;y&apos;&#9;");
      expect(escapeText("nul\u0000 esc\u001b kept\ttab")).to.equal("nul esc kept\ttab");
    });

    it("writes an empty run as a document with no testcase", () => {
      const root = parseXml(toJUnit(report([])));
      expect(root.attributes.tests).to.equal("0");
      expect(findAll(root, "testcase")).to.deep.equal([]);
    });
  });

  describe("the strict XML parser of the tests", () => {
    for (const [what, xml] of [
      ["a bare &", "<a>x & y</a>"],
      ["a raw < in an attribute", '<a b="<"/>'],
      ["an unknown entity", "<a>&nbsp;</a>"],
      ["a mismatched closing tag", "<a><b></a></b>"],
      ["an unclosed element", "<a><b/>"],
      ["a repeated attribute", '<a b="1" b="2"/>'],
      ["a control character", "<a>\u0001</a>"],
      ["a second root", "<a/><b/>"],
      ["a reference to NUL", "<a>&#0;</a>"],
    ] as const) {
      it(`refuses ${what}`, () => {
        expect(() => parseXml(xml)).to.throw();
      });
    }

    it("reads entities, character references, comments and CDATA", () => {
      const root = parseXml(`<?xml version="1.0" encoding="UTF-8"?><!-- c --><a x='&lt;&#65;&#x42;'>t&amp;<![CDATA[<raw>]]><b/></a>`);
      expect(root).to.deep.equal({ name: "a", attributes: { x: "<AB" }, children: [{ name: "b", attributes: {}, children: [], text: "" }], text: "t&<raw>" });
    });
  });

  describe("console lines", () => {
    it("prints one line per check: status, name, the spec row, and what failed or why it was skipped", () => {
      expect(formatResultLine(RESULTS[0]!, 20)).to.equal("PASS  health.shape          [spec 4.1]");
      expect(formatResultLine(RESULTS[1]!)).to.equal(`FAIL  verify.amount-below-price@cronos-testnet  [spec 7.1 Invalid amount & co]: ${HOSTILE.replace(/\s*\n\s*/g, " ")}`);
      expect(formatResultLine(RESULTS[2]!)).to.equal('SKIP  settle.pays@cronos-testnet  [spec 4.4]: needs --settle "2 units"');
      expect(formatResultLine(RESULTS[1]!).split("\n")).to.have.length(1);
    });

    it("sums up counts, time and the verdict", () => {
      expect(formatSummary(report(RESULTS))).to.equal(
        "4 checks: 2 passed, 1 failed, 1 skipped in 1.2 s; http://127.0.0.1:1/?a=1&b=<2> does NOT conform (for the checks run)",
      );
      expect(formatSummary(report([RESULTS[0]!]))).to.match(/^1 check: 1 passed, 0 failed, 0 skipped in 1\.2 s; .* conforms \(for the checks run\)$/);
    });
  });

  it("the JSON document carries every result and the summary", () => {
    const document = toJsonDocument(report(RESULTS), { local: false, networks: ["cronos-testnet"], dialects: ["cronos"], permissions: { settle: false, rateLimit: false } });
    const parsed = JSON.parse(JSON.stringify(document));
    expect(parsed.tool).to.equal("x402-facilitator-conformance");
    expect(parsed.summary).to.deep.equal({ total: 4, passed: 2, failed: 1, skipped: 1 });
    expect(parsed.checks).to.deep.equal(RESULTS);
    expect(parsed.facilitator).to.equal("http://127.0.0.1:1/?a=1&b=<2>");
  });
});
