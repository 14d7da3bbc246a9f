import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { RelayerEvent } from "../chain/relayer/index.js";
import type { NetworkRuntime } from "../settlement/runtime.js";
import type { IndexStatus } from "../state/index.js";
import type { OutcomeRecord } from "./http/app.js";
import { memoizeFor } from "./memoize.js";
import type { PendingSummary, SettlementStore } from "../ledger/types.js";
import type { NetworkName } from "../protocol/networks.js";
import { networkOfAnyForm } from "../protocol/x402v2.js";
import { mainThreadMicros, VERIFY_STAGES, type StageClock } from "../settlement/stages.js";

/** One relayer as the gauges show it; a value the RPC did not give is absent. */
interface RelayerReading {
  network: NetworkName;
  relayer: string;
  nonceGap?: number;
  balanceWei?: number;
}

/** The facilitator's Prometheus metrics, on a registry of its own (several instances per process stay apart). */
export interface FacilitatorMetrics {
  registry: Registry;
  /** One verify/settle answer. */
  outcome(record: OutcomeRecord): void;
  /** Any HTTP answer. */
  request(route: string, status: number): void;
  /** A request refused by a limit: `by` whose quota ran out (client IP, API key, payer). */
  rateLimited(route: string, by: string): void;
  /** A connection refused on arrival (503, closed): MAX_CONNECTIONS were open (`server`) or its client held MAX_CONNECTIONS_PER_CLIENT and four times as many waiting (`client`). */
  connectionDropped(listener: string, reason: "server" | "client"): void;
  /** A connection over its client's cap waits for a place (`queued`), or a served one was asked to close after its answer to make one (`retired`). */
  connectionWaiting(listener: string, event: "queued" | "retired"): void;
  /** An idle keep-alive connection closed to make room for a new one. */
  idleConnectionClosed(listener: string): void;
  /** A listener's connections, served and waiting, read when scraped. */
  watchConnections(listener: string, counts: () => { served: number; waiting: number }): void;
  /** A shared rate-limit store's count was not used for a request: it was slow (`slow`) or failed (`error`); this instance's own count judged it. */
  rateLimitStoreFallback(limiter: string, reason: "slow" | "error"): void;
  /** A dashboard event stream opened, was refused (too many open), or ended (`client`, `stalled`, `lifetime`, `shutdown`). */
  dashboardStream(event: "opened" | "refused" | "client" | "stalled" | "lifetime" | "shutdown"): void;
  rpcError(network: string): void;
  confirmationWait(network: string, seconds: number): void;
  /** Gas the relayer paid for a settlement that reverted on chain. */
  revertedGas(network: string, gas: bigint): void;
  /** Relayer gauges are read from the chain when scraped, at most once per `cacheMs`. */
  watchRelayers(networks: ReadonlyMap<NetworkName, NetworkRuntime>): void;
  /** Ledger gauges (settlements pending, the oldest's age) are read from the ledger when scraped. */
  watchLedger(ledger: Pick<SettlementStore, "pendingSummary">): void;
  /** The reconciler moved a row (settled, reverted, failed, rebroadcast, requeued, abandoned). */
  reconcilerAction(action: string): void;
  /** This instance took (`acquired`) or gave up (`lost`) a relayer key's lease. */
  leaseChange(change: "acquired" | "lost"): void;
  /** With several RPC URLs: whether `endpoint` (its redacted label) answered its last ranking ping. */
  rpcEndpointUp(network: string, endpoint: string, up: boolean): void;
  /** What the relayer did to keep a transaction moving (replaced, dropped, gap filled, withheld at the cap). */
  relayerEvent(network: string, event: RelayerEvent): void;
  /** The token state index could not follow the chain (an RPC fault, or answers that do not fit together). */
  indexFollowError(network: string, kind: "rpc" | "inconsistent"): void;
  /** The chain's history changed under the token state index: it went back (`rewind`) or started over (`rebuild`). */
  indexHistoryChange(network: string, kind: "rewind" | "rebuild"): void;
  /** Rows of another history of the chain the ledger set aside (never served again), by kind. */
  rowsSetAside(network: string, kind: string, count: number): void;
  /** Where a verify's chain state came from: the token state index, or reads of the chain. */
  verifyStateSource(network: string, source: "index" | "chain"): void;
}

