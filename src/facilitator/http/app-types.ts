import type { Router } from "express";
import type { SupportedResponse, Authorization } from "../../protocol/schemas.js";
import type { SettlementDeps } from "../../settlement/deps.js";
import type { Logger } from "../logger.js";
import type { DialectName } from "../dialects/index.js";
import type { HealthReport } from "../health.js";
import type { ApiKeyConfig, RateLimitsConfig } from "../config/index.js";
import type { QuotaHolder } from "./edge.js";
import type { LimiterName, RateLimitStores, StoreFallback } from "./rate-limit.js";
import type { SettlementRoutesOptions } from "./settlements.js";
import type { CatalogStore, DiscoveryBounds, LedgerLifecycle } from "../../ledger/types.js";
import type { NetworkName } from "../../protocol/networks.js";

/** The two payment routes. */
export type Route = "verify" | "settle";

/** Options of `createApp` (app.ts). */
export interface AppOptions {
  context: SettlementDeps<Logger>;
  supported: () => SupportedResponse;
  health: () => Promise<HealthReport>;
  rateLimits: RateLimitsConfig;
  trustProxy: false | number | string[];
  /** `ALLOWED_HOSTS`: with any, every route answers only a `Host` naming one of them or a loopback name (else 421). */
  allowedHosts?: readonly string[];
  bodyLimitBytes: number;
  /** Seller API keys; with any, verify and settle require one (401 otherwise) and quotas are per key. */
  apiKeys?: readonly ApiKeyConfig[];
  /** Shared rate-limit stores when several instances run, one per limiter; default in-memory. */
  rateLimitStores?: RateLimitStores;
  /**
   * How long a request waits for a shared store's count (default 50 ms); past it, or when the store
   * fails, it is judged by this instance's own count ({@link BoundedStore}).
   */
  rateLimitStoreWaitMs?: number;
  /** A shared store's count was not used for a request (metrics, logs). */
  onRateLimitStoreFallback?: (limiter: LimiterName, reason: StoreFallback) => void;
  /** The settlement status lookups (`GET /v2/x402/settlements…`), rate-limited like verify. */
  statusLookup?: Omit<SettlementRoutesOptions, "guards">;
  /** Called once per verify/settle answer, refusals at the edge included (logging, metrics). */
  onOutcome?: (outcome: OutcomeRecord) => void;
  onRateLimited?: (route: Route | "status" | "public", by: QuotaHolder) => void;
  /** Called once per HTTP answer with the route (or "other") and status. */
  onResponse?: (route: string, status: number) => void;
  /** The dashboard's routes (the page at `/`, its API and live feed), when it is on. */
  dashboard?: Router;
  /**
   * The discovery catalog (x402 `bazaar`): a settled payment that declares its resource is recorded there
   * under the payTo it paid (never a verify), and `GET /v2/x402/discovery/{resources,search}` read it
   * (guarded as the status lookups are).
   */
  discovery?: { ledger: Omit<CatalogStore, "removeDiscoveryResource"> & Pick<LedgerLifecycle, "backend">; bounds: DiscoveryBounds };
  /**
   * Awaited once verify has found a payment valid, before the answer is written: the local stack's
   * "after verify" faults act on the chain here (a balance moved, the nonce spent), so the settle that
   * follows meets the real state. Its errors are logged; the answer stands. Never set in production.
   */
  afterVerify?: (payment: ValidPayment) => Promise<void>;
  /**
   * Seconds until verify, settle and the status lookups take requests again; `undefined` while they do.
   * The local stack's "busy" fault: its quota set to zero for a while (see {@link EdgeGuardsOptions.closedFor}).
   */
  closedFor?: () => number | undefined;
}

/** A payment verify found valid: its network and the authorization it carries (signature included). */
export interface ValidPayment {
  network: NetworkName;
  authorization: Authorization;
}

/** What happened to one verify or settle request. */
export interface OutcomeRecord {
  requestId: string;
  route: "verify" | "settle";
  /** Which dialect the request spoke: `cronos` (x402Version 1) or `x402v2`; `unknown` when refused before its body was read. */
  dialect: DialectName | "unknown";
  status: number;
  network: string;
  payer?: string;
  payee?: string;
  amount?: string;
  /** `valid`, `settled`, or the reason / error text. */
  outcome: string;
  /** A bounded label for metrics: `valid`, `settled`, a verify failure code, a settle error key, `invalid_request`, `fault`. */
  code: string;
  txHash?: string;
  durationMs: number;
  /**
   * Refused before any payment check: a missing or unknown API key (401), a body too large (413) or
   * of another type (415), a body that is not JSON or not a payment (400). Counted in metrics and
   * logged; not a payment's outcome, so the dashboard's feed does not show it.
   */
  edge?: true;
}
