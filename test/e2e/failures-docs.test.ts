import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { faultSpecOf, parseFaultArgs } from "../../src/cli/fault.js";
import { parsePaymentArgs } from "../../src/cli/payment-args.js";
import { signRequestSchema } from "../../src/harness/control/sign.js";
import { advanceSchema, parseFaultSpec } from "../../src/harness/control/spec.js";
import { FAILURE_ROWS, FAILURE_TABLE_HEADING } from "../helpers/failures.js";
import { ROOT } from "../helpers/processes.js";

// docs/failures.md's table "to test how your seller/buyer handles …" names exactly the rows test/e2e/failures.test.ts
// runs, and says for each what that test asserts the buyer sees; its table "the same rows from any language" says
// the same of each row over HTTP and from the shell: each body read by the control endpoint's schemas, each command
// line by the CLI's parsers, both asking the harness for the same things.

const DOC = readFileSync(join(ROOT, "docs", "failures.md"), "utf8");

/** The rows of the table whose header starts `header`, in the section that starts at `heading`. */
function tableRows(heading: string, header: string): string[][] {
  const start = DOC.indexOf(`\n${heading}\n`);
  expect(start, heading).to.be.greaterThan(0);
  // To the next heading of the same level (the one after it, for a "###" heading within a "##" section).
  const end = DOC.indexOf(`\n${"#".repeat(heading.indexOf(" "))} `, start + 1);
  const section = DOC.slice(start + 1, end < 0 ? undefined : end);
  const lines = section.split("\n");
  const at = lines.findIndex((line) => line.startsWith(header));
  expect(at, header).to.be.greaterThan(0);
  const rows: string[][] = [];
  for (const line of lines.slice(at + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(line.slice(1, -1).split(" | ").map((cell) => cell.trim()));
  }
  return rows;
}

const sees = () => tableRows(FAILURE_TABLE_HEADING, "| to test how your seller/buyer handles | do | the buyer sees |");
const anyLanguage = () => tableRows("### The same rows from any language", "| to test how your seller/buyer handles | over HTTP | from the shell |");

/** The document's placeholders, given values of the right shape. */
const PLACEHOLDERS: Record<string, string> = {
  $BUYER_ADDRESS: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
  $PAY_TO: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
  $OTHER_ADDRESS: "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
  $PAYMENT: "eyJ4NDAyVmVyc2lvbiI6MX0=",
  $402: "HTTP/1.1 402 Payment Required",
  $URL: "http://127.0.0.1:4021/weather",
};
const filled = (text: string) => text.replace(/\$[A-Z_0-9]+/g, (name) => PLACEHOLDERS[name] ?? name);

/** What a row asks of the harness and of the signer, in order. */
type Action = { fault: Record<string, unknown> } | { sign: Record<string, unknown> } | { advance: number } | "restart" | "resume-blocks";

/** The signing a request asks for, in the names the endpoint takes (what it changes; the 402 itself aside). */
function signing(fields: Record<string, unknown>): { sign: Record<string, unknown> } {
  const names = ["network", "payTo", "amount", "asset", "domainVersion", "validAfter", "validBefore"] as const;
  return { sign: Object.fromEntries(names.filter((name) => fields[name] !== undefined).map((name) => [name, String(fields[name])])) };
}

/** The actions of an "over HTTP" cell: its `POST /path {json}` spans, each read by the endpoint's schema. */
function httpActions(cell: string): Action[] {
  const actions: Action[] = [];
  for (const [, span] of cell.matchAll(/`([^`]+)`/g)) {
    const request = /^POST (\/[a-z/-]+)(?: (\{.*\}))?$/.exec(span!);
    if (!request) continue;
    const body = request[2] === undefined ? {} : (JSON.parse(filled(request[2])) as Record<string, unknown>);
    switch (request[1]) {
      case "/faults": {
        const parsed = parseFaultSpec(body);
        expect(parsed.ok, `${span}: ${(parsed as { problem?: string }).problem}`).to.equal(true);
        actions.push({ fault: body });
        break;
      }
      case "/sign": {
        const parsed = signRequestSchema.safeParse(body);
        expect(parsed.success, `${span}: ${parsed.error?.message}`).to.equal(true);
        expect(body.paymentRequired, span).to.equal(PLACEHOLDERS.$402);
        actions.push(signing(body));
        break;
      }
      case "/time/advance":
        actions.push({ advance: advanceSchema.parse(body).seconds });
        break;
      case "/facilitator/restart":
        actions.push("restart");
        break;
      case "/time/resume-blocks":
        actions.push("resume-blocks");
        break;
      default:
        expect.fail(`${span}: not a control of the endpoint`);
    }
  }
  return actions;
}

/** A command line's words, its quotes removed (the document quotes only whole words). */
const words = (line: string) => (line.match(/'[^']*'|"[^"]*"|\S+/g) ?? []).map((word) => word.replace(/^(["'])(.*)\1$/, "$2"));

/** The actions of a "from the shell" cell: its `cronos-x402 …` spans, each read by the CLI's own parser. */
function cliActions(cell: string): Action[] {
  const actions: Action[] = [];
  for (const [, span] of cell.matchAll(/`(cronos-x402 [^`]+)`/g)) {
    const [, command, ...rest] = words(filled(span!));
    if (command === "fault" || command === "time") {
      const { positionals, values } = parseFaultArgs(rest);
      const [what, ...more] = positionals;
      if (command === "fault" && what === "restart-facilitator") actions.push("restart");
      else if (command === "time" && what === "resume-blocks") actions.push("resume-blocks");
      else if (command === "time" && what === "advance") actions.push({ advance: Number(more[0]) });
      else if (command === "fault") {
        const spec = faultSpecOf(what!, values) as Record<string, unknown>;
        expect(parseFaultSpec(spec).ok, span).to.equal(true);
        actions.push({ fault: spec });
      } else expect.fail(`${span}: not a command this table uses`);
    } else if (command === "pay" || command === "sign") {
      const { positionals, values } = parsePaymentArgs(rest, command === "pay" ? { "max-amount": { type: "string" } } : { "from-402": { type: "string" } });
      expect(positionals, span).to.deep.equal(command === "pay" ? [PLACEHOLDERS.$URL] : []);
      if (command === "sign") expect((values as { "from-402"?: string })["from-402"], span).to.equal("402.txt");
      actions.push(
        signing({
          network: values.network,
          payTo: values["pay-to"],
          amount: values.amount,
          asset: values.asset,
          domainVersion: values["domain-version"],
          validAfter: values["valid-after"],
          validBefore: values["valid-before"],
        }),
      );
    } else expect.fail(`${span}: not a command this table uses`);
  }
  return actions;
}

describe("docs/failures.md: every failure on demand, one row per test of test/e2e/failures.test.ts", () => {
  it("names the rows the test runs, in its order, in both tables", () => {
    const rows = Object.values(FAILURE_ROWS).map((row) => row.what);
    expect(sees().map((cells) => cells[0])).to.deep.equal(rows);
    expect(anyLanguage().map((cells) => cells[0])).to.deep.equal(rows);
  });

  for (const [key, row] of Object.entries(FAILURE_ROWS)) {
    it(`says what the buyer sees for ${key}: the status${"error" in row ? ", the error" : ""}${"reason" in row ? ", the reason" : ""}${"retryAfter" in row ? ", Retry-After" : ""} the test asserts`, () => {
      const cells = sees().find((cells) => cells[0] === row.what);
      expect(cells, row.what).to.have.length(3);
      const seen = cells![2]!;
      expect(seen.startsWith(String(row.status)), seen).to.equal(true);
      if ("error" in row) expect(seen).to.contain(`\`${row.error}\``);
      if ("reason" in row) expect(seen).to.contain(`reason \`${row.reason}\``);
      if ("retryAfter" in row && row.retryAfter === "2") expect(seen).to.contain("`Retry-After: 2`");
      if ("retryAfter" in row && row.retryAfter === "busy") expect(seen).to.contain("`Retry-After`");
    });
  }

  it("each row over HTTP and from the shell: bodies the control endpoint takes, command lines the CLI takes, asking the same of the harness and the signer", () => {
    for (const [what, http, shell] of anyLanguage()) {
      expect(http, what).to.be.a("string").and.not.equal("");
      expect(shell, what).to.be.a("string").and.not.equal("");
      const overHttp = httpActions(http!);
      const fromShell = cliActions(shell!);
      expect(overHttp, what).to.deep.equal(fromShell);
    }
    // The table asks for something in most rows: faults, changed payments, time, restarts.
    const asking = anyLanguage().filter(([, http]) => httpActions(http!).length > 0);
    expect(asking.length).to.be.at.least(Object.keys(FAILURE_ROWS).length - 3);
  });
});
