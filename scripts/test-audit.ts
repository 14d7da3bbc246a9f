// The tests' honesty audit (issue 44): counts, over test/, what the house rules forbid in a test.
// - timed assertions: an `expect` on a duration (a difference of clock reads, a variable holding one, a
//   measured `durationMs`/`elapsed`/`took` compared with a bound) or a throughput threshold. Speed
//   belongs to bench/.
// - sleeps used as synchronisation: an awaited pause (`new Promise` resolved by `setTimeout`, `sleep`,
//   `delay`, timers/promises' `setTimeout`, `scheduler.wait`) outside test/helpers/wait.ts, the one place
//   that pauses, between two polls of a condition.
// - things opened and not closed by a teardown: a call to an opener (a chain, a stack, a cluster, a
//   process, a ledger, a database, a server, a socket: OPENERS in scripts/test-audit-openers.ts) whose
//   result no `closeAfter` (test/helpers/teardown.ts), `after`/`afterEach` hook or `finally` block closes.
//   The test helpers that wrap them (openChain, openFacilitator, startTestChain, …) register their close.
// A fault's own delay (a stand-in that answers late on purpose, or an assertion that the delay shows where
// it must) is accepted only when listed in ALLOWED with its reason.
// The audit reads the text (it runs no test): its rules are deliberately simple, and a finding names its
// file and line. `node --import tsx scripts/test-audit.ts` prints the findings;
// test/conformance/test-audit.test.ts fails when any count is above 0.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { countOpeners, OPENERS, type Finding } from "./test-audit-openers.js";

export type { Finding };

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

function testFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true })
    .map(String)
    .filter((name) => name.endsWith(".ts"))
    .sort()
    .map((name) => join(dir, name));
}

function audited(file: string, text: string, audit: Audit, allowUsed: Set<Allowed>, openers: Set<string>): void {
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
  // An awaited `setTimeout(` is timers/promises' (the global one returns a handle, not a promise).
  const sleepers = new Set(["sleep", "delay", "pause", "wait", "setTimeoutPromise", "setTimeout"]);
  const timersPromises = /import\s*\{([^}]*)\}\s*from\s*["']node:timers\/promises["']/.exec(text);
  for (const part of timersPromises?.[1]?.split(",") ?? []) {
    const [imported, local] = part.split(/\s+as\s+/).map((s) => s.trim());
    if (imported === "setTimeout" || imported === "scheduler") sleepers.add(local ?? imported);
  }
  // Functions of this file that pause: `const name = (…) => new Promise(… setTimeout(resolve …`.
  for (const match of text.matchAll(/(?:const|function)\s+(\w+)\s*(?:=\s*(?:async\s*)?\([^)]*\)\s*(?::[^=]*)?=>|\([^)]*\)[^{]*\{)\s*(?:return\s+)?new Promise/g)) {
    const after = text.slice(match.index, match.index + 200);
    const resolver = /new Promise\b[^(]*\(\s*(?:async\s*)?\(?\s*(\w+)/.exec(after)?.[1];
    if (resolver && new RegExp(`setTimeout\\(\\s*(?:${resolver}\\b|\\(\\)\\s*=>\\s*(?:void\\s+)?${resolver}\\()`).test(after)) sleepers.add(match[1]!);
  }
  if (!file.endsWith("test/helpers/wait.ts")) lines.forEach((line, index) => {
    // `new Promise((resolve) => setTimeout(resolve, …))`, whatever the resolver is called.
    const resolver = /\bnew Promise\b[^(]*\(\s*(?:async\s*)?\(?\s*(\w+)/.exec(raw[index]!)?.[1];
    const pausePromise =
      resolver !== undefined &&
      new RegExp(`\\bsetTimeout\\(\\s*(?:${resolver}\\b|\\(\\)\\s*=>\\s*(?:void\\s+)?${resolver}\\()`).test(raw[index]!) &&
      /\bawait\b|\breturn\b|=>\s*new Promise/.test(line);
    const namedPause = [...sleepers].some((name) => new RegExp(`\\bawait\\s+(?:\\w+\\.)?${name}\\s*\\(|\\bscheduler\\.wait\\s*\\(`).test(line));
    if (!pausePromise && !namedPause) return;
    // A definition of a pause is not a sleep: its awaited uses are.
    if (/(?:const|function)\s+\w+\s*(?:=|\()/.test(line) && !/\bawait\b/.test(line)) return;
    const allowed = ALLOWED.find((entry) => entry.kind === "sleep" && file.endsWith(entry.file) && raw[index]!.includes(entry.fragment));
    if (allowed) allowUsed.add(allowed);
    else audit.sleeps.push(at(index));
  });
  countOpeners(file, code, lines, raw, audit.unclosed, at, openers);
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
  const files = testFiles(testDir).map((path) => ({ file: relative(root, path), text: readFileSync(path, "utf8") }));
  const isHelper = (file: string) => /(^|\/)test\/helpers\//.test(file);
  // The helpers' exported openers (a helper returning what it opened without closing it) are openers in every file.
  const openers = new Set(OPENERS);
  for (let round = 0; round < 2; round++) {
    for (const { file, text } of files.filter(({ file }) => isHelper(file))) {
      const local = new Set(openers);
      audited(file, text, { files: 0, timedAssertions: [], sleeps: [], unclosed: [], staleAllowances: [] }, new Set(), local);
      for (const name of local) if (new RegExp(`export\\s+(?:async\\s+)?(?:function\\s*\\*?\\s*|const\\s+)${name}\\b`).test(text)) openers.add(name);
    }
  }
  for (const { file, text } of files) {
    audit.files++;
    audited(file, text, audit, allowUsed, new Set(openers));
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
