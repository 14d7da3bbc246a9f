import { isAddressEqual, type Hex } from "viem";
import { NETWORKS, type NetworkName } from "../protocol/networks.js";
import { networkOfAnyForm } from "../protocol/x402v2.js";
import { RequestError, SettlementFailureText } from "../protocol/reasons.js";
import { describeZodError, settlementQuerySchema, settlementTxHashSchema, type SettlementStatus } from "../protocol/schemas.js";
import type { SettlementRecord, SettlementStore } from "../ledger/types.js";

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
    // The code made into its text here, at the edge: the ledger holds codes.
    ...(status === "failed" && record.errorCode ? { error: SettlementFailureText[record.errorCode] } : {}),
  };
}

const notFound = (): StatusAnswer => ({ status: 404, body: { error: RequestError.notFound } });
const invalid = (what: string): StatusAnswer => ({ status: 400, body: { error: RequestError.invalidRequest(what) } });

/**
 * `GET {base}/v2/x402/settlements/{txHash}[?network=…]`: the settlement any of whose transactions has this
 * hash. With `network` (a form {@link servedNetwork} takes), only a settlement of that network, answered in
 * that form; without it, in the ledger's name.
 */
export async function statusByTxHash(
  ledger: Pick<SettlementStore, "findByTxHash">,
  served: ReadonlyMap<NetworkName, { token: Hex }>,
  txHash: string,
  network?: string | null,
): Promise<StatusAnswer> {
  const parsed = settlementTxHashSchema.safeParse(txHash);
  if (!parsed.success) return invalid(`txHash ${describeZodError(parsed.error)}`);
  if (network === null) return invalid("network must be a string");
  const name = network === undefined ? undefined : servedNetwork(served, network);
  if (name && "problem" in name) return invalid(name.problem);
  const record = await ledger.findByTxHash(parsed.data as Hex);
  if (!record || (name && (record.key.chainId !== NETWORKS[name.name].chainId || !isAddressEqual(record.key.token, name.token)))) return notFound();
  return { status: 200, body: settlementStatusOf(record, network ?? record.network) };
}

/**
 * A network the lookups serve, named in any form verify takes in either dialect (`cronos-testnet`,
 * `cronos-mainnet`, the alias `cronos`, `eip155:338`, `eip155:25`), with its token; else the problem.
 */
function servedNetwork(served: ReadonlyMap<NetworkName, { token: Hex }>, network: string): { name: NetworkName; token: Hex } | { problem: string } {
  const name = networkOfAnyForm(network);
  const token = name && served.get(name)?.token;
  return name && token ? { name, token } : { problem: `network ${network} is not served here` };
}

/**
 * `GET {base}/v2/x402/settlements?network=…&from=…&nonce=…`: the settlement of one authorization of
 * the network's token. `served` lists the networks this facilitator settles, with their token.
 */
export async function statusByAuthorization(
  ledger: Pick<SettlementStore, "get">,
  served: ReadonlyMap<NetworkName, { token: Hex }>,
  query: unknown,
): Promise<StatusAnswer> {
  const parsed = settlementQuerySchema.safeParse(query);
  if (!parsed.success) return invalid(describeZodError(parsed.error));
  const { network, from, nonce } = parsed.data;
  const where = servedNetwork(served, network);
  if ("problem" in where) return invalid(where.problem);
  const record = await ledger.get({ chainId: NETWORKS[where.name].chainId, token: where.token, authorizer: from, nonce: nonce as Hex });
  return record ? { status: 200, body: settlementStatusOf(record, network) } : notFound();
}