/** Options of {@link createMetrics}. */
export interface CreateMetricsOptions {
  /** Also export Node's process metrics. */
  defaults?: boolean;
  /** Relayer gauges (two RPC reads per relayer) are shared by all scrapes for this long; default 5 s. */
  cacheMs?: number;
  /** The clock of that cache (ms); default `Date.now`. */
  now?: () => number;
  /** Verify's stage timings (`METRICS_VERIFY_STAGES`), exported when given. */
  stages?: StageClock;
}

/** Creates the metrics on a registry of their own. */
export function createMetrics(options: CreateMetricsOptions = {}): FacilitatorMetrics {
  const registry = new Registry();
  if (options.defaults) collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: "x402_http_requests_total",
    help: "HTTP requests by route and status",
    labelNames: ["route", "status"],
    registers: [registry],
  });
  const outcomes = new Counter({
    name: "x402_outcomes_total",
    help: "verify and settle answers by network, outcome code and dialect (cronos or x402v2)",
    labelNames: ["route", "network", "outcome", "dialect"],
    registers: [registry],
  });
  const latency = new Histogram({
    name: "x402_request_duration_seconds",
    help: "verify and settle latency",
    labelNames: ["route"],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [registry],
  });
  const confirmations = new Histogram({
    name: "x402_settle_confirmation_seconds",
    help: "time from sending a settle transaction to its confirmed receipt",
    labelNames: ["network"],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120],
    registers: [registry],
  });
  const rpcErrors = new Counter({ name: "x402_rpc_errors_total", help: "RPC faults by network", labelNames: ["network"], registers: [registry] });
  const reverted = new Counter({
    name: "x402_settle_reverted_gas_total",
    help: "gas the relayer paid for settlements that reverted on chain",
    labelNames: ["network"],
    registers: [registry],
  });
  const limited = new Counter({
    name: "x402_rate_limited_total",
    help: "requests refused by a rate limit, by route and whose quota ran out (ip, key, payer)",
    labelNames: ["route", "by"],
    registers: [registry],
  });
  const dropped = new Counter({
    name: "x402_http_connections_dropped_total",
    help: "connections refused on arrival (answered 503 and closed, never reset), by reason: MAX_CONNECTIONS were open (server) or their client held MAX_CONNECTIONS_PER_CLIENT and four times as many waiting (client)",
    labelNames: ["listener", "reason"],
    registers: [registry],
  });
  const waitingConnections = new Counter({
    name: "x402_http_connections_waiting_total",
    help: "connections over their client's MAX_CONNECTIONS_PER_CLIENT that waited for a place (queued), and served connections asked to close after their answer to make one (retired)",
    labelNames: ["listener", "event"],
    registers: [registry],
  });
  const listeners = new Map<string, () => { served: number; waiting: number }>();
  new Gauge({
    name: "x402_http_connections",
    help: "connections held now, by listener and state: served (handed to HTTP) or waiting (over their client's MAX_CONNECTIONS_PER_CLIENT, for a place)",
    labelNames: ["listener", "state"],
    registers: [registry],
    collect() {
      for (const [listener, counts] of listeners) {
        const { served, waiting } = counts();
        this.set({ listener, state: "served" }, served);
        this.set({ listener, state: "waiting" }, waiting);
      }
    },
  });
  const idleClosed = new Counter({
    name: "x402_http_idle_connections_closed_total",
    help: "idle keep-alive connections closed to make room for new ones (near MAX_CONNECTIONS, or their client at its cap)",
    labelNames: ["listener"],
    registers: [registry],
  });
  const storeFallbacks = new Counter({
    name: "x402_rate_limit_store_fallbacks_total",
    help: "requests judged by this instance's own rate-limit count because the shared store (the database) did not answer within RATE_LIMIT_STORE_WAIT_MS (slow) or failed (error)",
    labelNames: ["limiter", "reason"],
    registers: [registry],
  });
  const streamsOpen = new Gauge({ name: "x402_dashboard_streams_open", help: "dashboard event streams open now", registers: [registry] });
  const streamsEnded = new Counter({
    name: "x402_dashboard_streams_total",
    help: "dashboard event streams by what happened: refused (too many open), or ended because the client left (client), read nothing for DASHBOARD_STREAM_STALL_SECONDS (stalled), lived DASHBOARD_STREAM_MAX_SECONDS (lifetime) or the facilitator stopped (shutdown)",
    labelNames: ["event"],
    registers: [registry],
  });
  const reconcilerActions = new Counter({
    name: "x402_reconciler_actions_total",
    help: "settlements the reconciler moved, by action",
    labelNames: ["action"],
    registers: [registry],
  });
  const leaseChanges = new Counter({
    name: "x402_relayer_lease_changes_total",
    help: "relayer key leases this instance acquired or lost",
    labelNames: ["change"],
    registers: [registry],
  });
  let ledger: Pick<SettlementStore, "pendingSummary"> | undefined;
  // Both gauges share one ledger read per `cacheMs`, however often `/metrics` is scraped.
  const summary = memoizeFor(options.cacheMs ?? 5_000, (): Promise<PendingSummary | undefined> =>
    (ledger?.pendingSummary() ?? Promise.resolve(undefined)).catch(() => undefined),
  );
  new Gauge({
    name: "x402_ledger_pending_settlements",
    help: "settlements claimed or sent, not yet settled or failed (all instances)",
    registers: [registry],
    async collect() {
      const read = await summary();
      if (read) this.set(read.count);
    },
  });
  new Gauge({
    name: "x402_ledger_oldest_pending_seconds",
    help: "age of the oldest settlement still pending (0 when none)",
    registers: [registry],
    async collect() {
      const read = await summary();
      if (read) this.set(read.oldestCreatedAt === undefined ? 0 : Math.max(0, (Date.now() - read.oldestCreatedAt) / 1000));
    },
  });
  const replacements = new Counter({
    name: "x402_relayer_replacements_total",
    help: "transactions sent again at the same nonce with higher fees (not mined within REPLACE_AFTER_SECONDS)",
    labelNames: ["network"],
    registers: [registry],
  });
  const drops = new Counter({
    name: "x402_relayer_drops_detected_total",
    help: "transactions the node no longer knew before they were mined (dropped, or the node restarted)",
    labelNames: ["network"],
    registers: [registry],
  });
  const rebroadcasts = new Counter({
    name: "x402_relayer_rebroadcasts_total",
    help: "dropped transactions broadcast again as signed",
    labelNames: ["network"],
    registers: [registry],
  });
  const gaps = new Counter({
    name: "x402_relayer_nonce_gaps_filled_total",
    help: "missing nonces below waiting transactions, filled by the missing transaction (resend) or a zero-value self-transfer",
    labelNames: ["network", "by"],
    registers: [registry],
  });
  const capped = new Counter({
    name: "x402_relayer_replacements_capped_total",
    help: "replacements withheld because the network needed more than MAX_FEE_PER_GAS_GWEI (the transaction kept its price)",
    labelNames: ["network"],
    registers: [registry],
  });
  /** A gauge per network, read from the runtimes (memory, no RPC) when scraped; a network without a value is left out. */
  const networkGauge = (name: string, help: string, value: (runtime: NetworkRuntime) => bigint | number | undefined) =>
    new Gauge({
      name,
      help,
      labelNames: ["network"],
      registers: [registry],
      collect() {
        this.reset();
        for (const runtime of runtimes.values()) {
          const v = value(runtime);
          if (v !== undefined) this.set({ network: runtime.config.network }, Number(v));
        }
      },
    });
  const feeGauge = (name: string, help: string, value: (fees: ReturnType<NetworkRuntime["relayer"]["feeStatus"]>) => bigint | undefined) =>
    networkGauge(name, help, (runtime) => value(runtime.relayer.feeStatus()));
  feeGauge("x402_network_fee_per_gas_wei", "what the network asked per gas at the relayer's last fee quote (base fee plus tip, or the gas price)", (fees) => fees.neededWei);
  feeGauge("x402_max_fee_per_gas_wei", "MAX_FEE_PER_GAS_GWEI in wei: nothing is sent above it", (fees) => fees.capWei);
  const endpointUp = new Gauge({
    name: "x402_rpc_endpoint_up",
    help: "with several RPC URLs per network: 1 when the URL answered its last ranking ping, else 0",
    labelNames: ["network", "endpoint"],
    registers: [registry],
  });
  let runtimes: ReadonlyMap<NetworkName, NetworkRuntime> = new Map();
  // Every scrape within cacheMs shares one read of every relayer (a scrape flood is no RPC flood).
  const readRelayers = memoizeFor(
    options.cacheMs ?? 5_000,
    () =>
      Promise.all(
        [...runtimes.values()].flatMap((runtime) =>
          runtime.relayer.status().map(async ({ address, localNonce }): Promise<RelayerReading> => {
            const network = runtime.config.network;
            const reading: RelayerReading = { network, relayer: address };
            const [nonce, balance] = await Promise.allSettled([
              localNonce === undefined ? Promise.resolve(undefined) : runtime.client.getTransactionCount({ address, blockTag: "latest" }),
              runtime.client.getBalance({ address }),
            ]);
            if (nonce.status === "fulfilled" && nonce.value !== undefined) reading.nonceGap = localNonce! - nonce.value;
            if (balance.status === "fulfilled") reading.balanceWei = Number(balance.value);
            if (nonce.status === "rejected" || balance.status === "rejected") rpcErrors.inc({ network });
            return reading;
          }),
        ),
      ),
    options.now,
  );
  const relayerGauge = (name: string, help: string, value: (reading: RelayerReading) => number | undefined) =>
    new Gauge({
      name,
      help,
      labelNames: ["network", "relayer"],
      registers: [registry],
      async collect() {
        this.reset();
        for (const reading of await readRelayers()) {
          const v = value(reading);
          if (v !== undefined) this.set({ network: reading.network, relayer: reading.relayer }, v);
        }
      },
    });
  relayerGauge(
    "x402_relayer_nonce_gap",
    "relayer transactions handed a nonce but not yet mined (local next nonce - chain latest nonce)",
    (reading) => reading.nonceGap,
  );
  relayerGauge("x402_relayer_balance_wei", "relayer native gas balance", (reading) => reading.balanceWei);
  // The token state index, read from memory when scraped.
  const indexGauge = (name: string, help: string, value: (status: IndexStatus) => number | undefined) =>
    networkGauge(name, help, (runtime) => runtime.index && value(runtime.index.status()));
  indexGauge("x402_state_index_following", "1 while the token state index is at the chain's head and answers verify, else 0", (status) => (status.state === "following" ? 1 : 0));
  indexGauge("x402_state_index_block", "the block the token state index is true at", (status) => status.block);
  indexGauge("x402_state_index_lag_blocks", "blocks the chain has that the token state index has not read yet", (status) =>
    status.block === undefined || status.chainBlock === undefined ? undefined : Math.max(0, status.chainBlock - status.block),
  );
  indexGauge("x402_state_index_confirmed_age_seconds", "seconds since the token state index last confirmed it is at the chain's head", (status) =>
    status.confirmedMsAgo === undefined ? undefined : status.confirmedMsAgo / 1000,
  );
  indexGauge("x402_state_index_backfill_block", "the block the nonce backfill has reached", (status) => status.backfill.throughBlock);
  indexGauge("x402_state_index_backfill_target_block", "the block the nonce backfill must reach (where the index started following)", (status) => status.backfill.targetBlock);
  const indexErrors = new Counter({
    name: "x402_state_index_follow_errors_total",
    help: "times the token state index could not follow the chain, by kind (rpc: a fault; inconsistent: answers that do not fit together)",
    labelNames: ["network", "kind"],
    registers: [registry],
  });
  const indexHistoryChanges = new Counter({
    name: "x402_state_index_history_changes_total",
    help: "times the chain's history changed under the token state index: rewind (back to a block both histories share), rebuild (started over)",
    labelNames: ["network", "kind"],
    registers: [registry],
  });
  const setAside = new Counter({
    name: "x402_ledger_rows_set_aside_total",
    help: "ledger rows of another history of the chain (a local chain restarted or reverted) set aside, never served again, by kind",
    labelNames: ["network", "kind"],
    registers: [registry],
  });
  if (options.stages) watchStages(registry, options.stages);
  const verifySources = new Counter({
    name: "x402_verify_state_source_total",
    help: "verify checks by where their chain state came from: the token state index, or reads of the chain",
    labelNames: ["network", "source"],
    registers: [registry],
  });
  // Each answer's series, found once per label set (prom-client hashes a labels object on every call).
  const outcomeSeries = seriesOf((route: string, network: string, outcome: string, dialect: string) => outcomes.labels({ route, network, outcome, dialect }));
  const latencySeries = seriesOf((route: string) => latency.labels({ route }));
  const requestSeries = seriesOf((route: string, status: number) => requests.labels({ route, status: String(status) }));
  return {
    registry,
    outcome(record) {
      // The network label is bounded: a caller's unknown network string counts as "other".
      const network = networkOfAnyForm(record.network) ?? "other";
      outcomeSeries(record.route, network, record.code, record.dialect).inc();
      latencySeries(record.route).observe(record.durationMs / 1000);
    },
    request(route, status) {
      requestSeries(route, status).inc();
    },
    rateLimited(route, by) {
      limited.inc({ route, by });
    },
    connectionDropped(listener, reason) {
      dropped.inc({ listener, reason });
    },
    watchConnections(listener, counts) {
      listeners.set(listener, counts);
    },
    connectionWaiting(listener, event) {
      waitingConnections.inc({ listener, event });
    },
    idleConnectionClosed(listener) {
      idleClosed.inc({ listener });
    },
    rateLimitStoreFallback(limiter, reason) {
      storeFallbacks.inc({ limiter, reason });
    },
    dashboardStream(event) {
      if (event === "opened") streamsOpen.inc();
      else if (event !== "refused") streamsOpen.dec();
      if (event !== "opened") streamsEnded.inc({ event });
    },
    rpcError(network) {
      rpcErrors.inc({ network });
    },
    confirmationWait(network, seconds) {
      confirmations.observe({ network }, seconds);
    },
    revertedGas(network, gas) {
      reverted.inc({ network }, Number(gas));
    },
    watchRelayers(networks) {
      runtimes = networks;
    },
    watchLedger(watched) {
      ledger = watched;
    },
    reconcilerAction(action) {
      reconcilerActions.inc({ action });
    },
    leaseChange(change) {
      leaseChanges.inc({ change });
    },
    rpcEndpointUp(network, endpoint, up) {
      endpointUp.set({ network, endpoint }, up ? 1 : 0);
    },
    relayerEvent(network, event) {
      if (event.kind === "replaced") replacements.inc({ network });
      else if (event.kind === "dropped") drops.inc({ network });
      else if (event.kind === "rebroadcast") rebroadcasts.inc({ network });
      else if (event.kind === "gapFilled") gaps.inc({ network, by: event.by === "resend" ? "resend" : "self-transfer" });
      else if (event.kind === "capped") capped.inc({ network });
      else rpcErrors.inc({ network });
    },
    indexFollowError(network, kind) {
      indexErrors.inc({ network, kind });
    },
    indexHistoryChange(network, kind) {
      indexHistoryChanges.inc({ network, kind });
    },
    rowsSetAside(network, kind, count) {
      if (count > 0) setAside.inc({ network, kind }, count);
    },
    verifyStateSource(network, source) {
      verifySources.inc({ network, source });
    },
  };
}

