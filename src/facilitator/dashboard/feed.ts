import { formatUnits, type Hex } from "viem";
import { canonicalNetwork, NETWORKS } from "../../protocol/networks.js";
import type { OutcomeRecord } from "../http/app.js";

/**
 * One verify or settle outcome as the dashboard shows it: the outcome record's own fields (its route, network, status,
 * payer and payee, outcome text and code, transaction, duration), with the feed's ids, the time, the amount in USDC.e
 * and what the receipt told. Carries nothing secret.
 */
export interface FeedRow extends Pick<OutcomeRecord, "route" | "network" | "status" | "payer" | "payee" | "outcome" | "code" | "txHash" | "durationMs"> {
  /** Stable per outcome: a later, enriched version of the row keeps it. */
  id: number;
  /** The feed event that last wrote this row (the SSE `id`); grows with every new or updated row. */
  rev: number;
  /** ISO time the outcome was answered. */
  time: string;
  /** The wire dialect of the request: `cronos` unless the outcome record says otherwise. */
  dialect: string;
  /** `valid` or `settled`; false for every refusal and fault. */
  ok: boolean;
  /** In USDC.e (the token's decimals applied), e.g. `0.25`; the record's is in base units. */
  amount?: string;
  /** Block of `txHash`, read from its receipt. */
  block?: number;
  /** Gas used by `txHash`, read from its receipt (decimal string). */
  gasUsed?: string;
}

/** What a transaction's receipt tells the feed. */
export interface ReceiptFacts {
  block: number;
  gasUsed: bigint;
  /** The recipient of the token transfer the transaction made, if it made one. */
  payee?: string;
}

/**
 * Where the feed's past is kept: the in-memory ring by default. The settlement ledger can stand
 * in here (rows rebuilt from its records), so the page reads it without knowing it.
 */
export interface FeedHistory {
  /** Rows written after feed event `after` (all kept rows when undefined), oldest write first. */
  since(after?: number): Promise<FeedRow[]>;
  /** Keeps a new row, or the newer version of one already kept. */
  keep(row: FeedRow): void;
}

/** Default byte budget of {@link MemoryFeedHistory}: the JSON of the kept rows, summed. */
export const FEED_HISTORY_BYTES = 1024 * 1024;

/**
 * The last `capacity` rows, in memory, and at most `maxBytes` of them (their JSON, summed): survives a
 * page reload, not a restart. Each row is bounded (its texts are clipped), so is the whole.
 */
export class MemoryFeedHistory implements FeedHistory {
  private readonly rows = new Map<number, { row: FeedRow; bytes: number }>();
  private total = 0;

  constructor(
    readonly capacity = 500,
    readonly maxBytes = FEED_HISTORY_BYTES,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
    if (!Number.isInteger(maxBytes) || maxBytes < 1) throw new RangeError(`maxBytes must be a positive integer, got ${maxBytes}`);
  }

  /** Bytes the kept rows take as JSON. */
  get bytes(): number {
    return this.total;
  }

  async since(after?: number): Promise<FeedRow[]> {
    const rows: FeedRow[] = [];
    for (const { row } of this.rows.values()) if (after === undefined || row.rev > after) rows.push(row);
    return rows.sort((a, b) => a.rev - b.rev);
  }

  keep(row: FeedRow): void {
    // A Map keeps insertion order: the oldest outcome is evicted first, an update keeps its place.
    const bytes = Buffer.byteLength(JSON.stringify(row));
    const previous = this.rows.get(row.id);
    this.total += bytes - (previous?.bytes ?? 0);
    this.rows.set(row.id, { row, bytes });
    while (this.rows.size > 1 && (this.rows.size > this.capacity || this.total > this.maxBytes)) {
      const [oldest, kept] = this.rows.entries().next().value!;
      this.rows.delete(oldest);
      this.total -= kept.bytes;
    }
  }
}

/** Options of {@link OutcomeFeed}. */
export interface OutcomeFeedOptions {
  history?: FeedHistory;
  /** Reads the receipt of a transaction named by an outcome; undefined when the network is not served. */
  receipt?: (network: string, txHash: Hex) => Promise<ReceiptFacts | undefined>;
  /** ISO time of an outcome; default the system clock. */
  now?: () => string;
}

/** A listener of the feed: called with every new or updated row, in `rev` order. */
export type FeedListener = (row: FeedRow) => void;

// Text from a request body (a network string, a reason naming it) is shown, so it is bounded.
const MAX_TEXT = 300;

