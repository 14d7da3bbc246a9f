import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { blanked } from "../../scripts/test-audit.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// The rows of docs/conformance.md's tables and the tests they name: each row's last cell names test files
// (`dir/file.test.ts`, under test/; a bare `file.test.ts` in the section's folder) and, after `›`, a
// fragment of a test's title (`…` where words are left out). A `›` with no file of its own is in the
// files named before it in the table, or in one of the section's files (those its heading and its
// prose before the first table name). A stem names a file too (`gas-caps ›`, `ledger contract ›`).

/** A claim of one row: a file, and the fragments of titles it names in it. */
export interface RowClaim {
  line: number;
  row: string;
  /** Files the fragment may be in (the part's own, or the section's). */
  files: string[];
  /** The fragment after `›`, split at `…`; empty when the part names a file only. */
  pieces: string[];
  /** What the row names that does not exist: a file, or a fragment found in none of `files`. */
  missing: string[];
}

const TEST_FILE = /`((?:[\w.-]+\/)*[\w.-]+\.test\.ts)`|`((?:bench|scripts)\/[\w.-]+\.ts)`/g;

function allTestFiles(root: string): string[] {
  return readdirSync(join(root, "test"), { recursive: true })
    .map(String)
    .filter((name) => name.endsWith(".test.ts"));
}

/** Cells of a table row, split at the `|` outside backticks. */
function cells(row: string): string[] {
  const out: string[] = [];
  let cell = "";
  let code = false;
  for (const c of row.trim().replace(/^\||\|$/g, "")) {
    if (c === "`") code = !code;
    if (c === "|" && !code) {
      out.push(cell.trim());
      cell = "";
    } else cell += c;
  }
  out.push(cell.trim());
  return out;
}

/** `text` split at `;` outside backticks and parentheses. */
function parts(text: string): string[] {
  const out: string[] = [];
  let part = "";
  let code = false;
  let depth = 0;
  for (const c of text) {
    if (c === "`") code = !code;
    if (!code && c === "(") depth++;
    if (!code && c === ")") depth = Math.max(0, depth - 1);
    if (c === ";" && !code && depth === 0) {
      out.push(part.trim());
      part = "";
    } else part += c;
  }
  out.push(part.trim());
  return out.filter((p) => p.length > 0);
}

