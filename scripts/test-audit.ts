// The tests' honesty audit (issue 44): counts, over test/, what the house rules forbid in a test.
// - timed assertions: an `expect` on a duration (a difference of clock reads, a variable holding one, a
//   measured `durationMs`/`elapsed`/`took` compared with a bound) or a throughput threshold. Speed
//   belongs to bench/.
// - sleeps used as synchronisation: an awaited pause (`new Promise` resolved by `setTimeout`, `sleep`,
//   `delay`, timers/promises' `setTimeout`, `scheduler.wait`) outside test/helpers/wait.ts, the one place
//   that pauses, between two polls of a condition. A fault's own delay (a stand-in that answers late on
//   purpose) is allowed only when listed in ALLOWED with its reason.
// - things opened and not closed by a teardown: a call to one of the openers below (a chain, a stack, a
//   cluster, a process, a ledger, a database, a server, a socket) whose result is not closed by
//   `closeAfter` (test/helpers/teardown.ts), an `after`/`afterEach` hook or a `finally` block. The test
//   helpers that wrap them (openChain, openFacilitator, startTestStack, …) register their own teardown.
// The audit reads the text (it runs no test): its rules are deliberately simple, and a finding names
// its file and line. `node --import tsx scripts/test-audit.ts` prints the findings; the test
// test/conformance/test-audit.test.ts fails when any count is above 0.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

export interface Finding {
  file: string;
  line: number;
  text: string;
}

export interface Audit {
  files: number;
  timedAssertions: Finding[];
  sleeps: Finding[];
  unclosed: Finding[];
  /** Allow-list entries that matched nothing (stale: remove them). */
  staleAllowances: string[];
}

/** A site the audit accepts: a fault's own delay (made, or shown where it must show), never a wait for something. */
export interface Allowed {
  kind: "sleep" | "timed";
  file: string;
  /** A fragment of the line. */
  fragment: string;
  reason: string;
}

export const ALLOWED: readonly Allowed[] = [
  {
    kind: "timed",
    file: "test/facilitator/traces.test.ts",
    fragment: "expect(durationMs(sends[0]!)).to.be.at.least(400)",
    reason: "the harness's 400 ms `delay` fault shows in its call's span: a lower bound equal to the fault's own delay (load only lengthens the span)",
  },
  {
    file: "test/helpers/rpc-proxy.ts",
    fragment: "setTimeout(resolve, proxy.delayMs)",
    kind: "sleep",
    reason: "the RPC fault proxy's `delay` fault: it answers late on purpose (a slow node); nothing waits on it",
  },
  {
    file: "test/helpers/teardown.ts",
    fragment: "setTimeout(resolve, 50).unref()",
    kind: "sleep",
    reason: "the end-of-run report gives sockets being closed up to 2 s before counting them; what is left is reported, not waited for",
  },
];

/**
 * Calls that open something that must be closed: the kit's own (src/) and Node's. A helper of test/helpers
 * that calls one registers its close with `closeAfter`, and a test calls the helper instead.
 */
const OPENERS = [
  "startLocalChain",
  "startLocalStack",
  "startCluster",
  "startFacilitatorProcess",
  "startTestPostgres",
  "openSqliteLedger",
  "openPostgresLedger",
  "openLedger",
  "startFacilitator",
  "createFacilitator",
  "serveJsonRpc",
  "serveHarness",
  "createListener",
  "startTracing",
  "createServer",
  "hre.network.create",
  "hre.network.connect",
  "new WebSocket",
  "new DatabaseSync",
  "new pg.Client",
  "new pg.Pool",
  "spawn",
];

