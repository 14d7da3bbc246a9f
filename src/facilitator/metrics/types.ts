// The facilitator's metrics as the rest of the facilitator calls them, and createMetrics' options.
import type { Registry } from "prom-client";
import type { RecoveryPath, WorkerLoss } from "../../chain/recovery-pool.js";
import type { RelayerEvent } from "../../chain/relayer/index.js";
import type { SettlementStore } from "../../ledger/types.js";
import type { NetworkName } from "../../protocol/networks.js";
import type { NetworkRuntime } from "../../settlement/runtime.js";
import type { VerifyStageClock } from "./stages.js";
import type { OutcomeRecord } from "../http/app.js";

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
  /**
   * A connection over its client's cap waits for a place (`queued`); a served one of its client was asked to
   * close after its answer (`retired`) or, idle, was closed (`yielded`) to make one; or it waited
   * CONNECTION_QUEUE_MS and was refused (`expired`).
   */
  connectionWaiting(listener: string, event: "queued" | "retired" | "yielded" | "expired"): void;
  /** An idle keep-alive connection closed to make room for a new one. */
  idleConnectionClosed(listener: string): void;
  /** A listener's connections, served and waiting, read when scraped. */
  watchConnections(listener: string, counts: () => { served: number; yielded: number; waiting: number }): void;
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
  /** `count` signatures recovered on `path` (the main thread, a worker, …). */
  signaturesRecovered(path: RecoveryPath, count: number): void;
  /** A recovery worker thread lost (and replaced). */
  recoveryWorkerLost(why: WorkerLoss): void;
  /** The recovery pool's workers and queue, read when scraped. */
  watchRecovery(state: () => { workers: number; ready: number; queued: number }): void;
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
  stages?: VerifyStageClock;
}
