import { Router, type RequestHandler } from "express";
import type { NetworkName } from "../../protocol/networks.js";
import type { SettlementStore } from "../../ledger/types.js";
import { statusByAuthorization, statusByTxHash, type StatusAnswer } from "../status.js";

/** Options of {@link settlementRoutes}. */
export interface SettlementRoutesOptions {
  ledger: Pick<SettlementStore, "get" | "findByTxHash">;
  /** The networks served, with their token. */
  served: ReadonlyMap<NetworkName, { token: `0x${string}` }>;
  /** What a lookup passes first: the API key when keys are configured, and a quota of verify's size. */
  guards?: RequestHandler[];
}

/**
 * The settlement status lookups: `GET /v2/x402/settlements/{txHash}[?network=…]` and
 * `GET /v2/x402/settlements?network=…&from=…&nonce=…` (`network` in any form verify takes, answered as
 * asked); 404 JSON when unknown, 400 JSON on a malformed query.
 */
export function settlementRoutes(options: SettlementRoutesOptions): Router {
  const router = Router();
  const send = (answer: StatusAnswer, res: Parameters<RequestHandler>[1]) => void res.status(answer.status).json(answer.body);
  const limit = options.guards ?? [];
  router.get("/v2/x402/settlements/:txHash", ...limit, async (req, res) => {
    const network = req.query.network;
    send(await statusByTxHash(options.ledger, options.served, String(req.params.txHash), network === undefined ? undefined : typeof network === "string" ? network : null), res);
  });
  router.get("/v2/x402/settlements", ...limit, async (req, res) => {
    // One value per parameter: a repeated one is malformed, not the first of several.
    const query = Object.fromEntries(Object.entries(req.query).map(([k, v]) => [k, typeof v === "string" ? v : null]));
    send(await statusByAuthorization(options.ledger, options.served, query), res);
  });
  return router;
}