const TIME_READ = /\bDate\.now\(\)|\bperformance\.now\(\)|\bprocess\.hrtime\b|\bhrtime\.bigint\(\)/;
const COMPARATOR = /\.(within|below|above|lessThan|greaterThan|lt|gt|lte|gte|least|most|closeTo|approximately)\(/;
const MEASURED = /\b(elapsed\w*|durationMs|took\w*|wall\w*|\w*[pP]erSecond\w*|throughput\w*|rps)\b/;

/** The text with comments and the insides of string literals blanked (same length, same lines). */
export function blanked(source: string): string {
  let out = "";
  let i = 0;
  const templates: number[] = [];
  let depth = 0;
  while (i < source.length) {
    const c = source[i]!;
    const next = source[i + 1];
    if (c === "/" && next === "/") {
      while (i < source.length && source[i] !== "\n") (out += " "), i++;
    } else if (c === "/" && next === "*") {
      while (i < source.length && !(source[i] === "*" && source[i + 1] === "/")) (out += source[i] === "\n" ? "\n" : " "), i++;
      out += "  ";
      i += 2;
    } else if (c === '"' || c === "'") {
      out += c;
      i++;
      while (i < source.length && source[i] !== c && source[i] !== "\n") {
        if (source[i] === "\\") (out += " "), i++;
        out += " ";
        i++;
      }
      out += source[i] ?? "";
      i++;
    } else if (c === "`" || (c === "}" && templates.length > 0 && templates.at(-1) === depth)) {
      if (c === "}") templates.pop();
      out += c;
      i++;
      while (i < source.length && source[i] !== "`" && !(source[i] === "$" && source[i + 1] === "{")) {
        if (source[i] === "\\") (out += " "), i++;
        out += source[i] === "\n" ? "\n" : " ";
        i++;
      }
      if (source[i] === "$") {
        out += "${";
        i += 2;
        templates.push(depth);
      } else {
        out += source[i] ?? "";
        i++;
      }
    } else {
      if (c === "{") depth++;
      if (c === "}") depth--;
      out += c;
      i++;
    }
  }
  return out;
}

/** For each line, the heads of the blocks open at its start (the text before each unclosed `{`). */
function enclosingHeads(code: string): string[][] {
  const heads: string[][] = [];
  const stack: string[] = [];
  let lineStart = 0;
  heads.push([]);
  for (let i = 0; i < code.length; i++) {
    const c = code[i]!;
    if (c === "{") stack.push(code.slice(Math.max(lineStart - 200, 0), i).replace(/\s+/g, " ").slice(-120));
    else if (c === "}") stack.pop();
    else if (c === "\n") {
      lineStart = i + 1;
      heads.push([...stack]);
    }
  }
  return heads;
}

const TEARDOWN_HEAD = /\bfinally\s*$|\b(after|afterEach)\s*\([^]*$|\bcloseAfter\s*\([^]*$/;

function testFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true })
    .map(String)
    .filter((name) => name.endsWith(".ts"))
    .sort()
    .map((name) => join(dir, name));
}

