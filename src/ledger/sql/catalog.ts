import { caip2OfNetwork } from "../../protocol/x402v2.js";
import {
  DISCOVERY_CANDIDATES_PER_WORD,
  DISCOVERY_MAX_PAYERS,
  DISCOVERY_MAX_QUERY_WORDS,
  DISCOVERY_MAX_WORD_LENGTH,
  DISCOVERY_MAX_WORDS,
  type CatalogStore,
  type DiscoveryBounds,
  type DiscoveryEntry,
  type DiscoveryFilter,
  type DiscoveryPage,
  type DiscoveryPageRequest,
  type DiscoveryPayment,
  type DiscoveryRecorded,
  type DiscoverySearchPage,
} from "../types.js";
import type { Int8 } from "./columns.js";
import type { SqlDriver, SqlExecutor, SqlRow, SqlValue } from "./driver.js";

// The discovery catalog's SQL (migration 0007), the same statements on SQLite and PostgreSQL. Apart from
// the rest of the ledger: the catalog is discovery, never money, and shares no row with settlements.
// Every read is an index range of bounded length, or a count kept by the writes: none grows with the catalog
// (but a `scheme` filter's count, and a seller's own entries, bounded by CATALOG_MAX_ENTRIES_PER_SELLER).

/** A row of `discovery_entries` (migration 0007): `entry` is the listing as JSON, `schemes` its schemes as `|a|b|`. */
export interface EntryRow {
  id: Int8;
  resource: string;
  method: string;
  pay_to: string;
  type: string;
  schemes: string;
  payers: number;
  first_paid: Int8;
  last_paid: Int8;
  entry: string;
}

/** A count (`COUNT(*) AS n`, `SUM(…) AS n`). */
interface CountRow {
  n: Int8;
}

/** A search's row: the query words' entry counts (`n0`, `n1`, …), and a match's listing (null when nothing matched). */
interface SearchRow {
  entry: string | null;
  [count: `n${number}`]: Int8;
}

/** The first of `texts` within `maxBytes` in all (the first one always). */
function withinBytes(texts: readonly string[], maxBytes: number): string[] {
  let bytes = 0;
  const kept: string[] = [];
  for (const text of texts) {
    if (kept.length > 0 && bytes + text.length > maxBytes) break;
    kept.push(text);
    bytes += text.length;
  }
  return kept;
}

/** Every catalog write takes this lock (every instance): counts and evictions stay exact, and no two writes wait on each other's rows. */
const LOCK = "discovery-catalog";
/** The catalog's lock, for a change of the ledger that takes catalog entries out in its own transaction (a chain's history). */
export const CATALOG_LOCK = LOCK;
/** Ways of paying one catalog entry keeps (one per scheme and network). */
const MAX_ACCEPTS = 16;
/** Entries read per query while filling a page up to its byte bound. */
const PAGE_CHUNK = 32;
/** The counts' network of every network: an entry's count per type. */
const ALL_NETWORKS = "*";

const lower = (value: string) => value.toLowerCase();
/** A network's one name for comparisons: its CAIP-2 id where the kit knows it (`cronos-testnet` is `eip155:338`). */
export const networkKey = (network: string) => caip2OfNetwork(network) ?? network;
const marks = (n: number) => Array.from({ length: n }, () => "?").join(", ");
/** A LIKE pattern matching `value` as one member of a `|a|b|` column, its wildcards escaped. */
const memberPattern = (value: string) => `%|${value.replace(/[\\%_]/g, (c) => `\\${c}`)}|%`;

/**
 * What a catalog entry is keyed by with its URL and payTo: its declaration's HTTP method (GET by default),
 * or `mcp:<toolName>` for an MCP tool (several tools may share one URL).
 */
export function discoveryMethodOf(entry: DiscoveryEntry): string {
  const input = (entry.extensions?.bazaar as { info?: { input?: { method?: unknown; toolName?: unknown } } } | undefined)?.info?.input;
  if (entry.type === "mcp") return `mcp:${typeof input?.toolName === "string" ? input.toolName : ""}`;
  return typeof input?.method === "string" ? input.method.toUpperCase() : "GET";
}

