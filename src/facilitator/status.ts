import type { Hex } from "viem";
import { canonicalNetwork, NETWORKS, type NetworkName } from "../protocol/networks.js";
import { RequestError } from "../protocol/reasons.js";
import { describeZodError, settlementQuerySchema, settlementTxHashSchema, type SettlementStatus } from "../protocol/schemas.js";
import type { Ledger, SettlementRecord } from "../ledger/types.js";

/** A status lookup's answer: the body and its HTTP status. */
export type StatusAnswer = { status: 200; body: SettlementStatus } | { status: 400 | 404; body: { error: string } };

/** The status answer of one ledger row; `network` is answered as the caller named it. */
export function settlementStatusOf(record: SettlementRecord, network: string): SettlementStatus {
  const status = record.status === "settled" ? "settled" : record.status === "failed" ? "failed" : "pending";
  return {
    status,
    network,
    from: record.key.authorizer,
    to: record.payee,
    value: record.value.toString(),
    nonce: record.key.nonce,
    txHash: record.txHash ?? null,
    // A transaction the node refused outright never existed out there.
    transactions: record.transactions.filter((tx) => tx.state !== "refused").map((tx) => tx.hash),
    ...(status === "settled" && record.blockNumber !== undefined ? { blockNumber: Number(record.blockNumber) } : {}),
    ...(status === "settled" && record.blockTimestamp !== undefined
      ? { timestamp: new Date(Number(record.blockTimestamp) * 1000).toISOString() }
      : {}),
    ...(status === "failed" && record.error ? { error: record.error } : {}),
  };
}

const notFound = (): StatusAnswer => ({ status: 404, body: { error: RequestError.notFound } });
const invalid = (what: string): StatusAnswer => ({ status: 400, body: { error: RequestError.invalidRequest(what) } });

/** `GET {base}/v2/x402/settlements/{txHash}`: the settlement any of whose transactions has this hash. */
export async function statusByTxHash(ledger: Pick<Ledger, "findByTxHash">, txHash: string): Promise<StatusAnswer> {
  const parsed = settlementTxHashSchema.safeParse(txHash);
  if (!parsed.success) return invalid(`txHash ${describeZodError(parsed.error)}`);
  const record = await ledger.findByTxHash(parsed.data as Hex);
  return record ? { status: 200, body: settlementStatusOf(record, record.network) } : notFound();
}

/**
 * `GET {base}/v2/x402/settlements?network=…&from=…&nonce=…`: the settlement of one authorization of
 * the network's token. `served` lists the networks this facilitator settles, with their token.
 */
export async function statusByAuthorization(
  ledger: Pick<Ledger, "get">,
  served: ReadonlyMap<NetworkName, { token: Hex }>,
  query: unknown,
): Promise<StatusAnswer> {
  const parsed = settlementQuerySchema.safeParse(query);
  if (!parsed.success) return invalid(describeZodError(parsed.error));
  const { network, from, nonce } = parsed.data;
  const name = canonicalNetwork(network);
  const token = name && served.get(name)?.token;
  if (!name || !token) return invalid(`network ${network} is not served here`);
  const record = await ledger.get({ chainId: NETWORKS[name].chainId, token, authorizer: from, nonce: nonce as Hex });
  return record ? { status: 200, body: settlementStatusOf(record, network) } : notFound();
}
