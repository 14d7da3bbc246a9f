// `cronos-x402 catalog`: the operator's hand on the discovery catalog (x402 `bazaar`), on the ledger the
// facilitator uses (DATABASE_URL, else LEDGER_FILE, else the standalone default data/ledger.db).
import { DEFAULT_LEDGER_FILE } from "../facilitator/config.js";
import { openLedger } from "../ledger/open.js";

const USAGE = [
  "Usage: cronos-x402 catalog list",
  "       cronos-x402 catalog remove <resource URL> [METHOD]",
  "",
  "Lists the discovery catalog's resources, or removes one (as GET /v2/x402/discovery/resources shows its",
  "`resource`; every method of it, or METHOD's: an HTTP method, or mcp:<toolName> for an MCP tool); a later",
  "paid request that declares it lists it again.",
  "Reads DATABASE_URL, else LEDGER_FILE",
  `(default ${DEFAULT_LEDGER_FILE}), as the facilitator does.`,
].join("\n");

/** Runs `catalog list` or `catalog remove URL`; returns the exit status. */
export async function runCatalog(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [action, resource, method, ...extra] = argv;
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
      for (const entry of (await ledger.discoveryResources()).entries) {
        process.stdout.write(`${entry.resource}\t${entry.type}\t${entry.lastUpdated}\t${entry.description ?? ""}\n`);
      }
      return 0;
    }
    const removed = await ledger.removeDiscoveryResource(resource!, method);
    process.stdout.write(removed > 0 ? `removed ${resource}\n` : `not in the catalog: ${resource}\n`);
    return removed > 0 ? 0 : 1;
  } finally {
    await ledger.close();
  }
}
