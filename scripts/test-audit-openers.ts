// The opener rule of the tests' honesty audit (scripts/test-audit.ts): what a test opens, a teardown closes.
// Reads blanked text (comments and the insides of strings blanked, same lines); runs nothing.

export interface Finding {
  file: string;
  line: number;
  text: string;
}

/**
 * Calls that open something that must be closed: the kit's own (src/) and Node's. A helper of test/helpers
 * that calls one registers its close with `closeAfter`, and a test calls the helper instead.
 */
export const OPENERS = [
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
export function countOpeners(file: string, code: string, lines: string[], raw: string[], unclosed: Finding[], at: (index: number) => Finding, openers: Set<string>): void {
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
