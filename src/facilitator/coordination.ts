import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Tracer } from "@opentelemetry/api";
import { LeaseKeeper } from "../ledger/leases.js";
import { openLedger } from "../ledger/open.js";
import { LedgerRateLimitStore } from "../ledger/rate-limit-store.js";
import { tracedLedger } from "../ledger/traced.js";
import { Reconciler } from "../settlement/reconciler.js";
import type { Ledger } from "../ledger/types.js";
import type { NetworkName } from "../protocol/networks.js";
import type { FacilitatorConfig } from "./config/index.js";
import type { LedgerInspection } from "./health.js";
import type { RateLimitStores } from "./http/rate-limit.js";
import type { Logger } from "./logger.js";
import type { FacilitatorMetrics } from "./metrics/index.js";
import type { NetworkRuntime } from "../settlement/runtime.js";
import type { SignerRecovery } from "../chain/recovery-pool.js";
import type { SettlementDeps, SettlementObserver } from "../settlement/deps.js";
import { InFlight } from "../settlement/in-flight.js";
import { KeyWorker } from "../settlement/key-worker.js";
import { LedgerOutbox } from "../settlement/outbox.js";
import { LedgerWatch } from "./ledger-watch.js";
import { deleteExpiredSettlements } from "./retention.js";

/** This instance's part in the service: the ledger, its key leases, its key worker and its reconciler, and settlement's dependencies. */
export interface Coordination {
  ledger: Ledger;
  instanceId: string;
  keeper: LeaseKeeper;
  /** The one dependencies object of verify and settle (and of the key worker and the reconciler). */
  deps: SettlementDeps<Logger>;
  keyWorker: KeyWorker;
  reconciler: Reconciler;
  /** Rate-limit stores shared through the ledger when it is shared (PostgreSQL); otherwise in memory. */
  rateLimitStores?: RateLimitStores;
  /** The ledger as `/healthcheck` reports it. */
  inspect(): Promise<LedgerInspection>;
  /** Stops taking work, lets sends in flight finish (up to `graceMs`), releases the leases, closes the ledger. */
  close(graceMs?: number): Promise<void>;
}

/** What the log (once, at start) and `/healthcheck` say of an instance on the embedded ledger. */
export const EMBEDDED_LEDGER_NOTE =
  "settlement ledger: embedded (SQLite), this instance's alone; instances that must not pay twice share one PostgreSQL through DATABASE_URL";

/** Parameters of {@link startCoordination}. */
export interface StartCoordinationParameters {
  config: FacilitatorConfig;
  networks: ReadonlyMap<NetworkName, NetworkRuntime>;
  logger: Logger;
  metrics: FacilitatorMetrics;
  /** An open ledger to use (and not close); default: open the one the configuration names. */
  ledger?: Ledger;
  /** What settlement tells as it works, but the ledger's faults (the outage watch here takes those). */
  observer: Omit<SettlementObserver, "ledgerFault">;
  /**
   * Runs once the ledger is open, before this instance takes keys or work (the ledger bound to each chain's history
   * first: nothing is sent or reconciled from rows of another history). A failure stops start-up.
   */
  prepare?: (ledger: Ledger) => Promise<void>;
  /** With tracing on: each ledger call is a span (tracedLedger). */
  tracer?: Tracer;
  /** Where verify and settle's checks recover signatures (the process's worker pool); absent: on the calling thread. */
  recovery?: SignerRecovery;
}

/**
 * Opens the ledger, takes this instance's share of the relayer keys, and starts taking handed-off
 * settlements and reconciling unfinished ones. On the embedded ledger this instance is alone, so it
 * holds every key; on PostgreSQL the instances share them.
 */
