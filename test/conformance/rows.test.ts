import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { expect } from "chai";

// docs/conformance.md claims, row by row, which test proves what. This holds every claim to the tests: each
// test file a row names exists, and each title it quotes (`file` › title, where … stands for words left out)
// is the start, end or middle of a `describe` or `it` title in that file. A row that paraphrases a test, or
// names one that is gone, fails here.

const ROOT = join(import.meta.dirname, "..", "..");
const TEST_DIR = join(ROOT, "test");

/** Every test file under test/, by its path below test/ (`facilitator/faults.test.ts`). */
function testFiles(): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".test.ts")) files.set(relative(TEST_DIR, path).split("\\").join("/"), path);
    }
  };
  walk(TEST_DIR);
  return files;
}

const ANY = "\u0000";

/**
 * The `describe` and `it` titles of a test file, and those given to a wrapper of `it` the file defines
 * (`const faultCase = (title: string, …) => it(title, …)`); a title's `${…}` part stands as {@link ANY} (it matches any words).
 */
function titlesOf(source: string): string[] {
  const titles: string[] = [];
  const wrappers = [...source.matchAll(/\bconst (\w+) = \((\w+)\b[^\n]{0,200}?=>\s*it\(\s*\2\b/g)].map((match) => match[1]!);
  const callee = ["describe", "it", ...wrappers].join("|");
  const calls = new RegExp(`\\b(?:${callee})(?:\\.skip|\\.only)?\\(\\s*("(?:[^"\\\\]|\\\\.)*"|\`(?:[^\`\\\\]|\\\\.)*\`|'(?:[^'\\\\]|\\\\.)*')`, "g");
  for (const match of source.matchAll(calls)) {
    const literal = match[1]!;
    const text = literal.slice(1, -1);
    titles.push((literal.startsWith("`") ? text.replace(/\$\{[^}]*\}/g, ANY) : text).replace(/\\(.)/g, "$1"));
  }
  return titles;
}

/**
 * Whether `piece` stands somewhere in `title`, a title's {@link ANY} matching any words: the piece is read
 * through the title from any place, a literal character matching itself, an {@link ANY} taking any number.
 */
function standsIn(piece: string, title: string): boolean {
  const close = (states: Set<number>) => {
    for (const state of [...states]) for (let k = state; k < title.length && title[k] === ANY; k++) states.add(k + 1);
    return states;
  };
  let states = close(new Set(Array.from({ length: title.length + 1 }, (_, k) => k)));
  for (const char of piece) {
    const next = new Set<number>();
    for (const state of states) {
      if (state >= title.length) continue;
      if (title[state] === ANY) next.add(state);
      else if (title[state] === char) next.add(state + 1);
    }
    states = close(next);
    if (states.size === 0) return false;
  }
  return true;
}

/** Whether a quote (its pieces, split at …) is one title: each piece in it, in order. */
function quotes(title: string, pieces: string[]): boolean {
  let rest = title;
  for (const piece of pieces) {
    if (!standsIn(piece, rest)) return false;
    // The next piece comes after this one: search on from the first place it ends (literal pieces only narrow).
    const at = rest.indexOf(piece);
    if (at >= 0) rest = rest.slice(at + piece.length);
  }
  return true;
}

/** One claim of a row: the test files it may be in (the one the row names, else those its section names), and the titles quoted (none: the whole file). */
interface Claim {
  line: number;
  files: string[];
  titles: string[];
}

const FILE = /`([\w./-]+\.test\.ts)`/g;

/**
 * The claims of the doc's tables, from "What the kit's tests prove" on: each row's last cell split at `;`, each part
 * a file (or the file named last before it in the section, or one the section's heading names) and the titles after `›`.
 */
function claimsOf(doc: string, files: Map<string, string>): { claims: Claim[]; unknownFiles: string[] } {
  const lines = doc.split("\n");
  const claims: Claim[] = [];
  const unknownFiles: string[] = [];
  const resolve = (name: string, line: number): string | undefined => {
    if (files.has(name)) return name;
    const matches = [...files.keys()].filter((path) => path.endsWith(`/${name}`));
    if (matches.length === 1) return matches[0];
    unknownFiles.push(`line ${line}: ${name}${matches.length > 1 ? ` (which of ${matches.join(", ")}?)` : ""}`);
    return undefined;
  };
  const named = (text: string, line: number) => [...text.matchAll(FILE)].map((match) => resolve(match[1]!, line)).filter((file): file is string => file !== undefined);
  let sectionFiles: string[] = [];
  // The file named last in the section: a part that names none quotes it (or one of the section's files).
  let lastFile: string | undefined;
  const start = lines.findIndex((line) => line.startsWith("## What the kit's tests prove"));
  for (let i = start; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith("#")) {
      sectionFiles = named(line, i + 1);
      lastFile = undefined;
      continue;
    }
    if (!line.startsWith("|")) {
      // A paragraph under the heading that names the section's files.
      if (line.trim().length > 0) sectionFiles = [...new Set([...sectionFiles, ...named(line, i + 1)])];
      continue;
    }
    if (!line.startsWith("| ") || /^\|[-| ]+\|$/.test(line)) continue;
    const cell = line.slice(1, -1).split("|").at(-1)!.trim();
    for (const part of cell.split(";")) {
      const files_ = named(part, i + 1);
      if (files_.length > 0) lastFile = files_[0];
      else {
        // A short name before the first ›: a test file's name without `.test.ts` (`relayer-attacks`), or its folder and name (`ledger contract`).
        const short = /^\s*([\w-]+(?: [\w-]+)?) ›/.exec(part.replace(/`/g, ""))?.[1];
        const found = short && shortName(short, files);
        if (found) lastFile = found;
      }
      const titles = part
        .split("›")
        .slice(1)
        .map((title) => title.replace(/\([^()]*\)\s*$/, "").replace(/`/g, "").trim())
        .filter((title) => title.length > 0);
      const candidates = [...new Set([...(lastFile ? [lastFile] : []), ...sectionFiles])];
      if (files_.length > 0 || titles.length > 0) claims.push({ line: i + 1, files: candidates, titles });
    }
  }
  return { claims, unknownFiles };
}

/** The test file a short name stands for: `relayer-attacks` (one file of that name), `ledger contract` (folder and name). */
function shortName(short: string, files: Map<string, string>): string | undefined {
  const [first, second] = short.split(" ");
  const wanted = second ? `${first}/${second}.test.ts` : `/${first}.test.ts`;
  const matches = [...files.keys()].filter((path) => (second ? path === wanted : path.endsWith(wanted) || path === wanted.slice(1)));
  return matches.length === 1 ? matches[0] : undefined;
}

describe("docs/conformance.md names tests that exist", () => {
  const files = testFiles();
  const doc = readFileSync(join(ROOT, "docs", "conformance.md"), "utf8");
  const { claims, unknownFiles } = claimsOf(doc, files);

  it("every test file a row names is a file under test/", () => {
    expect(unknownFiles).to.deep.equal([]);
    expect(claims.length).to.be.greaterThan(100);
  });

  it("every title a row quotes (`file` › title …) is a describe or it title of that file", () => {
    const titles = new Map<string, string[]>();
    const titlesIn = (file: string) => titles.get(file) ?? titles.set(file, titlesOf(readFileSync(files.get(file)!, "utf8"))).get(file)!;
    const missing: string[] = [];
    for (const claim of claims) {
      for (const title of claim.titles) {
        const pieces = title
          .split("…")
          .map((piece) => piece.trim())
          .filter((piece) => piece.length > 0);
        if (pieces.length === 0) continue;
        if (!claim.files.some((file) => titlesIn(file).some((candidate) => quotes(candidate, pieces)))) missing.push(`line ${claim.line}: ${claim.files.join(" | ") || "(no file)"} › ${title}`);
      }
    }
    expect(missing).to.deep.equal([]);
  });
});
