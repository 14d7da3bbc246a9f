// `cronos-x402 catalog`: the operator's hand on the discovery catalog (x402 `bazaar`), on the ledger the
// facilitator uses (DATABASE_URL, else LEDGER_FILE, else the standalone default data/ledger.db).
import { DEFAULT_LEDGER_FILE } from "../facilitator/config/index.js";
import { openLedger } from "../ledger/open.js";
import type { DiscoveryEntry } from "../ledger/types.js";

const USAGE = [
  "Usage: cronos-x402 catalog list",
  "       cronos-x402 catalog remove <resource URL> [METHOD] [PAYTO]",
  "",
  "Lists the discovery catalog's entries (resource, payTo, type, last paid, description), or removes a",
  "resource (as GET /v2/x402/discovery/resources shows its `resource`; every method of it, or METHOD's: an",
  "HTTP method, or mcp:<toolName> for an MCP tool; of every payTo, or PAYTO's); a later settled payment that",
  "declares it lists it again.",
  "Reads DATABASE_URL, else LEDGER_FILE",
  `(default ${DEFAULT_LEDGER_FILE}), as the facilitator does.`,
].join("\n");

/** Runs `catalog list` or `catalog remove URL`; returns the exit status. */
export async function runCatalog(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [action, resource, ...rest] = argv;
  // The payTo is told from a method by its shape (an address); either may be left out.
  const payTo = rest.find((arg) => /^0x[0-9a-fA-F]{40}$/.test(arg));
  const [method, ...extra] = rest.filter((arg) => arg !== payTo);
  if (action === "--help" || action === "-h") {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (!(action === "list" && resource === undefined) && !(action === "remove" && resource !== undefined && extra.length === 0)) {
    process.stderr.write(`error: ${action === undefined ? "a command is required" : `cannot read "${argv.join(" ")}"`}\n\n${USAGE}\n`);
    return 2;
  }
  const databaseUrl = env.DATABASE_URL?.trim();
  const ledger = await openLedger(databaseUrl ? { databaseUrl } : { file: env.LEDGER_FILE?.trim() || DEFAULT_LEDGER_FILE });
  try {
    if (action === "list") {
      for (let offset = 0, more = true; more; ) {
        const page = await ledger.listDiscoveryResources({ limit: 1_000, offset, maxBytes: 4 * 1024 * 1024 });
        for (const item of page.items) {
          const entry = JSON.parse(item) as DiscoveryEntry;
          process.stdout.write(`${entry.resource}\t${String(entry.accepts[0]?.payTo ?? "")}\t${entry.type}\t${entry.lastUpdated}\t${entry.description ?? ""}\n`);
        }
        offset += page.items.length;
        more = page.items.length > 0 && offset < page.total;
      }
      return 0;
    }
    const removed = await ledger.removeDiscoveryResource(resource!, method, payTo);
    process.stdout.write(removed > 0 ? `removed ${resource}\n` : `not in the catalog: ${resource}\n`);
    return removed > 0 ? 0 : 1;
  } finally {
    await ledger.close();
  }
}
