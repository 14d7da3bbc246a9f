import { resultName, summarize, type CheckResult, type RunReport } from "../runner.js";

// JUnit XML as CI systems read it (Jenkins, GitLab, GitHub actions that publish test reports): one
// testsuite per dialect and network, one testcase per check, <failure> and <skipped> where they apply.

/** Characters XML 1.0 does not allow at all (control characters, lone surrogates, U+FFFE/FFFF). */
const INVALID_XML = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** Text content: `&`, `<`, `>` escaped, invalid characters dropped. */
export function escapeText(text: string): string {
  return text.replace(INVALID_XML, "").replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** An attribute value in double quotes: also `"`, `'` and line breaks (kept as character references). */
export function escapeAttribute(text: string): string {
  return escapeText(text).replace(/"/g, "&quot;").replace(/'/g, "&apos;").replace(/\n/g, "&#10;").replace(/\r/g, "&#13;").replace(/\t/g, "&#9;");
}

function seconds(ms: number): string {
  return (ms / 1000).toFixed(3);
}

function suiteName(result: CheckResult): string {
  return `x402 facilitator conformance · ${result.dialect} · ${result.network ?? "service"}`;
}

function testcase(result: CheckResult): string {
  const attributes = `name="${escapeAttribute(resultName(result))}" classname="${escapeAttribute(`x402.conformance.${result.dialect}.${result.network ?? "service"}`)}" time="${seconds(result.durationMs)}"`;
  const details = `${result.title}\nproves: ${result.spec}${result.message === undefined ? "" : `\n${result.message}`}`;
  const out = `<system-out>${escapeText(details)}</system-out>`;
  switch (result.status) {
    case "passed":
      return `    <testcase ${attributes}>${out}</testcase>`;
    case "skipped":
      return `    <testcase ${attributes}><skipped message="${escapeAttribute(result.message ?? "")}"/>${out}</testcase>`;
    case "failed":
      return `    <testcase ${attributes}><failure message="${escapeAttribute(result.message ?? "")}" type="conformance">${escapeText(details)}</failure>${out}</testcase>`;
  }
}

/** The run as a JUnit XML document. */
export function toJUnit(report: RunReport): string {
  const suites = new Map<string, CheckResult[]>();
  for (const result of report.results) {
    const name = suiteName(result);
    suites.set(name, [...(suites.get(name) ?? []), result]);
  }
  const { total, failed, skipped } = report.summary;
  const lines = [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<testsuites name="x402 facilitator conformance" tests="${total}" failures="${failed}" errors="0" skipped="${skipped}" time="${seconds(report.durationMs)}">`,
  ];
  for (const [name, results] of suites) {
    const counts = summarize(results);
    const time = results.reduce((sum, result) => sum + result.durationMs, 0);
    lines.push(
      `  <testsuite name="${escapeAttribute(name)}" tests="${counts.total}" failures="${counts.failed}" errors="0" skipped="${counts.skipped}" time="${seconds(time)}" timestamp="${escapeAttribute(report.startedAt.replace(/\.\d+Z$/, ""))}">`,
      `    <properties><property name="facilitator" value="${escapeAttribute(report.facilitator)}"/></properties>`,
      ...results.map(testcase),
      `  </testsuite>`,
    );
  }
  lines.push(`</testsuites>`, "");
  return lines.join("\n");
}