/**
 * The live feed of verify and settle outcomes: turns each outcome record into a row, keeps it in
 * the history and tells the listeners (the SSE streams). A row naming a transaction is written
 * again once its receipt is read, with the block, the gas used and the payee.
 */
export class OutcomeFeed {
  private readonly history: FeedHistory;
  private readonly listeners = new Set<FeedListener>();
  private nextId = 0;
  private nextRev = 0;
  /** Names this feed's life: a stream resumed across a restart starts over instead of skipping rows. */
  readonly epoch = Date.now().toString(36);

  constructor(private readonly options: OutcomeFeedOptions = {}) {
    this.history = options.history ?? new MemoryFeedHistory();
  }

  /** Records one outcome (the facilitator's `onOutcome`). Returns once the row is published; enrichment follows. */
  record(outcome: Omit<OutcomeRecord, "dialect"> & { dialect?: string; payee?: string }): FeedRow {
    const network = clip(outcome.network);
    const row: FeedRow = this.publish({
      id: ++this.nextId,
      rev: 0,
      time: this.options.now?.() ?? new Date().toISOString(),
      route: outcome.route,
      dialect: outcome.dialect ?? "cronos",
      network,
      status: outcome.status,
      ok: outcome.code === "valid" || outcome.code === "settled",
      ...(outcome.payer ? { payer: outcome.payer } : {}),
      ...(outcome.payee ? { payee: outcome.payee } : {}),
      ...(outcome.amount !== undefined ? { amount: usdc(network, outcome.amount) } : {}),
      outcome: clip(outcome.outcome),
      code: outcome.code,
      ...(outcome.txHash ? { txHash: outcome.txHash } : {}),
      durationMs: Math.round(outcome.durationMs * 10) / 10,
    });
    if (row.txHash && this.options.receipt) void this.enrich(row, row.txHash as Hex);
    return row;
  }

  /**
   * Streams the rows written after feed event `after` (all kept rows when undefined), then every
   * later one, to `listener`, each exactly once and in order. Returns the function that stops it.
   * It holds every row it is given for the listener: an HTTP stream uses {@link FeedStream} instead,
   * which holds none for a client that does not read.
   */
  stream(after: number | undefined, listener: FeedListener): () => void {
    let last = after ?? 0;
    let queue: FeedRow[] | undefined = [];
    const deliver = (row: FeedRow) => {
      if (row.rev <= last) return;
      last = row.rev;
      listener(row);
    };
    // Subscribed before the history is read: a row written meanwhile waits in the queue.
    const unsubscribe = this.subscribe((row) => (queue ? queue.push(row) : deliver(row)));
    let stopped = false;
    void this.history
      .since(after)
      .catch(() => [] as FeedRow[])
      .then((rows) => {
        if (stopped) return;
        for (const row of rows) deliver(row);
        const waiting = queue ?? [];
        queue = undefined;
        for (const row of waiting) deliver(row);
      });
    return () => {
      stopped = true;
      unsubscribe();
    };
  }

  /** Calls `listener` with every row written from now on (no history). Returns the function that stops it. */
  subscribe(listener: FeedListener): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** The kept rows, oldest first. */
  rows(): Promise<FeedRow[]> {
    return this.history.since(undefined);
  }

  /** The kept rows written after feed event `after`, oldest write first: what a stream that fell behind reads to catch up. */
  since(after: number): Promise<FeedRow[]> {
    return this.history.since(after);
  }

  /** The last feed event written (0 before the first). */
  get lastRev(): number {
    return this.nextRev;
  }

  private publish(row: FeedRow): FeedRow {
    const written = { ...row, rev: ++this.nextRev };
    this.history.keep(written);
    for (const listener of this.listeners) listener(written);
    return written;
  }

  private async enrich(row: FeedRow, txHash: Hex): Promise<void> {
    let facts: ReceiptFacts | undefined;
    try {
      facts = await this.options.receipt!(row.network, txHash);
    } catch {
      // The row stands without block and gas; the answer itself was already given.
      return;
    }
    if (!facts) return;
    this.publish({ ...row, block: facts.block, gasUsed: facts.gasUsed.toString(), ...(row.payee || !facts.payee ? {} : { payee: facts.payee }) });
  }
}

function clip(text: string): string {
  return text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT)}…` : text;
}

/** Base units as USDC.e (6 decimals on both Cronos networks); kept as is when not a whole number. */
function usdc(network: string, amount: string): string {
  if (!/^\d{1,78}$/.test(amount)) return clip(amount);
  const canonical = canonicalNetwork(network);
  return formatUnits(BigInt(amount), canonical ? NETWORKS[canonical].tokenDecimals : 6);
}
