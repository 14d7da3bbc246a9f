import type { Address } from "viem";
import type { NetworkName } from "../../protocol/networks.js";
import type { SupportedResponse } from "../../protocol/schemas.js";
import { PAYMENT_IDENTIFIER, X402_V2_VERSION } from "../../protocol/x402v2.js";
import { BAZAAR } from "../discovery.js";
import { isJsonObject, type DialectCodec } from "./codec.js";
import { cronosDialect } from "./cronos.js";
import { x402v2Dialect } from "./x402v2.js";

export { cronosDialect } from "./cronos.js";
export { x402v2Dialect, V2_REASON_OF, V2_SETTLE_REASON_OF } from "./x402v2.js";
export type { DialectCodec, DialectName, Echo, PaymentRoute, ReadResult, RefusalKind } from "./codec.js";

/**
 * The codec of a verify/settle body: x402 v2 when it says `x402Version: 2`, or when it carries a
 * `paymentPayload` and no `paymentHeader` under any version but 1; the Cronos dialect otherwise, which
 * answers bodies that are not JSON objects and its own unknown versions as it always has.
 */
export function dialectOf(body: unknown): DialectCodec {
  if (!isJsonObject(body)) return cronosDialect;
  if (body.x402Version === X402_V2_VERSION) return x402v2Dialect;
  if (body.x402Version !== 1 && "paymentPayload" in body && !("paymentHeader" in body)) return x402v2Dialect;
  return cronosDialect;
}

/**
 * `GET supported` for both dialects in one shape that the official Cronos client and `@x402/core`
 * both accept: each network under its Cronos name (x402Version 1) and its CAIP-2 id (x402Version 2),
 * the extensions it honours (x402 v2 `bazaar` and `payment-identifier`), and the relayer addresses as the EVM signers.
 */
export function supportedAnswer(networks: readonly NetworkName[], relayers: readonly Address[]): SupportedResponse {
  return {
    kinds: [...networks.map(cronosDialect.kind), ...networks.map(x402v2Dialect.kind)],
    extensions: [BAZAAR, PAYMENT_IDENTIFIER],
    signers: { "eip155:*": [...relayers] },
  };
}
