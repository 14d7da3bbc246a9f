import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "chai";
import { auditTests, describeAudit, type Audit } from "../../scripts/test-audit.js";

// The tests' honesty audit (scripts/test-audit.ts, issue 44): over test/, no timed assertion, no sleep used
// as synchronisation, nothing opened that a teardown does not close. Its rules are checked first on files
// made to break them (each count can rise above 0), then on the suite itself.

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Audits a test/ tree made of `files` (path under test/ → text). */
function auditOf(files: Record<string, string>): Audit {
  const root = mkdtempSync(join(tmpdir(), "x402-audit-"));
  try {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, "test", path)), { recursive: true });
      writeFileSync(join(root, "test", path), text);
    }
    return auditTests(root);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

const lines = (findings: Array<{ file: string; line: number }>) => findings.map(({ file, line }) => `${file}:${line}`);

describe("the tests' honesty audit (scripts/test-audit.ts)", function () {
  it("counts timed assertions: a difference of clock reads, a variable holding one, a measured duration against a bound", () => {
    const audit = auditOf({
      "a/timed.test.ts": [
        'it("x", async () => {',
        "  const started = Date.now();",
        "  await work();",
        "  expect(Date.now() - started).to.be.below(1_000);",
        "  const elapsed = performance.now() - started;",
        "  expect(elapsed).to.be.lessThan(2_000);",
        "  expect(result.durationMs).to.be.at.most(50);",
        "  expect(stats.perSecond).to.be.above(100);",
        // Not timed: a clock value bracketed, a duration's type, a header's number.
        "  expect(answer.timestamp).to.be.within(started, Date.now());",
        '  expect(row.durationMs).to.be.a("number");',
        "  expect(retryAfter).to.be.within(1, 60);",
        "});",
      ].join("\n"),
    });
    expect(lines(audit.timedAssertions)).to.deep.equal(["test/a/timed.test.ts:4", "test/a/timed.test.ts:6", "test/a/timed.test.ts:7", "test/a/timed.test.ts:8"]);
  });

  it("counts awaited pauses as sleeps (a setTimeout promise, a local sleep, timers/promises), not a pause handed to a callback", () => {
    const audit = auditOf({
      "a/sleeps.test.ts": [
        'import { setTimeout as pauseFor } from "node:timers/promises";',
        "const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));",
        'it("x", async () => {',
        "  await new Promise((resolve) => setTimeout(resolve, 300));",
        "  await sleep(50);",
        "  await pauseFor(10);",
        "  const timer = setTimeout(() => socket.destroy(), 1_000);",
        "  await new Promise<void>((res) => setTimeout(() => res(), 20));",
        "  await timers.setTimeout(5);",
        "});",
      ].join("\n"),
    });
    expect(lines(audit.sleeps)).to.deep.equal(["test/a/sleeps.test.ts:4", "test/a/sleeps.test.ts:5", "test/a/sleeps.test.ts:6", "test/a/sleeps.test.ts:8", "test/a/sleeps.test.ts:9"]);
  });

  it("counts what is opened and not closed by a teardown, through the helpers and local functions that return it", () => {
    const audit = auditOf({
      "helpers/open.ts": [
        'import { createServer } from "node:http";',
        'import { closeAfter } from "./teardown.js";',
        // Returns what it opened: an opener where it is called.
        "export function bareServer() {",
        "  return createServer();",
        "}",
        // Registers its close: closed.
        "export function closedServer() {",
        "  const server = createServer();",
        '  closeAfter("server", () => server.close());',
        "  return server;",
        "}",
      ].join("\n"),
      "a/open.test.ts": [
        'it("never closed", async () => {',
        "  const chain = await startLocalChain({ port: 0 });",
        "  const server = bareServer();",
        "  const ledger = openSqliteLedger({ location });",
        "  await ledger.close();",
        "});",
        "const openTwo = () => startLocalChain({ port: 0 });",
        'it("through a local opener", async () => {',
        "  const two = await openTwo();",
        "});",
        'describe("closed", () => {',
        "  const chains: LocalChain[] = [];",
        "  let kept: LocalChain;",
        "  afterEach(() => Promise.all(chains.splice(0).map((chain) => chain.stop())));",
        "  after(() => kept?.stop());",
        '  it("in a teardown, a collection, a finally, a helper", async () => {',
        "    kept = await startLocalChain({ port: 0 });",
        "    chains.push(await startLocalChain({ port: 0 }));",
        "    const mine = await startLocalChain({ port: 0 });",
        "    chains.push(mine);",
        "    const own = openSqliteLedger({ location });",
        "    try {",
        "      await use(own);",
        "    } finally {",
        "      await own.close();",
        "    }",
        "    const server = closedServer();",
        "    const error = await rejection(startLocalChain({ port: taken }), PortInUseError);",
        "  });",
        "});",
      ].join("\n"),
    });
    expect(lines(audit.unclosed)).to.deep.equal(["test/a/open.test.ts:2", "test/a/open.test.ts:3", "test/a/open.test.ts:4", "test/a/open.test.ts:9"]);
  });

  it("finds the suite at 0 timed assertions, 0 sleeps as synchronisation and 0 things left open, its allow-list all in use", function () {
    const audit = auditTests(ROOT);
    expect(audit.files).to.be.above(100);
    expect(
      [audit.timedAssertions.length, audit.sleeps.length, audit.unclosed.length, audit.staleAllowances.length],
      describeAudit(audit),
    ).to.deep.equal([0, 0, 0, 0]);
  });

  it("no test count is typed by hand in the README or docs/: the run prints its own (test/helpers/teardown.ts)", () => {
    // "974 tests", "1,187 passing", "tests: 1498": a count of the suite's tests written down goes stale (a
    // group's own count, "(6 tests)" beside its title, is checked where it is quoted, not here).
    const count = /\b(?:\d{3,}|\d{1,3}(?:,\d{3})+)\s+(?:tests|passing|test cases)\b|\btests?:\s*(?:\d{3,}|\d{1,3}(?:,\d{3})+)\b/i;
    const docs = ["README.md", ...readdirSync(join(ROOT, "docs"), { recursive: true }).map(String).filter((name) => name.endsWith(".md")).map((name) => `docs/${name}`)];
    const typed = docs.flatMap((doc) =>
      readFileSync(join(ROOT, doc), "utf8")
        .split("\n")
        .flatMap((line, index) => (count.test(line) ? [`${doc}:${index + 1}: ${line.trim().slice(0, 160)}`] : [])),
    );
    expect(typed, typed.join("\n")).to.deep.equal([]);
  });
});
