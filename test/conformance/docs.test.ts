import { readFile } from "node:fs/promises";
import { expect } from "chai";
import { catalog } from "../../src/conformance/checks/index.js";
import type { Target } from "../../src/conformance/target.js";
import { NETWORK_NAMES, NETWORKS } from "../../src/protocol/networks.js";

describe("docs/conformance.md and the conformance catalog", () => {
  it("lists every check id of the catalog, and no id the catalog lacks", async () => {
    const doc = await readFile(new URL("../../docs/conformance.md", import.meta.url), "utf8");
    const section = doc.slice(doc.indexOf("## The conformance command"));
    const targets: Target[] = NETWORK_NAMES.map((network) => ({ ...NETWORKS[network], payTo: NETWORKS[network].token }));
    const ids = [...new Set(catalog(targets, ["cronos", "x402-v2"]).map((check) => check.id))];
    const listed = [...new Set([...section.matchAll(/`((?:health|supported|http|verify|settle)\.[a-z0-9-]+)`/g)].map((match) => match[1]!))];
    expect(ids.filter((id) => !listed.includes(id)), "missing from docs/conformance.md").to.deep.equal([]);
    expect(listed.filter((id) => !ids.includes(id)), "in docs/conformance.md but not in the catalog").to.deep.equal([]);
  });
});
