// The dashboard's last hour, per network and per minute: what its charts draw. Fixed size: every array is
// allocated when the history is made, for the networks served, and a new minute reuses the slot of the
// minute an hour before it. Nothing a request carries makes it grow.
import type { NetworkName } from "../../protocol/networks.js";
import { networkOfAnyForm } from "../../protocol/x402v2.js";

/** Minutes the charts cover. */
export const CHART_MINUTES = 60;
/** What became of a verify or settle, as the charts count it: accepted, refused (the payment's fault), or a fault (503/500). */
export const OUTCOME_CLASSES = ["ok", "refused", "fault"] as const;
export type OutcomeClass = (typeof OUTCOME_CLASSES)[number];
const ROUTES = ["verify", "settle"] as const;
type ChartRoute = (typeof ROUTES)[number];

// Latency is kept as a histogram per minute: buckets growing by 2^(1/8) from 0.1 ms (the last one takes
// everything above 0.1 ms × 2^24, about 28 minutes). A quantile is read as its bucket's geometric middle:
// within 4.5 % of the true value, at a fixed cost per minute however many requests it had.
const LATENCY_FLOOR_MS = 0.1;
const STEPS_PER_OCTAVE = 8;
export const LATENCY_BUCKETS = 1 + 24 * STEPS_PER_OCTAVE;
/** The largest relative error of a latency quantile read from the histogram. */
export const LATENCY_RELATIVE_ERROR = 2 ** (1 / (2 * STEPS_PER_OCTAVE)) - 1;
/** Transactions remembered so that one read twice (a retried settle answered with the same hash) is counted once. */
export const SEEN_TRANSACTIONS = 1024;
const WEI_PER_CRO = 1e18;

/** The bucket a duration falls in. */
export function latencyBucket(ms: number): number {
  if (!(ms > LATENCY_FLOOR_MS)) return 0;
  return Math.min(LATENCY_BUCKETS - 1, Math.ceil(Math.log2(ms / LATENCY_FLOOR_MS) * STEPS_PER_OCTAVE));
}

/** The value a bucket stands for: its geometric middle (the floor for the first). */
export function latencyOfBucket(bucket: number): number {
  return bucket === 0 ? LATENCY_FLOOR_MS : LATENCY_FLOOR_MS * 2 ** ((bucket - 0.5) / STEPS_PER_OCTAVE);
}

/** The class of an outcome code (the metrics' bounded `code`) and its HTTP status. */
export function outcomeClass(code: string, status: number): OutcomeClass {
  if (code === "valid" || code === "settled") return "ok";
  return code === "fault" || status >= 500 ? "fault" : "refused";
}

/** One route's series over the hour. */
export interface RouteSeries {
  ok: number[];
  refused?: number[];
  fault?: number[];
  /** Milliseconds; null in a minute without an answer. */
  p50?: Array<number | null>;
  p99?: Array<number | null>;
}

/** One network's series over the hour, minute by minute, oldest first. */
export interface NetworkSeries {
  network: NetworkName;
  /** Absent from the settled-only view (API keys configured, none sent). */
  verify?: RouteSeries;
  settle: RouteSeries;
  /** Gas used by the settle transactions whose receipts were read in each minute. */
  gasUsed: number[];
  /** What they cost the relayer: gas used × effective gas price, in CRO. */
  feeCro: number[];
  /** The relayers' balance (all keys) as last seen by that minute, in CRO; null before the first reading. */
  balanceCro: Array<number | null>;
  /** That balance in settles at {@link feePerSettleCro}; null while either is unknown. */
  runwaySettles: Array<number | null>;
  /** The average cost of a settle transaction over the hour (the latest one read when the hour had none). */
  feePerSettleCro: number | null;
}

/** The body of `GET /dashboard/api/charts`. */
export interface ChartsView {
  /** The start of each minute, in Unix seconds, oldest first ({@link CHART_MINUTES} of them, the last the current one). */
  minutes: number[];
  /** `all`, or `settled`: the view of a request without an API key where keys are configured (what the chain shows). */
  scope: "all" | "settled";
  networks: NetworkSeries[];
}

/** One network's hour: typed arrays allocated once, one slot per minute. */
class NetworkHour {
  /** The minute (since the epoch) each slot holds; -1 for none yet. */
  readonly minute = new Float64Array(CHART_MINUTES).fill(-1);
  /** Per slot, per route, per class. */
  readonly counts = new Uint32Array(CHART_MINUTES * ROUTES.length * OUTCOME_CLASSES.length);
  /** Per slot, per route, per latency bucket. */
  readonly latency = new Uint32Array(CHART_MINUTES * ROUTES.length * LATENCY_BUCKETS);
  readonly gasUsed = new Float64Array(CHART_MINUTES);
  readonly feeWei = new Float64Array(CHART_MINUTES);
  readonly transactions = new Uint32Array(CHART_MINUTES);
  /** The last balance seen in the slot's minute; NaN for none. */
  readonly balanceWei = new Float64Array(CHART_MINUTES).fill(Number.NaN);
  /** The latest balance reading of a minute no slot holds any more: where the hour's line starts. */
  earlier = { minute: -1, wei: Number.NaN };
  /** The latest transaction's cost: the runway's divisor in an hour without one. */
  lastFeeWei = Number.NaN;