/** Label sets kept at most per metric: every label is bounded already; this bounds the memo itself. */
const MAX_SERIES = 1_000;

/** `create`'s answer per label values, memoized (up to {@link MAX_SERIES} sets, then created afresh each time). */
function seriesOf<A extends Array<string | number>, S>(create: (...labels: A) => S): (...labels: A) => S {
  const known = new Map<string, S>();
  return (...labels) => {
    const key = labels.join("\u0000");
    let series = known.get(key);
    if (series === undefined) {
      series = create(...labels);
      if (known.size < MAX_SERIES) known.set(key, series);
    }
    return series;
  };
}

/**
 * The verify budget as gauges, over the window since the previous scrape (each scrape starts a new one:
 * for the bench, which scrapes before and after a run): microseconds per verify by stage, the verifies
 * answered and those whose state read waited; and the main thread's CPU time since start.
 */
function watchStages(registry: Registry, clock: StageClock): void {
  let window: ReturnType<StageClock["take"]> | undefined;
  // The gauges of one scrape read one window.
  const taken = () => (window ??= clock.take());
  new Gauge({
    name: "x402_verify_stage_microseconds",
    help: "microseconds per verify spent in each stage since the previous scrape (METRICS_VERIFY_STAGES; trimmed mean of the stage's samples)",
    labelNames: ["stage"],
    registers: [registry],
    collect() {
      const { micros } = taken();
      for (const stage of VERIFY_STAGES) this.set({ stage }, micros[stage]);
    },
  });
  new Gauge({
    name: "x402_verify_stage_verifies",
    help: "verify requests answered since the previous scrape (METRICS_VERIFY_STAGES); `waited`: those whose state read waited on I/O",
    labelNames: ["kind"],
    registers: [registry],
    collect() {
      const { verifies, waited } = taken();
      this.set({ kind: "answered" }, verifies);
      this.set({ kind: "waited" }, waited);
      window = undefined;
    },
  });
  new Gauge({
    name: "x402_main_thread_cpu_microseconds",
    help: "CPU time of the main thread (the event loop) since start",
    registers: [registry],
    collect() {
      this.set(mainThreadMicros());
    },
  });
}
