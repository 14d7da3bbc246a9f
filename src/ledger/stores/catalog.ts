/** One resource of the discovery catalog (x402 `bazaar`), as `GET …/discovery/resources` lists it. */
export interface DiscoveryEntry {
  /** The resource's canonical URL (origin and path). */
  resource: string;
  /** `http` or `mcp`. */
  type: string;
  x402Version: number;
  /** The payment requirements it was paid under, as the payer accepted them. */
  accepts: Array<Record<string, unknown>>;
  /** ISO 8601 time of the last payment that updated it. */
  lastUpdated: string;
  description?: string;
  mimeType?: string;
  /** The declaration as the payment carried it (`{bazaar: {info, schema}}`). */
  extensions?: Record<string, unknown>;
}

/**
 * A settled payment's catalog entry ({@link CatalogStore.recordDiscoveryPayment}): the listing the payment declared,
 * with the facts of the payment itself (its way of paying, payTo and time) taken from the settlement.
 */
export interface DiscoveryPayment {
  /** `accepts` holds the one way this payment paid; `lastUpdated` is the block's time. */
  entry: DiscoveryEntry;
  /** Who was paid (the receipt's `Transfer` to): the entry's owner. */
  payTo: string;
  /** Who paid (the receipt's `Transfer` from): counted once among the entry's distinct payers. */
  payer: string;
  /** The words search finds the entry by, distinct, lower case, best first (at most {@link DISCOVERY_MAX_WORDS}). */
  words: readonly string[];
}

/** Bounds of the catalog ({@link CatalogStore.recordDiscoveryPayment}): entries beyond them are evicted. */
export interface DiscoveryBounds {
  /** Entries in all (`CATALOG_MAX_ENTRIES`). */
  maxEntries: number;
  /** Entries of one payTo (`CATALOG_MAX_ENTRIES_PER_SELLER`). */
  maxEntriesPerSeller: number;
}

/** What {@link CatalogStore.recordDiscoveryPayment} did. */
export interface DiscoveryRecorded {
  /** Whether the entry was new (else an existing entry of the same payTo was updated). */
  created: boolean;
  /** Entries evicted to keep the bounds (possibly the new one itself). */
  evicted: number;
}

/** Distinct payers counted per entry: standing saturates here (and the payer rows kept per entry stop). */
export const DISCOVERY_MAX_PAYERS = 16;
/** Words of one entry that search indexes. */
export const DISCOVERY_MAX_WORDS = 64;
/** Longest word indexed (and searched), in characters. */
export const DISCOVERY_MAX_WORD_LENGTH = 64;
/** Distinct words of one search query. */
export const DISCOVERY_MAX_QUERY_WORDS = 8;
/** Entries one search reads per query word, the best first: what bounds a search's work at any catalog size. */
export const DISCOVERY_CANDIDATES_PER_WORD = 250;

/** Filters of {@link CatalogStore.listDiscoveryResources} and {@link CatalogStore.searchDiscoveryResources}. */
export interface DiscoveryFilter {
  type?: string;
  payTo?: string;
  scheme?: string;
  network?: string;
}

/** A page: at most `limit` entries and, past the first, no more than `maxBytes` of JSON. */
export interface DiscoveryPageRequest {
  filter?: DiscoveryFilter;
  limit: number;
  offset: number;
  maxBytes: number;
}

/** A page of the catalog: each item is an entry ({@link DiscoveryEntry}) as JSON text, served as stored. */
export interface DiscoveryPage {
  items: string[];
  /** Entries matching the filter in all. */
  total: number;
}

/** A page of search results, the best first. */
export interface DiscoverySearchPage {
  items: string[];
  /** Whether more results follow this page. */
  more: boolean;
  /** Whether some query word matched more entries than one search reads ({@link DISCOVERY_CANDIDATES_PER_WORD}). */
  partial: boolean;
}

/** The discovery catalog (x402 `bazaar`): the resources paid through this facilitator, written from settled payments. */
export interface CatalogStore {
  /**
   * Records a settled payment in the discovery catalog. The entry is keyed by resource URL, method
   * (`mcp:<toolName>` for a tool) AND payTo: only payments to an entry's own payTo create or change it; the
   * same URL paid to another payTo is another entry. An update keeps every way of paying (one per scheme and
   * network, the latest first), takes the payment's description and declaration, counts the payer among the
   * distinct payers (up to {@link DISCOVERY_MAX_PAYERS}) and keeps the latest payment's time. Then evicts
   * beyond `bounds`, the entries with the fewest distinct payers first and among them the least recently paid:
   * within the payTo over its own bound, then in all. Serialized across instances.
   */
  recordDiscoveryPayment(payment: DiscoveryPayment, bounds: DiscoveryBounds): Promise<DiscoveryRecorded>;
  /**
   * The catalog's entries that match `filter` (each field exact, but `payTo` case-insensitive and `network`
   * in either form, `eip155:338` or `cronos-testnet`), most recently paid first, a page of them and the total.
   */
  listDiscoveryResources(request: DiscoveryPageRequest): Promise<DiscoveryPage>;
  /**
   * The entries whose words include any of `words` (lower case, distinct, at most {@link DISCOVERY_MAX_QUERY_WORDS}),
   * filtered as {@link listDiscoveryResources} does: more of the words first, then more distinct payers, then the
   * most recently paid. Reads the best {@link DISCOVERY_CANDIDATES_PER_WORD} entries of each word (of the payTo's
   * entries with a `payTo` filter); `partial` says a word had more.
   */
  searchDiscoveryResources(request: DiscoveryPageRequest & { words: readonly string[] }): Promise<DiscoverySearchPage>;
  /**
   * Removes a resource from the catalog (an operator's decision): every entry of its URL, or `method`'s (an
   * HTTP method, or `mcp:<toolName>`), of every payTo or `payTo`'s; returns how many entries went.
   */
  removeDiscoveryResource(resource: string, method?: string, payTo?: string): Promise<number>;
}