  get bytes(): number {
    return [this.minute, this.counts, this.latency, this.gasUsed, this.feeWei, this.transactions, this.balanceWei].reduce((sum, array) => sum + array.byteLength, 0);
  }

  /** The slot of `minute`, emptied when it held an older minute; undefined for a minute older than the slot's. */
  slot(minute: number): number | undefined {
    const index = minute % CHART_MINUTES;
    const held = this.minute[index]!;
    if (held === minute) return index;
    if (held > minute) return undefined;
    if (held >= 0 && !Number.isNaN(this.balanceWei[index]!) && held > this.earlier.minute) this.earlier = { minute: held, wei: this.balanceWei[index]! };
    this.minute[index] = minute;
    const counts = ROUTES.length * OUTCOME_CLASSES.length;
    this.counts.fill(0, index * counts, (index + 1) * counts);
    const buckets = ROUTES.length * LATENCY_BUCKETS;
    this.latency.fill(0, index * buckets, (index + 1) * buckets);
    this.gasUsed[index] = 0;
    this.feeWei[index] = 0;
    this.transactions[index] = 0;
    this.balanceWei[index] = Number.NaN;
    return index;
  }
}

/** Options of {@link MinuteHistory}. */
export interface MinuteHistoryOptions {
  /** The networks served: the only ones kept (an outcome naming another is not charted). */
  networks: readonly NetworkName[];
  /** Wall clock in ms; default `Date.now`. */
  now?: () => number;
}

/**
 * The last {@link CHART_MINUTES} minutes of each served network: verifies and settles by outcome class,
 * their latency p50/p99, the gas the settle transactions used and cost, and the relayers' balance with
 * its runway in settles. Its size is fixed when it is made (see {@link bytes}).
 */
export class MinuteHistory {
  readonly #hours = new Map<NetworkName, NetworkHour>();
  readonly #now: () => number;
  readonly #seen = new Set<string>();
  /** Grows with every change: a view is built once per change and minute, however many pages ask. */
  #version = 0;
  readonly #views = new Map<ChartsView["scope"], { key: string; view: ChartsView }>();

  constructor(options: MinuteHistoryOptions) {
    this.#now = options.now ?? Date.now;
    for (const network of options.networks) this.#hours.set(network, new NetworkHour());
  }

