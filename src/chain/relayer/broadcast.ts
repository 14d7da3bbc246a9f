import { keccak256, type Hex, type PublicClient } from "viem";
import type { Fees } from "../fees.js";
import { feeFields, type RelayerKey } from "./key.js";
import type { EarlyReceipt, RelayRequest, SignedRelay } from "./types.js";

/** What a broadcast came to. */
export type Broadcast =
  | { outcome: "accepted" | "known"; early?: Promise<EarlyReceipt | undefined> }
  | { outcome: "nonceTooLow" | "refused" | "unknown"; error: unknown };

/**
 * Sends `raw`. With `receiptOf`, its receipt and the latest block are asked in the same batch, after
 * the send (the transport batches calls made together, in order): a chain that mines at once answers
 * with no further round trip; otherwise the receipt is waited for as usual.
 */
export async function broadcast(client: PublicClient, raw: Hex, receiptOf?: Hex): Promise<Broadcast> {
  const sending = client.sendRawTransaction({ serializedTransaction: raw });
  const early = receiptOf
    ? Promise.all([
        client.getTransactionReceipt({ hash: receiptOf }),
        client.getBlock({ blockTag: "latest" }).then(
          (block) => ({ number: block.number, timestamp: block.timestamp }),
          () => undefined,
        ),
      ]).then(
        ([receipt, latest]): EarlyReceipt => ({ receipt, ...(latest ? { latest } : {}) }),
        () => undefined,
      )
    : undefined;
  try {
    await sending;
    return { outcome: "accepted", ...(early ? { early } : {}) };
  } catch (error) {
    const kind = sendErrorKind(error);
    if (kind === "known") return { outcome: "known" };
    if (kind === "refused" && /nonce too low|nonce.{0,20}(low|used)/i.test(errorText(error))) return { outcome: "nonceTooLow", error };
    return { outcome: kind, error };
  }
}

/** Signs `request` with `key` at `nonce` and `fees` (a re-priced version of `replaces` when given), under the key's lease. */
export async function sign(key: RelayerKey, chainId: number, request: RelayRequest & { value?: bigint }, nonce: number, fees: Fees, replaces?: Hex): Promise<SignedRelay> {
  const raw = await key.account.signTransaction({
    chainId,
    to: request.to,
    data: request.data,
    gas: request.gas,
    ...(request.value !== undefined ? { value: request.value } : {}),
    nonce,
    ...("gasPrice" in fees ? { gasPrice: fees.gasPrice, type: "legacy" as const } : { ...fees, type: "eip1559" as const }),
  });
  const epoch = key.lease?.epoch;
  return { hash: keccak256(raw), raw, from: key.address, nonce, ...feeFields(fees), ...(replaces ? { replaces } : {}), ...(epoch !== undefined ? { epoch } : {}) };
}

/** A node's error as text: its message and the details viem keeps of it. */
export function errorText(error: unknown): string {
  if (error instanceof Error) return `${error.message} ${(error as { details?: string }).details ?? ""}`;
  return String(error);
}

/**
 * How a node's error to `eth_sendRawTransaction` reads: it already had the transaction (`known`),
 * refused it outright (`refused`: nothing was sent), or something else (a transport fault: it may have been).
 */
export function sendErrorKind(error: unknown): "known" | "refused" | "unknown" {
  const message = errorText(error);
  if (/already known|known transaction|already imported/i.test(message)) return "known";
  if (/nonce|underpriced|insufficient funds|intrinsic gas|gas limit|execution reverted|invalid|rejected/i.test(message)) return "refused";
  return "unknown";
}
