// A settlement's resource written into the discovery catalog, bounded in time, never holding back the payment's answer.
import type { Request } from "express";
import type { CatalogStore, DiscoveryBounds, LedgerLifecycle } from "../../ledger/types.js";
import { canonicalNetwork } from "../../protocol/networks.js";
import type { Payment } from "../../protocol/payment.js";
import type { SettlementDeps } from "../../settlement/deps.js";
import type { SettledPayment } from "../../settlement/settle.js";
import { catalogPaymentOf } from "../discovery.js";
import { apiKeyOf } from "./api-keys.js";
import { errorSummary } from "./payment-request.js";

/** How long a settle's answer waits for its catalog entry to be written (a slow ledger then writes it after the answer). */
const CATALOG_WAIT_MS = 1_000;

/** The discovery catalog a settlement writes to. */
export interface CatalogWrites {
  ledger: Omit<CatalogStore, "removeDiscoveryResource"> & Pick<LedgerLifecycle, "backend">;
  bounds: DiscoveryBounds;
  /** With API keys, an entry is written only under the key configured for the payTo it paid. */
  keyed: boolean;
}

/**
 * Records the resource a settlement's seller declares (its payment requirements, never the buyer's payment),
 * under the payTo the settlement paid, with the facts of the settlement (never a verify's, never the
 * request's): once per settlement (a repeat under a payment identifier writes nothing) and, with API keys,
 * only under the key configured for that payTo. Waited for up to CATALOG_WAIT_MS before the answer (so
 * whoever was paid finds it listed at once); a declaration the catalog refuses, a ledger that fails or
 * hangs only costs a log line, never the payment's answer.
 */
export async function writeCatalogEntry(catalog: CatalogWrites, deps: Pick<SettlementDeps, "networks" | "logger">, req: Request, payment: Payment, outcome: SettledPayment): Promise<void> {
  if (outcome.repeat) return;
  if (catalog.keyed && !apiKeyOf(req)?.payTo?.includes(outcome.to.toLowerCase())) return;
  const network = canonicalNetwork(payment.requirements.network);
  const runtime = network && deps.networks.get(network);
  if (!network || !runtime) return;
  let written: Promise<unknown>;
  try {
    const entry = catalogPaymentOf(req.body as unknown, { network, asset: runtime.config.token, payer: outcome.from, payTo: outcome.to, value: outcome.value, paidAt: outcome.timestamp });
    if (!entry) return;
    written = catalog.ledger
      .recordDiscoveryPayment(entry, catalog.bounds)
      .catch((error: unknown) => deps.logger.warn({ resource: entry.entry.resource, err: errorSummary(error) }, "discovery catalog: entry not recorded"));
  } catch (error) {
    deps.logger.warn({ err: errorSummary(error) }, "discovery catalog: declaration not read");
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([written, new Promise((resolve) => (timer = setTimeout(resolve, CATALOG_WAIT_MS)))]);
  clearTimeout(timer);
}
