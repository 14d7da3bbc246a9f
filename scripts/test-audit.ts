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

/** A `{ … }` block: where it opens and closes (offsets in the blanked text) and the text before it. */
interface Block {
  start: number;
  end: number;
  head: string;
}

function blocksOf(code: string): Block[] {
  const blocks: Block[] = [];
  const open: number[] = [];
  for (let i = 0; i < code.length; i++) {
    if (code[i] === "{") open.push(i);
    else if (code[i] === "}") {
      const start = open.pop();
      if (start !== undefined) blocks.push({ start, end: i, head: code.slice(Math.max(start - 240, 0), start).replace(/\s+/g, " ").trimEnd() });
    }
  }
  return blocks.sort((a, b) => a.start - b.start);
}

const CONTROL_HEAD = /\b(if|for|while|switch|catch|with)\s*\([^]*\)$|\b(else|try|finally|do)$/;
const FUNCTION_HEAD = /(=>|\)(\s*:\s*[^(){};=]+)?)$/;
/** A block opened by a teardown: a `finally`, an `after`/`afterEach` hook, a close handed to closeAfter. */
const TEARDOWN_HEAD = /\bfinally$|\b(after|afterEach)\s*\([^()]*(\([^()]*\))?[^()]*=>$|\b(after|afterEach)\s*\((async\s+)?function\s*\([^()]*\)$|\bcloseAfter\s*\([^;]*=>$/;
const CLOSE_VERB = "(close|stop|end|destroy|kill|terminate|dispose|shutdown|release|closeAllConnections)";
/** An opening expected to fail leaves nothing open. */
const EXPECTED_TO_FAIL = /\brejection\s*\(|\bthrown\s*\(|rejectedWith|\.then\(\s*$|expect\.fail|\.catch\(/;

/**
 * Each call to an opener must be closed by a teardown: its line hands it to closeAfter; or the name it is
 * given is closed in a teardown block (or one line hook), handed to closeAfter, or put in a collection
 * that a teardown closes; or the function that opens it both closes it and calls closeAfter (a helper
 * registering its close); or that function returns it (it is then an opener itself, checked where called).
 */
function countOpeners(file: string, code: string, lines: string[], raw: string[], unclosed: Finding[], at: (index: number) => Finding, openers: Set<string>): void {
  const blocks = blocksOf(code);
  const lineStarts = [0];
  for (let i = 0; i < code.length; i++) if (code[i] === "\n") lineStarts.push(i + 1);
  const lineOf = (offset: number) => {
    let lo = 0;
    let hi = lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (lineStarts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  };
  const around = (offset: number) => blocks.filter((block) => block.start < offset && offset < block.end);
  const inTeardown = (index: number) =>
    /\bcloseAfter\s*\(|\b(after|afterEach)\s*\(/.test(lines[index]!) || around(lineStarts[index]!).some((block) => TEARDOWN_HEAD.test(block.head));
  const functionAround = (offset: number) =>
    around(offset)
      .reverse()
      .find((block) => FUNCTION_HEAD.test(block.head) && !CONTROL_HEAD.test(block.head));
  /** The name of the function whose block is `block`: `function name(`, `name(…) {`, `const name = (…) =>`. */
  const nameOf = (block: Block | undefined, line: string): string | undefined => {
    const arrow = /(?:const|let)\s+(\w+)\s*(?::[^=]+)?=\s*(?:async\s*)?(?:\([^)]*\)|\w+)\s*(?::[^=]+)?=>/.exec(line);
    if (arrow && !block) return arrow[1];
    if (!block) return arrow?.[1];
    const head = block.head;
    return (
      /function\s*\*?\s*(\w+)\s*(?:<[^>]*>)?\s*\([^]*$/.exec(head)?.[1] ??
      /(?:const|let)\s+(\w+)\s*(?::[^=]+)?=\s*(?:async\s*)?(?:\([^]*\)|\w+)\s*(?::[^=]+)?=>$/.exec(head)?.[1] ??
      /(?:^|[\s,{])(?:async\s+)?(\w+)\s*\([^()]*(?:\([^()]*\)[^()]*)*\)(?:\s*:\s*[^(){};=]+)?$/.exec(head)?.[1]
    );
  };
  const collectionClosed = (collection: string) => {
    const emptied = new RegExp(`\\b${collection}\\b`);
    return lines.some((other, j) => emptied.test(other) && inTeardown(j) && new RegExp(`\\.${CLOSE_VERB}\\b|\\b${CLOSE_VERB}\\w*\\(`).test(lines.slice(j, j + 3).join(" ")));
  };
  const closes = (name: string, index: number): boolean => {
    // Awaited to fail (a refused connection): nothing is left open.
    if (new RegExp(`\\bonce\\(\\s*${name}\\s*,\\s*"error"`).test(raw.slice(index, index + 3).join(" "))) return true;
    const closing = new RegExp(`\\b${name}\\b[^;\\n]*\\??\\.${CLOSE_VERB}\\b|\\bcloseAfter\\s*\\([^;]*\\b${name}\\b|\\b${CLOSE_VERB}\\w*\\s*\\([^;)]*\\b${name}\\b`);
    // (A line binding a name of its own, `(chain) => chain.stop()`, closes its own, not this one.)
    const binds = new RegExp(`\\(\\s*${name}\\s*(?::[^)]*)?\\)\\s*=>|\\b${name}\\s*=>|\\b(?:const|let)\\s+${name}\\s+of\\b`);
    if (lines.some((other, j) => closing.test(other) && !binds.test(other) && inTeardown(j))) return true;
    // Put in a collection a teardown closes.
    for (const match of code.matchAll(new RegExp(`\\b(\\w+)\\.(?:push|add|set|unshift)\\([^;]*\\b${name}\\b`, "g"))) {
      if (collectionClosed(match[1]!)) return true;
    }
    // A helper registering its close: the function that opens it closes it and calls closeAfter.
    const fn = functionAround(lineStarts[index]!);
    if (fn) {
      const body = code.slice(fn.start, fn.end);
      if (/\bcloseAfter\s*\(/.test(body) && new RegExp(`\\b${name}\\b[^;\\n]*\\.${CLOSE_VERB}\\b`).test(body)) return true;
    }
    return false;
  };
  /** Whether line `index` returns what it opens (or the name it gave it): its function is then an opener. */
  const handedOn = (index: number, names: string[]): boolean => {
    const line = lines[index]!;
    const fn = functionAround(lineStarts[index]! + line.search(/\S|$/));
    const direct = /\breturn\b|=>\s*\(?\s*(?:\w+\s*\?\?=\s*|\w+\s*=\s*)?(?:await\s+)?[\w.]+\s*(?:<[^>]*>)?\(/.test(line);
    const body = fn ? code.slice(fn.start, fn.end) : "";
    const returned = names.some((name) => new RegExp(`\\breturn\\b[^;]*\\b${name}\\b`).test(body));
    if (!direct && !returned) return false;
    const name = nameOf(direct && !/\breturn\b/.test(line) && /=>/.test(line) ? undefined : fn, line) ?? nameOf(fn, line);
    if (!name || openers.has(name)) return name !== undefined;
    openers.add(name);
    return true;
  };

  // Functions of this file that register a close with closeAfter: what is handed to one is closed.
  const closers = new Set<string>();
  for (const block of blocks) {
    if (!FUNCTION_HEAD.test(block.head) || CONTROL_HEAD.test(block.head)) continue;
    if (!/\bcloseAfter\s*\(/.test(code.slice(block.start, block.end))) continue;
    const name = nameOf(block, "");
    if (name) closers.add(name);
  }
  const handedToCloser = (line: string, opener: string) =>
    [...closers].some((closer) => new RegExp(`\\b${closer}\\s*\\(\\s*(?:await\\s+)?${opener.replace(/\./g, "\\.")}\\s*\\(`).test(line));

  for (let pass = 0; pass < 3; pass++) {
    const found: Finding[] = [];
    const before = openers.size;
    lines.forEach((line, index) => {
      for (const opener of openers) {
        const pattern = new RegExp(`(?:^|[^\\w])${opener.replace(/\./g, "\\.")}\\s*(?:<[^>]*>)?\\(`);
        if (!pattern.test(line)) continue;
        // Its definition (a function, a method, a method's type) is no call.
        if (new RegExp(`(?:function\\s*|(?:const|let)\\s+)${opener}\\b`).test(line)) continue;
        if (new RegExp(`(?:^|[{,;]\\s*)(?:async\\s+)?${opener}\\s*\\([^()]*\\)\\s*(?::\\s*[^{;=]+)?[{;}]\\s*$`).test(line.trim())) continue;
        if (new RegExp(`\\b${opener}\\s*\\(\\s*\\w+\\s*:\\s*[\\w<>[\\]. ]+[,)]`).test(line)) continue;
        if (EXPECTED_TO_FAIL.test(line) || EXPECTED_TO_FAIL.test(`${line} ${lines[index + 1] ?? ""}`)) continue;
        if (/\bcloseAfter\s*\(/.test(line) || /\b(after|afterEach)\s*\(/.test(line) || handedToCloser(line, opener)) continue;
        // Put straight into a collection a teardown closes.
        const prefix = line.slice(0, line.search(pattern) + 1);
        const into = /\b(\w+)\.(?:push|add|unshift)\(\s*(?:await\s+)?.?$/.exec(prefix);
        if (into && collectionClosed(into[1]!)) continue;
        // The name it is given: the assignment right before the call, else the line's first.
        const target =
          /(?:\[([^\]]+)\]|\b(\w+))\s*(?::\s*[\w<>[\]|. ]+)?\s*(?:\?\?|\|\|)?=\s*(?:await\s+)?\(?\s*.?$/.exec(prefix) ??
          /(?:const|let|var)\s+(\w+)\s*(?::[^=]+)?=|^\s*(?:this\.)?(\w+)\s*(?:\?\?)?=(?!=)|^\s*\[([^\]]+)\]\s*=|(?:const|let)\s*\[([^\]]+)\]\s*=/.exec(line);
        const names = (target?.slice(1).find((group) => group !== undefined) ?? "")
          .split(",")
          .map((name) => name.trim().replace(/:.*$/, ""))
          .filter((name) => /^\w+$/.test(name));
        if (names.some((name) => closes(name, index))) continue;
        if (handedOn(index, names)) continue;
        found.push(at(index));
      }
    });
    if (openers.size === before || pass === 2) {
      unclosed.push(...found);
      return;
    }
  }
  void file;
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
