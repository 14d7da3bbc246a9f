import { DISCOVERY_MAX_PAYERS, DISCOVERY_MAX_WORDS } from "../types.js";
import { networkKey, type EntryRow, type SqlCatalogStore } from "./catalog.js";
import type { SqlExecutor } from "./driver.js";

/** A catalog entry as a changed history set it aside (`takeNetwork`): its row, and its words and payers (none when an earlier version set it aside). */
export type SetAsideEntry = EntryRow & { words?: unknown; payer_list?: unknown };

const strings = (value: unknown, max: number): string[] => (Array.isArray(value) ? value.filter((v): v is string => typeof v === "string").slice(0, max) : []);

/**
 * Lists again a catalog entry a changed history set aside, as it was (its id, listing, payers and words), unless its
 * place (resource, method and payTo) is taken by an entry its seller listed since: then it stays aside (false). Runs in
 * the caller's transaction, which holds the catalog's lock; the counts stay exact. The catalog's bounds are kept by its
 * next write that adds an entry.
 */
export async function restoreEntry(tx: SqlExecutor, catalog: SqlCatalogStore, row: SetAsideEntry): Promise<boolean> {
  const [taken] = await tx.all<Pick<EntryRow, "id">>(`SELECT id FROM discovery_entries WHERE (resource = ? AND method = ? AND pay_to = ?) OR id = ?`, [
    row.resource,
    row.method,
    row.pay_to,
    Number(row.id),
  ]);
  if (taken) return false;
  const id = Number(row.id);
  const lastPaid = Number(row.last_paid);
  const payers = strings(row.payer_list, DISCOVERY_MAX_PAYERS);
  const words = strings(row.words, DISCOVERY_MAX_WORDS);
  let networks: string[] = [];
  try {
    const accepts = (JSON.parse(row.entry) as { accepts?: unknown }).accepts;
    if (Array.isArray(accepts)) networks = [...new Set(accepts.map((a) => networkKey(String((a as { network?: unknown }).network))))];
  } catch {
    // A listing that does not parse (written by hand): listed under no network.
  }
  await tx.run(
    `INSERT INTO discovery_entries (id, resource, method, pay_to, type, schemes, payers, first_paid, last_paid, entry) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [id, row.resource, row.method, row.pay_to, row.type, row.schemes, Number(row.payers), Number(row.first_paid), lastPaid, row.entry],
  );
  for (const payer of payers) await tx.run(`INSERT INTO discovery_payers (entry_id, payer) VALUES (?, ?) ON CONFLICT (entry_id, payer) DO NOTHING`, [id, payer]);
  for (const network of networks) {
    await tx.run(`INSERT INTO discovery_networks (network, type, last_paid, entry_id) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, [network, row.type, lastPaid, id]);
  }
  for (const word of words) {
    await tx.run(`INSERT INTO discovery_words (word, payers, last_paid, entry_id) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, [word, Number(row.payers), lastPaid, id]);
  }
  await catalog.adjustCounts(tx, row.type, networks, 1);
  return true;
}