  /** Bytes of the arrays it holds: fixed from its making, whatever it is told. */
  get bytes(): number {
    return [...this.#hours.values()].reduce((sum, hour) => sum + hour.bytes, 0);
  }

  /** Transactions remembered for the double-count check (at most {@link SEEN_TRANSACTIONS}). */
  get seenTransactions(): number {
    return this.#seen.size;
  }

  /** Counts one verify or settle answer. False when its network is not served here. */
  outcome(outcome: { route: ChartRoute; network: string; code: string; status: number; durationMs: number }): boolean {
    const at = this.#at(outcome.network);
    if (!at) return false;
    const { hour, index } = at;
    const route = ROUTES.indexOf(outcome.route);
    if (route < 0) return false;
    const kind = OUTCOME_CLASSES.indexOf(outcomeClass(outcome.code, outcome.status));
    hour.counts[(index * ROUTES.length + route) * OUTCOME_CLASSES.length + kind]! += 1;
    hour.latency[(index * ROUTES.length + route) * LATENCY_BUCKETS + latencyBucket(outcome.durationMs)]! += 1;
    this.#version++;
    return true;
  }

  /** A settle transaction's receipt: its gas and what it cost. Counted once per hash. */
  transaction(network: string, txHash: string, gasUsed: bigint, effectiveGasPrice: bigint | undefined): boolean {
    const key = txHash.toLowerCase();
    if (this.#seen.has(key)) return false;
    const at = this.#at(network);
    if (!at) return false;
    this.#seen.add(key);
    if (this.#seen.size > SEEN_TRANSACTIONS) this.#seen.delete(this.#seen.values().next().value!);
    const { hour, index } = at;
    hour.gasUsed[index]! += Number(gasUsed);
    hour.transactions[index]! += 1;
    if (effectiveGasPrice !== undefined) {
      const fee = Number(gasUsed * effectiveGasPrice);
      hour.feeWei[index]! += fee;
      hour.lastFeeWei = fee;
    }
    this.#version++;
    return true;
  }

  /** The relayers' balance on `network` now (all keys, in wei). */
  balance(network: string, wei: bigint): boolean {
    const at = this.#at(network);
    if (!at) return false;
    at.hour.balanceWei[at.index] = Number(wei);
    this.#version++;
    return true;
  }

  /** The hour as the charts draw it. `scope: "settled"` leaves out what the chain does not show (verifies, refusals, faults, latency). */
  view(scope: ChartsView["scope"] = "all"): ChartsView {
    const current = Math.floor(this.#now() / 60_000);
    const key = `${this.#version}:${current}`;
    const cached = this.#views.get(scope);
    if (cached?.key === key) return cached.view;
    const minutes = Array.from({ length: CHART_MINUTES }, (_, i) => current - CHART_MINUTES + 1 + i);
    const view: ChartsView = {
      minutes: minutes.map((minute) => minute * 60),
      scope,
      networks: [...this.#hours].map(([network, hour]) => seriesOf(network, hour, minutes, scope)),
    };
    this.#views.set(scope, { key, view });
    return view;
  }

  #at(network: string): { hour: NetworkHour; index: number } | undefined {
    const name = networkOfAnyForm(network);
    const hour = name && this.#hours.get(name);
    if (!hour) return undefined;
    const index = hour.slot(Math.floor(this.#now() / 60_000));
    return index === undefined ? undefined : { hour, index };
  }
}

/** The series of one network over `minutes` (oldest first). */
function seriesOf(network: NetworkName, hour: NetworkHour, minutes: number[], scope: ChartsView["scope"]): NetworkSeries {
  const held = minutes.map((minute) => (hour.minute[minute % CHART_MINUTES] === minute ? minute % CHART_MINUTES : undefined));
  const count = (route: number, kind: number) =>
    held.map((index) => (index === undefined ? 0 : hour.counts[(index * ROUTES.length + route) * OUTCOME_CLASSES.length + kind]!));
  const quantile = (route: number, q: number) =>
    held.map((index) => (index === undefined ? null : latencyQuantile(hour.latency.subarray((index * ROUTES.length + route) * LATENCY_BUCKETS, (index * ROUTES.length + route + 1) * LATENCY_BUCKETS), q)));
  const routeSeries = (route: number): RouteSeries => ({
    ok: count(route, 0),
    refused: count(route, 1),
    fault: count(route, 2),
    p50: quantile(route, 0.5),
    p99: quantile(route, 0.99),
  });
  const sum = (array: Float64Array | Uint32Array): number => held.reduce<number>((total, index) => total + (index === undefined ? 0 : array[index]!), 0);
  const transactions = sum(hour.transactions);
  const feeWei = transactions > 0 ? sum(hour.feeWei) / transactions : hour.lastFeeWei;
  const balanceWei = balanceLine(hour, minutes);
  return {
    network,
    ...(scope === "all" ? { verify: routeSeries(0) } : {}),
    settle: scope === "all" ? routeSeries(1) : { ok: count(1, 0) },
    gasUsed: held.map((index) => (index === undefined ? 0 : hour.gasUsed[index]!)),
    feeCro: held.map((index) => (index === undefined ? 0 : hour.feeWei[index]! / WEI_PER_CRO)),
    balanceCro: balanceWei.map((wei) => (wei === null ? null : wei / WEI_PER_CRO)),
    runwaySettles: balanceWei.map((wei) => (wei === null || !(feeWei > 0) ? null : Math.floor(wei / feeWei))),
    feePerSettleCro: feeWei > 0 ? feeWei / WEI_PER_CRO : null,
  };
}

/** The balance as known at each minute: its reading there, else the one before it carried on. */
function balanceLine(hour: NetworkHour, minutes: number[]): Array<number | null> {
  // Where the line starts: the latest reading of a minute before the hour (evicted, or a stale slot).
  let carried = hour.earlier;
  for (let index = 0; index < CHART_MINUTES; index++) {
    const minute = hour.minute[index]!;
    if (minute >= 0 && minute < minutes[0]! && minute > carried.minute && !Number.isNaN(hour.balanceWei[index]!)) carried = { minute, wei: hour.balanceWei[index]! };
  }
  let wei: number | null = Number.isNaN(carried.wei) ? null : carried.wei;
  return minutes.map((minute) => {
    const index = minute % CHART_MINUTES;
    if (hour.minute[index] === minute && !Number.isNaN(hour.balanceWei[index]!)) wei = hour.balanceWei[index]!;
    return wei;
  });
}

/** The `q` quantile of a latency histogram (ms, rounded to 0.1), or null when it is empty. */
export function latencyQuantile(buckets: ArrayLike<number>, q: number): number | null {
  let total = 0;
  for (let i = 0; i < buckets.length; i++) total += buckets[i]!;
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (let i = 0; i < buckets.length; i++) {
    seen += buckets[i]!;
    if (seen >= rank) return Math.round(latencyOfBucket(i) * 10) / 10;
  }
  return null;
}
