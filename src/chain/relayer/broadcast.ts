import { keccak256, type Hex, type PublicClient } from "viem";
import type { Fees } from "../fees.js";
import { classifySendError, type SendRefusal } from "../node-errors.js";
import { feeFields, type RelayerKey } from "./key.js";
import type { EarlyReceipt, RelayRequest, SignedRelay } from "./types.js";

/**
 * What a broadcast came to: the node took it, or had it (`known`: the same signed transaction); refused it,
 * and why (nothing was sent); or did not say (`unknown`: a transport fault or an answer the table does not
 * know: it may have been sent).
 */
export type Broadcast =
  | { outcome: "accepted" | "known"; early?: Promise<EarlyReceipt | undefined> }
  | { outcome: "refused"; refusal: Exclude<SendRefusal, { kind: "known" }>; error: unknown }
  | { outcome: "unknown"; error: unknown };

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
    const refusal = classifySendError(error);
    if (refusal.kind === "known") return { outcome: "known" };
    if (refusal.kind === "unknown") return { outcome: "unknown", error };
    return { outcome: "refused", refusal, error };
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