export async function startCoordination(parameters: StartCoordinationParameters): Promise<Coordination> {
  const { config, networks, logger, metrics } = parameters;
  const owned = !parameters.ledger;
  const opened =
    parameters.ledger ??
    (await openLedger({
      ...(config.ledger.databaseUrl ? { databaseUrl: config.ledger.databaseUrl } : { file: config.ledger.file }),
      poolSize: config.ledger.poolSize,
      statementTimeoutMs: config.ledger.statementTimeoutMs,
      connectTimeoutMs: config.ledger.connectTimeoutMs,
    }));
  const ledger = parameters.tracer ? tracedLedger(opened, parameters.tracer) : opened;
  if (parameters.prepare) {
    try {
      await parameters.prepare(ledger);
    } catch (error) {
      if (owned) await ledger.close().catch(() => undefined);
      throw error;
    }
  }
  const instanceId = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const runtimes = [...networks.values()];
  const keys = runtimes[0]?.relayer.addresses ?? [];
  const log = logger.child({ instance: instanceId });

  const keeper = new LeaseKeeper({
    ledger,
    instanceId,
    info: { host: hostname(), pid: process.pid, networks: runtimes.map((r) => r.config.network) },
    keys,
    ttlMs: config.ledger.leaseTtlMs,
    isIdle: (address) => runtimes.every((r) => !r.relayer.busy(address)),
    onAcquired(lease) {
      // Another instance (or this one before a restart) may have sent from it: read its nonce from the
      // chain again, and follow its recorded transactions still in flight before its next send.
      keyWorker.adopt(lease.address, lease.epoch);
      metrics.leaseChange("acquired");
      log.info({ relayer: lease.address, epoch: lease.epoch }, "relayer key lease acquired");
    },
    onLost(address) {
      // Nothing more is sent from it here, at once; what it had in flight is recorded, for the next holder.
      const handedOver = keyWorker.release(address);
      metrics.leaseChange("lost");
      if (handedOver > 0) log.warn({ relayer: address, handedOver }, "relayer key lease given up: its transactions in flight are left to the key's next holder");
      else log.info({ relayer: address }, "relayer key lease given up");
    },
  });

  const interval = config.ledger.reconcileIntervalMs;
  const outbox = new LedgerOutbox({ logger: log });
  // An outage is logged once, probed, and recovered from (outbox first, then abandoned claims).
  const watch = new LedgerWatch({
    probe: async () => (await ledger.health()).reachable,
    recover: () => keyWorker.recover(),
    logger: log,
  });
  const deps: SettlementDeps<Logger> = {
    networks,
    ledger,
    logger: log,
    settings: {
      settleMarginSeconds: config.settleMarginSeconds,
      headCacheMs: config.headCacheMs,
      confirmations: config.confirmations,
      settleTimeoutMs: config.settleTimeoutMs,
      pollingIntervalMs: config.pollingIntervalMs,
      relayerSafety: config.relayerSafety,
      ownerTtlMs: 30_000,
      // Cheap and idempotent: the reconciler may look at a row its owner still follows.
      reconcileAfterMs: interval * 5,
      queuePollMs: 1_000,
    },
    observer: { ...parameters.observer, ledgerFault: (error) => watch.report("settle", error) },
    instanceId,
    keys: keeper,
    outbox,
    inFlight: new InFlight(),
    now: Date.now,
    ...(parameters.recovery ? { recovery: parameters.recovery } : {}),
  };
  const keyWorker = new KeyWorker(deps);
  const reconciler = new Reconciler(deps, {
    recheckMs: interval * 2,
    // What this instance's relayer follows goes out again through it (in the key's nonce order), never beside it.
    resendFollowed: async (chainId, tx) => {
      const again = await runtimes.find((runtime) => runtime.config.chainId === chainId)?.relayer.resendFollowed(tx.relayer, tx.relayerNonce);
      return again === undefined ? undefined : again === "accepted";
    },
    onAction(action, record) {
      metrics.reconcilerAction(action);
      log.info({ id: record.id, action, network: record.network, payer: record.key.authorizer, txHash: record.txHash }, "reconciler");
    },
    onError: (error, record) => {
      if (!watch.down) log.warn({ id: record.id, err: String(error) }, "reconciler: row left for the next round");
    },
  });
  metrics.watchLedger(ledger);

  try {
    // The first round takes the keys before the first request: a lone instance holds them all at once.
    await keeper.start((error) => watch.report("relayer key leases", error));
  } catch (error) {
    if (owned) await ledger.close().catch(() => undefined);
    throw error;
  }
  keyWorker.start();
  reconciler.start(interval, (error) => watch.report("reconciler", error));
  const prune = setInterval(() => {
    void ledger.prune().catch(() => undefined);
    void deleteExpiredSettlements(ledger, config.ledger.retentionDays, Date.now()).then(
      (deleted) => deleted > 0 && log.info({ deleted, retentionDays: config.ledger.retentionDays }, "retention: finished settlements deleted"),
      (error: unknown) => log.warn({ err: String(error) }, "retention: finished settlements not deleted this round"),
    );
  }, 60_000);
  prune.unref();

  const shared = ledger.backend === "postgres";
  // At warn: an instance meant to share a database but started on its own file (a typo, an empty
  // DATABASE_URL) must be seen with LOG_LEVEL=warn too.
  if (!shared) log.warn({ ledger: "sqlite", location: (await ledger.health()).location }, EMBEDDED_LEDGER_NOTE);
  let closing: Promise<void> | undefined;
  return {
    ledger,
    instanceId,
    keeper,
    deps,
    keyWorker,
    reconciler,
    ...(shared
      ? {
          rateLimitStores: {
            verify: new LedgerRateLimitStore(ledger, "verify:"),
            settle: new LedgerRateLimitStore(ledger, "settle:"),
            settlePayer: new LedgerRateLimitStore(ledger, "settle-payer:"),
            status: new LedgerRateLimitStore(ledger, "status:"),
          },
        }
      : {}),
    async inspect() {
      const health = await ledger.health();
      return {
        ...health,
        state: health.reachable ? "up" : "down",
        shared,
        ...(shared ? {} : { note: EMBEDDED_LEDGER_NOTE }),
        ...(outbox.size > 0 ? { outbox: outbox.size } : {}),
        leases: keeper.leases().map((lease) => ({ address: lease.address, epoch: lease.epoch, expiresAt: new Date(lease.expiresAt).toISOString() })),
      };
    },
    close(graceMs = 30_000) {
      closing ??= (async () => {
        clearInterval(prune);
        watch.stop();
        await keyWorker.stop(graceMs);
        // What the outage kept is written if the database is back by now (else the reconciler finds it).
        await outbox.drain().catch(() => false);
        await reconciler.stop();
        await keeper.stop().catch((error: unknown) => log.warn({ err: String(error) }, "relayer key leases not released"));
        if (owned) await ledger.close();
      })();
      return closing;
    },
  };
}
