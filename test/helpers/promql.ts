// Helpers only: importing this file runs nothing.
// Reading what the shipped Grafana dashboard and Prometheus alert rules name: the metrics and labels in a
// PromQL expression, a YAML file in the plain subset those rules are written in, and a /metrics page.

/** What a PromQL expression names. */
export interface PromqlRefs {
  /** Each metric named, with the label names its matchers use. */
  metrics: Map<string, Set<string>>;
  /** The labels each aggregation keeps, in order: its `by (…)` list, or none (`sum(…)` without one). */
  aggregations: string[][];
  /** The label lists of vector matching: `on (…)`, `ignoring (…)`, `group_left (…)`, `group_right (…)`. */
  joins: string[][];
}

const AGGREGATIONS = new Set(["sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values", "group"]);
const FUNCTIONS = new Set([
  "rate", "irate", "increase", "delta", "idelta", "deriv", "changes", "resets", "histogram_quantile", "clamp_min", "clamp_max", "clamp",
  "abs", "ceil", "floor", "round", "absent", "absent_over_time", "avg_over_time", "max_over_time", "min_over_time", "sum_over_time",
  "count_over_time", "last_over_time", "predict_linear", "time", "timestamp", "vector", "scalar", "sort", "sort_desc", "label_replace",
]);
// `without` is not read: what it keeps depends on the series, which these checks do not guess.
const GROUPING = new Set(["by", "on", "ignoring", "group_left", "group_right"]);
const OPERATOR_WORDS = new Set(["and", "or", "unless", "bool", "offset"]);

type Token = { kind: "ident" | "number" | "string" | "punct"; text: string };

function tokenize(expr: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < expr.length) {
    const rest = expr.slice(i);
    const space = /^\s+/.exec(rest);
    if (space) {
      i += space[0].length;
      continue;
    }
    if (rest[0] === '"') {
      const string = /^"(?:[^"\\]|\\.)*"/.exec(rest);
      if (!string) throw new Error(`unterminated string in ${expr}`);
      tokens.push({ kind: "string", text: JSON.parse(string[0]) as string });
      i += string[0].length;
      continue;
    }
    if (rest[0] === "[") {
      // A range or subquery: `[5m]`, `[$__rate_interval]`, `[1h:5m]`.
      const range = /^\[(\d+[smhdwy]|\$__rate_interval|\$__interval|\$__range)(:\d+[smhdwy]?)?\]/.exec(rest);
      if (!range) throw new Error(`unreadable range at "${rest.slice(0, 20)}" in ${expr}`);
      i += range[0].length;
      continue;
    }
    const number = /^\d+(\.\d+)?(e[+-]?\d+)?/i.exec(rest);
    if (number) {
      tokens.push({ kind: "number", text: number[0] });
      i += number[0].length;
      continue;
    }
    const ident = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(rest);
    if (ident) {
      tokens.push({ kind: "ident", text: ident[0] });
      i += ident[0].length;
      continue;
    }
    const punct = /^(==|!=|>=|<=|=~|!~|[(){},=<>+\-*/^%])/.exec(rest);
    if (!punct) throw new Error(`unexpected "${rest[0]}" in ${expr}`);
    tokens.push({ kind: "punct", text: punct[0] });
    i += punct[0].length;
  }
  return tokens;
}

/** The metrics and labels an expression names. Throws on what it cannot read (an unknown function, unbalanced brackets). */
export function promqlRefs(expr: string): PromqlRefs {
  const tokens = tokenize(expr);
  const refs: PromqlRefs = { metrics: new Map(), aggregations: [], joins: [] };
  let depth = 0;
  const at = (i: number) => tokens[i];
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (token.kind === "punct") {
      if (token.text === "(") depth++;
      if (token.text === ")" && --depth < 0) throw new Error(`unbalanced ) in ${expr}`);
      if (token.text === "{" || token.text === "}") throw new Error(`a matcher without a metric name in ${expr}`);
      continue;
    }
    if (token.kind !== "ident") continue;
    const name = token.text;
    if (GROUPING.has(name)) {
      if (at(i + 1)?.text !== "(") {
        if (name === "group_left" || name === "group_right") continue;
        throw new Error(`${name} without a label list in ${expr}`);
      }
      const labels: string[] = [];
      for (i += 2; at(i)?.text !== ")"; i++) {
        const label = at(i);
        if (!label) throw new Error(`unclosed ${name} (…) in ${expr}`);
        if (label.kind === "ident") labels.push(label.text);
        else if (label.text !== ",") throw new Error(`unexpected "${label.text}" in ${name} (…) of ${expr}`);
      }
      (name === "by" ? refs.aggregations : refs.joins).push(labels);
      continue;
    }
    if (name === "without") throw new Error(`without (…) is not read by these checks: use by (…) in ${expr}`);
    if (OPERATOR_WORDS.has(name)) continue;
    if (AGGREGATIONS.has(name)) {
      if (at(i + 1)?.text === "by") continue;
      if (at(i + 1)?.text !== "(") throw new Error(`${name} is not called in ${expr}`);
      // `sum(…)` keeps no label unless a `by (…)` follows its closing bracket.
      let close = i + 1;
      for (let open = 0; close < tokens.length; close++) {
        if (at(close)!.text === "(") open++;
        if (at(close)!.text === ")" && --open === 0) break;
      }
      if (at(close + 1)?.text !== "by") refs.aggregations.push([]);
      continue;
    }
    if (FUNCTIONS.has(name)) {
      if (at(i + 1)?.text !== "(") throw new Error(`${name} is not called in ${expr}`);
      continue;
    }
    if (at(i + 1)?.text === "(") throw new Error(`unknown function ${name} in ${expr}`);
    // A metric name, and its matchers: label op "value", …
    const labels = refs.metrics.get(name) ?? new Set<string>();
    refs.metrics.set(name, labels);
    if (at(i + 1)?.text !== "{") continue;
    for (i += 2; at(i)?.text !== "}"; ) {
      const [label, op, value] = [at(i), at(i + 1), at(i + 2)];
      if (label?.kind !== "ident" || !["=", "!=", "=~", "!~"].includes(op?.text ?? "") || value?.kind !== "string") {
        throw new Error(`unreadable matcher after ${name}{ in ${expr}`);
      }
      labels.add(label.text);
      i += 3;
      if (at(i)?.text === ",") i++;
    }
  }
  if (depth !== 0) throw new Error(`unbalanced ( in ${expr}`);
  return refs;
}