/** The words of a title as written in the doc: backticks and markdown escapes dropped. */
function plain(text: string): string {
  return text.replace(/`/g, "").replace(/\\([|*_])/g, "$1").replace(/\s+/g, " ").trim();
}

/** Every claim the tables of `doc` (docs/conformance.md) make, each with what it names that does not exist. */
export function rowClaims(root: string, doc = readFileSync(join(root, "docs", "conformance.md"), "utf8")): RowClaim[] {
  const testFiles = allTestFiles(root);
  const texts = new Map<string, string>();
  const textOf = (file: string) => {
    if (!texts.has(file)) texts.set(file, readFileSync(join(root, file), "utf8").replace(/\\(["'`])/g, "$1").replace(/\s+/g, " "));
    return texts.get(file)!;
  };
  /** A named file resolved to its path from the project's root (a bare name in the section's folders, else anywhere under test/). */
  const resolve = (name: string, folders: string[]): string | undefined => {
    if (name.startsWith("bench/") || name.startsWith("scripts/")) return existsSync(join(root, name)) ? name : undefined;
    if (name.includes("/")) return existsSync(join(root, "test", name)) ? `test/${name}` : undefined;
    for (const folder of folders) if (existsSync(join(root, "test", folder, name))) return `test/${folder}/${name}`;
    const found = testFiles.filter((file) => basename(file) === name);
    return found.length === 1 ? `test/${found[0]}` : undefined;
  };
  const namedIn = (text: string) => [...text.matchAll(TEST_FILE)].map((m) => (m[1] ?? m[2])!);

  /** A file named by its stem, as some rows do (`gas-caps ›`, `ledger contract ›`): in the section's folders first. */
  const byStem = (stem: string, folders: string[]): string | undefined => {
    const name = `${stem.trim().replace(/\s+/g, "/")}.test.ts`;
    return /^[\w/-]+\.test\.ts$/.test(name) ? resolve(name, folders) : undefined;
  };

  const claims: RowClaim[] = [];
  let sectionFiles: string[] = [];
  let folders: string[] = [];
  let inTable = false;
  let tableIsTests = false;
  let sawTable = false;
  /** The files a `›` with none of its own may be in: those named in the table so far. */
  let tableFiles: string[] = [];
  const addSectionFiles = (text: string) => {
    const named = namedIn(text);
    folders = [...folders, ...named.filter((n) => n.includes("/") && !n.startsWith("bench/")).map((n) => n.slice(0, n.lastIndexOf("/")))];
    sectionFiles = [...sectionFiles, ...named.map((n) => resolve(n, folders)).filter((f): f is string => f !== undefined)];
  };
  doc.split("\n").forEach((line, index) => {
    if (/^#{1,6} /.test(line)) {
      sectionFiles = [];
      folders = [];
      sawTable = false;
      addSectionFiles(line);
      inTable = false;
      return;
    }
    if (!line.startsWith("|")) {
      inTable = false;
      // The section's prose before its first table names its files ("All in `facilitator/http-statuses.test.ts` unless named.").
      if (!sawTable) addSectionFiles(line);
      return;
    }
    const row = cells(line);
    if (!inTable) {
      inTable = true;
      sawTable = true;
      tableFiles = [];
      tableIsTests = /^tests?$/i.test(row.at(-1) ?? "");
      return;
    }
    if (/^-+$/.test((row[0] ?? "").replace(/:/g, "")) || !tableIsTests) return;
    const cell = row.at(-1) ?? "";
    let named = false;
    for (const part of parts(cell)) {
      const [prefix = "", ...titled] = part.split("›");
      const missing: string[] = [];
      const files: string[] = [];
      const names = namedIn(prefix);
      for (const name of names) {
        const file = resolve(name, folders);
        if (file) files.push(file);
        else missing.push(`no file ${name}`);
      }
      // A folder named whole (`e2e/`): it must exist.
      for (const match of prefix.matchAll(/`((?:[\w.-]+\/)+)`/g)) {
        if (existsSync(join(root, "test", match[1]!))) named = true;
        else missing.push(`no folder ${match[1]}`);
      }
      const pieces = titled
        .flatMap((title) => plain(title).split("…"))
        .map((piece) => piece.trim().replace(/^,\s*|,\s*$/g, "").trim())
        // A note in parentheses ("(6 tests)", "(both chains)") is the doc's, not the title's.
        .map((piece) => piece.replace(/\s*\([^()]*\)$/, "").trim())
        .filter((piece) => piece.length > 0);
      // A stem alone, before a note: "relayer-attacks (cancel and flip: …)", "ledger/sqlite-warning".
      if (names.length === 0 && titled.length === 0) {
        const stemFile = byStem(/^[\w/-]+/.exec(plain(prefix))?.[0] ?? "", [...folders, ...sectionFiles.map((f) => f.slice(5, f.lastIndexOf("/")))]);
        if (stemFile) files.push(stemFile);
      }
      if (names.length === 0 && titled.length > 0 && plain(prefix).length > 0) {
        const stemFile = byStem(plain(prefix), [...folders, ...sectionFiles.map((f) => f.slice(5, f.lastIndexOf("/")))]);
        if (stemFile) files.push(stemFile);
        else pieces.unshift(plain(prefix));
      }
      if (files.length > 0) {
        tableFiles = [...files, ...tableFiles];
        named = true;
      }
      if (pieces.length === 0) {
        if (files.length > 0 || missing.length > 0) claims.push({ line: index + 1, row: cell, files, pieces, missing });
        continue;
      }
      const candidates = files.length > 0 ? files.slice(-1) : [...new Set([...tableFiles, ...sectionFiles])];
      if (candidates.length === 0) missing.push(`no file for "${pieces.join(" … ")}"`);
      else named = true;
      for (const piece of pieces) {
        if (!candidates.some((file) => textOf(file).includes(piece))) missing.push(`"${piece}" in ${candidates.join(" or ") || "no file"}`);
      }
      claims.push({ line: index + 1, row: cell, files: candidates, pieces, missing });
    }
    if (!named && !claims.some((claim) => claim.line === index + 1)) claims.push({ line: index + 1, row: cell, files: [], pieces: [], missing: ["names no test file"] });
  });
  return claims;
}

/** The `it(` blocks of a test file: each title's opening text (up to its first quote's end) and its body. */
export function itBlocks(root: string, file: string): Array<{ title: string; body: string }> {
  const text = readFileSync(join(root, file), "utf8");
  const code = blanked(text);
  const blocks: Array<{ title: string; body: string }> = [];
  for (const match of code.matchAll(/\bit\(\s*(["'`])/g)) {
    const start = match.index + match[0].length - 1;
    const title = /^(["'`])((?:\\.|(?!\1)[^\\])*)\1/.exec(text.slice(start))?.[2] ?? "";
    const open = code.indexOf("{", start + title.length + 2);
    let depth = 0;
    let end = open;
    for (; end < code.length; end++) {
      if (code[end] === "{") depth++;
      else if (code[end] === "}" && --depth === 0) break;
    }
    blocks.push({ title, body: text.slice(open, end + 1) });
  }
  return blocks;
}