function audited(file: string, text: string, audit: Audit, allowUsed: Set<Allowed>): void {
  const code = blanked(text);
  const lines = code.split("\n");
  const raw = text.split("\n");
  const at = (index: number): Finding => ({ file, line: index + 1, text: raw[index]!.trim().slice(0, 200) });

  // Variables that hold a clock read, and those that hold a difference of clock reads.
  const clocks = new Set<string>();
  const durations = new Set<string>();
  for (const line of lines) {
    const assigned = /\b(?:const|let|var)\s+(\w+)\s*=\s*(.*)$|^\s*(\w+)\s*=\s*(.*)$/.exec(line);
    if (!assigned) continue;
    const name = assigned[1] ?? assigned[3]!;
    const value = assigned[2] ?? assigned[4]!;
    if (isDifference(value, clocks)) durations.add(name);
    else if (TIME_READ.test(value)) clocks.add(name);
  }

  // Timed assertions: an expect's line (an expect may span a few lines: up to its first `;`).
  lines.forEach((line, index) => {
    if (!/\bexpect\s*\(|\bassert\.\w+\(/.test(line)) return;
    let statement = line;
    for (let j = index + 1; j < lines.length && !/;\s*$/.test(statement) && j < index + 6; j++) statement += lines[j];
    const subject = statement.slice(statement.search(/\bexpect\s*\(|\bassert\./));
    const timed =
      isDifference(subject, clocks) ||
      [...durations].some((name) => new RegExp(`\\b${name}\\b`).test(subject)) ||
      (COMPARATOR.test(subject) && MEASURED.test(subject.slice(0, subject.search(COMPARATOR))));
    if (!timed) return;
    const allowed = ALLOWED.find((entry) => entry.kind === "timed" && file.endsWith(entry.file) && raw[index]!.includes(entry.fragment));
    if (allowed) allowUsed.add(allowed);
    else audit.timedAssertions.push(at(index));
  });

  // Sleeps: an awaited pause.
  const sleepers = new Set(["sleep", "delay", "pause", "wait", "setTimeoutPromise"]);
  if (file.endsWith("test/helpers/wait.ts")) return countOpeners();
  const timersPromises = /import\s*\{([^}]*)\}\s*from\s*["']node:timers\/promises["']/.exec(text);
  for (const part of timersPromises?.[1]?.split(",") ?? []) {
    const [imported, local] = part.split(/\s+as\s+/).map((s) => s.trim());
    if (imported === "setTimeout" || imported === "scheduler") sleepers.add(local ?? imported);
  }
  // Functions of this file that pause: `const name = (…) => new Promise(… setTimeout(resolve …`.
  for (const match of text.matchAll(/(?:const|function)\s+(\w+)\s*(?:=\s*(?:async\s*)?\([^)]*\)\s*(?::[^=]*)?=>|\([^)]*\)[^{]*\{)\s*(?:return\s+)?new Promise/g)) {
    const after = text.slice(match.index, match.index + 200);
    if (/setTimeout\(\s*(resolve|r|done)\b|setTimeout\(\s*\(\)\s*=>\s*(resolve|r|done)\(\)/.test(after)) sleepers.add(match[1]!);
  }
  lines.forEach((line, index) => {
    const pausePromise = /\bnew Promise\b.*\bsetTimeout\(\s*(?:resolve|r|done)\b|\bnew Promise\b.*\bsetTimeout\(\s*\(\)\s*=>\s*(?:resolve|r|done)\(\)/.test(raw[index]!) && /\bawait\b|\breturn\b|=>\s*new Promise/.test(line);
    const namedPause = [...sleepers].some((name) => new RegExp(`\\bawait\\s+(?:\\w+\\.)?${name}\\s*\\(|\\bscheduler\\.wait\\s*\\(`).test(line));
    if (!pausePromise && !namedPause) return;
    // A definition of a pause is not a sleep: its awaited uses are.
    if (/(?:const|function)\s+\w+\s*(?:=|\()/.test(line) && !/\bawait\b/.test(line)) return;
    const allowed = ALLOWED.find((entry) => entry.kind === "sleep" && file.endsWith(entry.file) && raw[index]!.includes(entry.fragment));
    if (allowed) allowUsed.add(allowed);
    else audit.sleeps.push(at(index));
  });
  countOpeners();

  function countOpeners(): void {
    if (/\/test\/helpers\//.test(file)) {
      // A helper opens only to hand its close to closeAfter (or to the caller that does).
      if (!/\bcloseAfter\s*\(/.test(code)) return checkOpeners(true);
      return checkOpeners(false, true);
    }
    checkOpeners();
  }

  function checkOpeners(strict = false, helper = false): void {
    const heads = enclosingHeads(code);
    lines.forEach((line, index) => {
      for (const opener of OPENERS) {
        const pattern = new RegExp(`(?:^|[^.\\w])${opener.replace(/\./g, "\\.")}\\s*(?:<[^>]*>)?\\(`);
        if (!pattern.test(line)) continue;
        // An opening expected to fail leaves nothing open.
        if (/\brejection\s*\(|\bthrown\s*\(|rejectedWith|\.then\(\s*$|\.then\(\s*\(\)\s*=>\s*expect\.fail|expect\.fail|\.catch\(/.test(line + (lines[index + 1] ?? ""))) continue;
        if (isClosed(index, heads, helper && !strict)) continue;
        audit.unclosed.push(at(index));
      }
    });
  }

  /** Whether what line `index` opens is closed by a teardown: closeAfter, an after/afterEach hook or a finally. */
  function isClosed(index: number, heads: string[][], helper: boolean): boolean {
    const line = lines[index]!;
    if (/\bcloseAfter\s*\(/.test(line) || /\b(after|afterEach)\s*\(/.test(line)) return true;
    const target = /(?:const|let|var)\s+(\w+)\s*(?::[^=]+)?=|^\s*(\w+)\s*=(?!=)|^\s*\[([^\]]+)\]\s*=|(?:const|let)\s*\[([^\]]+)\]\s*=|^\s*(\w+)\s*\?\?=/.exec(line);
    const names = (target?.slice(1).find((group) => group !== undefined) ?? "")
      .split(",")
      .map((name) => name.trim().replace(/:.*$/, ""))
      .filter((name) => /^\w+$/.test(name));
    if (names.length === 0) {
      // Returned by a helper (its caller closes it) or handed on directly.
      if (helper && /\breturn\b/.test(line)) return true;
      // `const x = (await opener(…))` over several lines: look back for the assignment.
      return false;
    }
    if (helper && names.some((name) => new RegExp(`\\breturn\\b[^;]*\\b${name}\\b`).test(code))) return true;
    return names.some((name) => {
      const closing = new RegExp(`\\b${name}\\b[^;\\n]*\\??\\.(close|stop|end|destroy|kill|terminate|dispose|shutdown|release)\\s*\\(|\\bcloseAfter\\s*\\([^;]*\\b${name}\\b|\\b(close|stop|stopAll)\\w*\\s*\\([^;)]*\\b${name}\\b`);
      return lines.some((other, j) => {
        if (!closing.test(other)) return false;
        if (/\bcloseAfter\s*\(|\b(after|afterEach)\s*\(/.test(other)) return true;
        return (heads[j] ?? []).some((head) => TEARDOWN_HEAD.test(head));
      });
    });
  }
}

/** Whether `expression` subtracts one clock read from another (a duration), e.g. `Date.now() - started`. */
function isDifference(expression: string, clocks: Set<string>): boolean {
  const reads = [TIME_READ.source, ...[...clocks].map((name) => `\\b${name}\\b`)].join("|");
  return new RegExp(`(${reads})[\\s)]*-\\s*\\(?\\s*(${reads})`).test(expression);
}

/** Audits every .ts file under `testDir` (paths in the findings relative to `root`). */
export function auditTests(root: string, testDir = join(root, "test")): Audit {
  const audit: Audit = { files: 0, timedAssertions: [], sleeps: [], unclosed: [], staleAllowances: [] };
  const allowUsed = new Set<Allowed>();
  for (const path of testFiles(testDir)) {
    audit.files++;
    audited(relative(root, path), readFileSync(path, "utf8"), audit, allowUsed);
  }
  audit.staleAllowances = ALLOWED.filter((entry) => !allowUsed.has(entry)).map((entry) => `${entry.file}: ${entry.fragment}`);
  return audit;
}

/** The findings as lines, for a failure message or the console. */
export function describeAudit(audit: Audit): string {
  const section = (title: string, findings: Finding[]) => [`${title}: ${findings.length}`, ...findings.map((f) => `  ${f.file}:${f.line}  ${f.text}`)];
  return [
    `test files audited: ${audit.files}`,
    ...section("timed assertions", audit.timedAssertions),
    ...section("sleeps used as synchronisation", audit.sleeps),
    ...section("opened and not closed by a teardown", audit.unclosed),
    `stale allow-list entries: ${audit.staleAllowances.length}`,
    ...audit.staleAllowances.map((entry) => `  ${entry}`),
  ].join("\n");
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const audit = auditTests(join(dirname(fileURLToPath(import.meta.url)), ".."));
  process.stdout.write(`${describeAudit(audit)}\n`);
  process.exitCode = audit.timedAssertions.length + audit.sleeps.length + audit.unclosed.length + audit.staleAllowances.length > 0 ? 1 : 0;
}