/** The key a removal names: an HTTP method in any case, or `mcp:<toolName>` as declared (tool names are case-sensitive). */
function methodKey(method: string): string {
  return /^mcp:/i.test(method) ? `mcp:${method.slice(4)}` : method.toUpperCase();
}

/** Conditions over an entry `e` for the filters given (a network by its table `n` when `network` is not the listing's own). */
function conditionsOf(filter: DiscoveryFilter, options: { network: boolean }): { sql: string[]; params: SqlValue[] } {
  const sql: string[] = [];
  const params: SqlValue[] = [];
  if (filter.type !== undefined) sql.push("e.type = ?"), params.push(filter.type);
  if (filter.scheme !== undefined) sql.push(`e.schemes LIKE ? ESCAPE '\\'`), params.push(memberPattern(filter.scheme));
  if (options.network && filter.network !== undefined) {
    sql.push("EXISTS (SELECT 1 FROM discovery_networks n WHERE n.entry_id = e.id AND n.network = ?)"), params.push(networkKey(filter.network));
  }
  return { sql, params };
}

/** The discovery catalog over SQL. */
export class SqlCatalogStore implements CatalogStore {
  readonly #db: SqlDriver;

  constructor(driver: SqlDriver) {
    this.#db = driver;
  }

  recordDiscoveryPayment(payment: DiscoveryPayment, bounds: DiscoveryBounds): Promise<DiscoveryRecorded> {
    const { entry } = payment;
    const method = discoveryMethodOf(entry);
    const payTo = lower(payment.payTo);
    const payer = lower(payment.payer);
    const paidAt = Date.parse(entry.lastUpdated);
    if (!Number.isFinite(paidAt)) return Promise.reject(new RangeError(`lastUpdated is not a time: ${entry.lastUpdated}`));
    const words = [...new Set(payment.words)].filter((word) => word.length <= DISCOVERY_MAX_WORD_LENGTH).slice(0, DISCOVERY_MAX_WORDS);
    return this.#db.transaction({ lock: LOCK }, async (tx) => {
      const [row] = await tx.all<Pick<EntryRow, "id" | "type" | "entry" | "last_paid">>(`SELECT id, type, entry, last_paid FROM discovery_entries WHERE resource = ? AND method = ? AND pay_to = ?`, [entry.resource, method, payTo]);
      // The ways of paying of every payment of this payTo (one per scheme and network), the latest first.
      const kind = (a: Record<string, unknown>) => `${String(a.scheme)}|${networkKey(String(a.network))}`;
      const fresh = new Set(entry.accepts.map(kind));
      const earlier = row ? (JSON.parse(row.entry) as DiscoveryEntry).accepts : [];
      const accepts = [...entry.accepts, ...earlier.filter((a) => !fresh.has(kind(a)))].slice(0, MAX_ACCEPTS);
      const lastPaid = Math.max(paidAt, row ? Number(row.last_paid) : 0);
      const listing = JSON.stringify({ ...entry, accepts, lastUpdated: new Date(lastPaid).toISOString() });
      const networks = [...new Set(accepts.map((a) => networkKey(String(a.network))))];
      const schemes = `|${[...new Set(accepts.map((a) => String(a.scheme)))].join("|")}|`;
      let id: number;
      let payers: number;
      if (row) {
        id = Number(row.id);
        // Distinct payers, up to the cap: one payer paying again and again counts once.
        await tx.run(
          `INSERT INTO discovery_payers (entry_id, payer) SELECT ?, ? WHERE (SELECT COUNT(*) FROM discovery_payers WHERE entry_id = ?) < ?
           ON CONFLICT (entry_id, payer) DO NOTHING`,
          [id, payer, id, DISCOVERY_MAX_PAYERS],
        );
        const [updated] = await tx.all<Pick<EntryRow, "payers">>(
          `UPDATE discovery_entries SET type = ?, schemes = ?, payers = (SELECT COUNT(*) FROM discovery_payers WHERE entry_id = ?), last_paid = ?, entry = ?
           WHERE id = ? RETURNING payers`,
          [entry.type, schemes, id, lastPaid, listing, id],
        );
        payers = updated!.payers;
        const before = await tx.all<{ network: string }>(`SELECT network FROM discovery_networks WHERE entry_id = ?`, [id]);
        await this.#count(tx, row.type, before.map((n) => n.network), -1);
        await tx.run(`DELETE FROM discovery_words WHERE entry_id = ?`, [id]);
        await tx.run(`DELETE FROM discovery_networks WHERE entry_id = ?`, [id]);
      } else {
        const [inserted] = await tx.all<Pick<EntryRow, "id">>(
          `INSERT INTO discovery_entries (resource, method, pay_to, type, schemes, payers, first_paid, last_paid, entry)
           VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?) RETURNING id`,
          [entry.resource, method, payTo, entry.type, schemes, paidAt, lastPaid, listing],
        );
        id = Number(inserted!.id);
        payers = 1;
        await tx.run(`INSERT INTO discovery_payers (entry_id, payer) VALUES (?, ?)`, [id, payer]);
      }
      await this.#count(tx, entry.type, networks, 1);
      // Rows carry the entry's order (standing, time), so each index hands back its best or latest entries first.
      if (networks.length > 0) {
        await tx.run(
          `INSERT INTO discovery_networks (network, type, last_paid, entry_id) VALUES ${networks.map(() => "(?, ?, ?, ?)").join(", ")}`,
          networks.flatMap((network) => [network, entry.type, lastPaid, id]),
        );
      }
      if (words.length > 0) {
        await tx.run(
          `INSERT INTO discovery_words (word, payers, last_paid, entry_id) VALUES ${words.map(() => "(?, ?, ?, ?)").join(", ")}`,
          words.flatMap((word) => [word, payers, lastPaid, id]),
        );
      }
      // The bounds, when an entry was added: the payTo's own first (its entries are its own to crowd out), then the whole catalog.
      let evicted = 0;
      if (!row) {
        const [seller] = await tx.all<CountRow>(`SELECT COUNT(*) AS n FROM (SELECT 1 FROM discovery_entries WHERE pay_to = ? LIMIT ?) AS s`, [payTo, bounds.maxEntriesPerSeller + 1]);
        evicted += await this.#evict(tx, Number(seller!.n) - bounds.maxEntriesPerSeller, `WHERE pay_to = ?`, [payTo]);
        evicted += await this.#evict(tx, (await this.#total((sql, params) => tx.all<CountRow>(sql, params), {})) - bounds.maxEntries, "", []);
      }
      return { created: !row, evicted };
    });
  }

  /** Adds `delta` to the counts of one entry of `type` on `networks` (and on every network). */
  async #count(tx: SqlExecutor, type: string, networks: readonly string[], delta: number): Promise<void> {
    const keys = [ALL_NETWORKS, ...networks];
    await tx.run(
      `INSERT INTO discovery_counts (type, network, entries) VALUES ${keys.map(() => "(?, ?, ?)").join(", ")}
       ON CONFLICT (type, network) DO UPDATE SET entries = discovery_counts.entries + excluded.entries`,
      keys.flatMap((network) => [type, network, delta]),
    );
  }

  /** The entries of a type and network (either, both, or none given), from the counts the writes keep. */
  async #total(all: (sql: string, params: readonly SqlValue[]) => Promise<CountRow[]>, filter: { type?: string; network?: string }): Promise<number> {
    const [row] = await all(
      `SELECT COALESCE(SUM(entries), 0) AS n FROM discovery_counts WHERE network = ?${filter.type !== undefined ? " AND type = ?" : ""}`,
      [filter.network === undefined ? ALL_NETWORKS : networkKey(filter.network), ...(filter.type !== undefined ? [filter.type] : [])],
    );
    return Number(row?.n ?? 0);
  }

  /** Deletes the `count` entries (of `where`) with the fewest distinct payers, the least recently paid among them. */
  async #evict(tx: SqlExecutor, count: number, where: string, params: SqlValue[]): Promise<number> {
    if (count <= 0) return 0;
    const victims = await tx.all<Pick<EntryRow, "id">>(`SELECT id FROM discovery_entries ${where} ORDER BY payers, last_paid, id LIMIT ?`, [...params, count]);
    return this.#delete(tx, victims.map((v) => Number(v.id)));
  }

  async #delete(tx: SqlExecutor, ids: number[]): Promise<number> {
    if (ids.length === 0) return 0;
    const list = marks(ids.length);
    // Out of the counts first: each entry once per type, and once per type and network.
    await tx.run(
      `UPDATE discovery_counts SET entries = entries - (SELECT COUNT(*) FROM discovery_entries e WHERE e.id IN (${list}) AND e.type = discovery_counts.type)
       WHERE network = ?`,
      [...ids, ALL_NETWORKS],
    );
    await tx.run(
      `UPDATE discovery_counts SET entries = entries - (
         SELECT COUNT(*) FROM discovery_networks n WHERE n.entry_id IN (${list}) AND n.type = discovery_counts.type AND n.network = discovery_counts.network)
       WHERE network <> ?`,
      [...ids, ALL_NETWORKS],
    );
    // Payers, words and networks go with their entry (ON DELETE CASCADE).
    return tx.run(`DELETE FROM discovery_entries WHERE id IN (${list})`, ids);
  }

  async listDiscoveryResources(request: DiscoveryPageRequest): Promise<DiscoveryPage> {
    const filter = request.filter ?? {};
    let from: string;
    let order: string;
    let conditions: { sql: string[]; params: SqlValue[] };
    let counted: boolean;
    if (filter.payTo !== undefined) {
      // One seller's entries, from its index; counted among them.
      from = "discovery_entries e";
      order = "e.last_paid DESC, e.id DESC";
      const rest = conditionsOf(filter, { network: true });
      conditions = { sql: ["e.pay_to = ?", ...rest.sql], params: [lower(filter.payTo), ...rest.params] };
      counted = false;
    } else if (filter.network !== undefined) {
      // A network's entries, in order from its own index (with a type, the type's part of it).
      from = "discovery_networks n JOIN discovery_entries e ON e.id = n.entry_id";
      order = "n.last_paid DESC, n.entry_id DESC";
      const rest = conditionsOf({ ...filter, type: undefined }, { network: false });
      conditions = {
        sql: ["n.network = ?", ...(filter.type !== undefined ? ["n.type = ?"] : []), ...rest.sql],
        params: [networkKey(filter.network), ...(filter.type !== undefined ? [filter.type] : []), ...rest.params],
      };
      counted = filter.scheme === undefined;
    } else {
      from = "discovery_entries e";
      order = "e.last_paid DESC, e.id DESC";
      conditions = conditionsOf(filter, { network: false });
      counted = filter.scheme === undefined;
    }
    const where = conditions.sql.length ? `WHERE ${conditions.sql.join(" AND ")}` : "";
    const total = counted
      ? await this.#total((sql, params) => this.#read<CountRow>(sql, params), filter)
      : Number((await this.#read<CountRow>(`SELECT COUNT(*) AS n FROM ${from} ${where}`, conditions.params))[0]?.n ?? 0);
    const page = await this.#page(request, (limit, offset) => this.#read<Pick<EntryRow, "id">>(`SELECT e.id FROM ${from} ${where} ORDER BY ${order} LIMIT ? OFFSET ?`, [...conditions.params, limit, offset]));
    return { items: page.items, total };
  }

  async searchDiscoveryResources(request: DiscoveryPageRequest & { words: readonly string[] }): Promise<DiscoverySearchPage> {
    const words = [...new Set(request.words)].filter((word) => word.length <= DISCOVERY_MAX_WORD_LENGTH).slice(0, DISCOVERY_MAX_QUERY_WORDS);
    if (words.length === 0) return { items: [], more: false, partial: false };
    const { payTo, ...rest } = request.filter ?? {};
    const conditions = conditionsOf(rest, { network: true });
    // The matches `m`, each with its score (query words matched) and its standing (payers, latest payment).
    let matches: string;
    let matchParams: SqlValue[];
    // How many entries each word has, up to one more than a search reads (whether it read them all).
    let counts = "SELECT 0 AS n0";
    let countParams: SqlValue[] = [];
    if (payTo !== undefined) {
      // One seller's entries (bounded by CATALOG_MAX_ENTRIES_PER_SELLER), from its index, each scored by probes of
      // its own words: every match among them.
      matches = `SELECT entry_id, score, payers, last_paid FROM (
          SELECT s.id AS entry_id, s.payers, s.last_paid, (SELECT COUNT(*) FROM discovery_words w WHERE w.entry_id = s.id AND w.word IN (${marks(words.length)})) AS score
          FROM discovery_entries s WHERE s.pay_to = ?) AS scored WHERE score > 0`;
      matchParams = [...words, lower(payTo)];
    } else {
      // The best entries of each word, read from the word's index in order (a bounded read at any catalog size),
      // ranked from what those index rows hold: no entry is read but the page's.
      const reads = words.map(
        (_, i) => `SELECT entry_id, payers, last_paid FROM (SELECT entry_id, payers, last_paid FROM discovery_words WHERE word = ? ORDER BY payers DESC, last_paid DESC, entry_id DESC LIMIT ?) AS w${i}`,
      );
      matches = `SELECT entry_id, COUNT(*) AS score, MAX(payers) AS payers, MAX(last_paid) AS last_paid FROM (${reads.join(" UNION ALL ")}) AS c GROUP BY entry_id`;
      matchParams = words.flatMap((word) => [word, DISCOVERY_CANDIDATES_PER_WORD]);
      counts = `SELECT ${words.map((_, i) => `(SELECT COUNT(*) FROM (SELECT 1 FROM discovery_words WHERE word = ? LIMIT ?) AS c${i}) AS n${i}`).join(", ")}`;
      countParams = words.flatMap((word) => [word, DISCOVERY_CANDIDATES_PER_WORD + 1]);
    }
    const filtered = conditions.sql.length > 0 ? `JOIN discovery_entries e ON e.id = m.entry_id WHERE ${conditions.sql.join(" AND ")}` : "";
    // One statement: the words' counts, then the page's matches (one more than asked: whether more follow) with
    // their entries, best first (a row of counts alone when nothing matched).
    const rows = await this.#read<SearchRow>(
      `SELECT k.*, p.entry FROM (${counts}) AS k LEFT JOIN (
         SELECT r.entry_id, r.score, r.payers, r.last_paid, x.entry FROM (
           SELECT m.entry_id, m.score, m.payers, m.last_paid FROM (${matches}) AS m ${filtered}
           ORDER BY m.score DESC, m.payers DESC, m.last_paid DESC, m.entry_id DESC LIMIT ? OFFSET ?
         ) AS r JOIN discovery_entries x ON x.id = r.entry_id
       ) AS p ON 1 = 1
       ORDER BY p.score DESC, p.payers DESC, p.last_paid DESC, p.entry_id DESC`,
      [...countParams, ...matchParams, ...conditions.params, request.limit + 1, request.offset],
    );
    const partial = payTo === undefined && words.some((_, i) => Number(rows[0]?.[`n${i}`] ?? 0) > DISCOVERY_CANDIDATES_PER_WORD);
    const texts = rows.flatMap((row) => (row.entry === null || row.entry === undefined ? [] : [row.entry]));
    const items = withinBytes(texts.slice(0, request.limit), request.maxBytes);
    return { items, more: texts.length > items.length, partial };
  }

  /** Catalog reads: off the event loop where the driver can (the embedded ledger's reader thread). */
  #read<R extends object = SqlRow>(sql: string, params: readonly SqlValue[]): Promise<R[]> {
    return this.#db.read ? this.#db.read<R>(sql, params) : this.#db.all<R>(sql, params);
  }

  /**
   * A page: the ids `select` ranks, then their entries (read a chunk at a time), until `limit` entries or
   * `maxBytes` of them (the first entry always); `more` when a ranked entry was left for the next page.
   */
  async #page(request: DiscoveryPageRequest, select: (limit: number, offset: number) => Promise<Array<Pick<EntryRow, "id">>>): Promise<{ items: string[]; more: boolean }> {
    // One more than wanted: whether anything follows the page.
    const ranked = (await select(request.limit + 1, request.offset)).map((row) => Number(row.id));
    const ids = ranked.slice(0, request.limit);
    const items: string[] = [];
    let bytes = 0;
    for (let start = 0; start < ids.length; start += PAGE_CHUNK) {
      const chunk = ids.slice(start, start + PAGE_CHUNK);
      const rows = await this.#read<Pick<EntryRow, "id" | "entry">>(`SELECT id, entry FROM discovery_entries WHERE id IN (${marks(chunk.length)})`, chunk);
      const found = new Map(rows.map((row) => [Number(row.id), row.entry]));
      for (const id of chunk) {
        const text = found.get(id);
        // Evicted between the two reads: left out.
        if (text === undefined) continue;
        if (items.length > 0 && bytes + text.length > request.maxBytes) return { items, more: true };
        items.push(text);
        bytes += text.length;
      }
    }
    return { items, more: ranked.length > request.limit };
  }

  /**
   * Takes out the entries with a way of paying on `network` (a CAIP-2 id), last paid at or after `paidFrom` (a block
   * time, ms) or all: a changed history of that chain. Gives their rows as they were, with their words and payers (to
   * keep aside, and bring back: catalog-restore.ts); the counts stay exact. Runs in the caller's transaction, which
   * holds {@link CATALOG_LOCK}. An entry's seller lists it again with its next settled payment.
   */
  async takeNetwork(tx: SqlExecutor, network: string, paidFrom?: number): Promise<Array<EntryRow & { words: string[]; payer_list: string[] }>> {
    const rows = await tx.all<EntryRow>(
      `SELECT * FROM discovery_entries WHERE id IN (SELECT entry_id FROM discovery_networks WHERE network = ?)${paidFrom === undefined ? "" : " AND last_paid >= ?"} ORDER BY id`,
      [network, ...(paidFrom === undefined ? [] : [paidFrom])],
    );
    const ids = rows.map((row) => Number(row.id));
    const of = async (table: string, column: string) => {
      const found = new Map<number, string[]>(ids.map((id) => [id, []]));
      for (let at = 0; at < ids.length; at += 500) {
        const chunk = ids.slice(at, at + 500);
        for (const row of await tx.all<{ entry_id: Int8; v: string }>(`SELECT entry_id, ${column} AS v FROM ${table} WHERE entry_id IN (${marks(chunk.length)})`, chunk)) {
          found.get(Number(row.entry_id))?.push(row.v);
        }
      }
      return found;
    };
    const [words, payers] = [await of("discovery_words", "word"), await of("discovery_payers", "payer")];
    await this.#delete(tx, ids);
    return rows.map((row) => ({ ...row, words: words.get(Number(row.id)) ?? [], payer_list: payers.get(Number(row.id)) ?? [] }));
  }

  /** Adds `delta` to the counts of one entry of `type` on `networks` (and on every network), in the caller's transaction. */
  adjustCounts(tx: SqlExecutor, type: string, networks: readonly string[], delta: number): Promise<void> {
    return this.#count(tx, type, networks, delta);
  }

  removeDiscoveryResource(resource: string, method?: string, payTo?: string): Promise<number> {
    return this.#db.transaction({ lock: LOCK }, async (tx) => {
      const clauses = ["resource = ?", ...(method !== undefined ? ["method = ?"] : []), ...(payTo !== undefined ? ["pay_to = ?"] : [])];
      const params = [resource, ...(method !== undefined ? [methodKey(method)] : []), ...(payTo !== undefined ? [lower(payTo)] : [])];
      const ids = await tx.all<Pick<EntryRow, "id">>(`SELECT id FROM discovery_entries WHERE ${clauses.join(" AND ")}`, params);
      return this.#delete(tx, ids.map((row) => Number(row.id)));
    });
  }
}