/** A Prometheus text page as metric name → the label names its samples carry (only names with a sample). */
export function seriesLabels(page: string): Map<string, Set<string>> {
  const found = new Map<string, Set<string>>();
  for (const line of page.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$/.exec(line);
    if (!sample) throw new Error(`unreadable sample line: ${line}`);
    const labels = found.get(sample[1]!) ?? new Set<string>();
    found.set(sample[1]!, labels);
    for (const pair of (sample[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"/g)) labels.add(pair[1]!);
  }
  return found;
}

export type Yaml = string | null | Yaml[] | { [key: string]: Yaml };

/**
 * Reads YAML in the plain subset the shipped rules use: block mappings and `- ` sequences by indentation
 * (spaces only), comments on lines of their own, double-quoted strings and plain scalars. Anything else (flow
 * collections, anchors, block scalars, tabs, a repeated key) is refused, so the subset cannot be misread.
 */
export function parseYaml(text: string): Yaml {
  const rows: Array<{ indent: number; item: boolean; text: string; line: number }> = [];
  for (const [index, raw] of text.split("\n").entries()) {
    const line = raw.trimEnd();
    if (line.trim() === "" || /^\s*#/.test(line)) continue;
    if (line.includes("\t")) throw new Error(`line ${index + 1}: a tab`);
    let indent = line.length - line.trimStart().length;
    let rest = line.trimStart();
    while (rest.startsWith("- ")) {
      rows.push({ indent, item: true, text: "", line: index + 1 });
      indent += 2;
      rest = rest.slice(2).trimStart();
    }
    rows.push({ indent, item: false, text: rest, line: index + 1 });
  }
  let p = 0;
  const scalar = (value: string, line: number): string => {
    if (value.startsWith('"')) {
      if (!/^"(?:[^"\\]|\\.)*"$/.test(value)) throw new Error(`line ${line}: a quoted string with text after it`);
      return JSON.parse(value) as string;
    }
    if (/^[[\]{}&*!|>'%@`]/.test(value) || value.includes(": ") || value.includes(" #")) throw new Error(`line ${line}: outside the plain subset: ${value}`);
    return value;
  };
  const node = (indent: number): Yaml => {
    const first = rows[p];
    if (!first || first.indent !== indent) throw new Error(`line ${first?.line ?? "end"}: expected indentation ${indent}`);
    if (first.item) {
      const list: Yaml[] = [];
      while (rows[p]?.item && rows[p]!.indent === indent) {
        const next = rows[++p];
        // An item that is not a mapping: one scalar.
        if (next && !next.item && next.indent === indent + 2 && !/^[A-Za-z_][A-Za-z0-9_]*:( |$)/.test(next.text)) {
          list.push(scalar(next.text, next.line));
          p++;
        } else list.push(node(indent + 2));
      }
      return list;
    }
    const map: { [key: string]: Yaml } = {};
    while (rows[p] && !rows[p]!.item && rows[p]!.indent === indent) {
      const { text, line } = rows[p++]!;
      const match = /^([A-Za-z_][A-Za-z0-9_]*):(?: (.*))?$/.exec(text);
      if (!match) throw new Error(`line ${line}: not "key: value": ${text}`);
      const key = match[1]!;
      if (Object.hasOwn(map, key)) throw new Error(`line ${line}: ${key} repeated`);
      const value = match[2]?.trim() ?? "";
      if (value !== "") map[key] = scalar(value, line);
      else map[key] = rows[p] && rows[p]!.indent > indent ? node(rows[p]!.indent) : null;
    }
    return map;
  };
  const document = node(0);
  if (p !== rows.length) throw new Error(`line ${rows[p]!.line}: not where its indentation puts it`);
  return document;
}
