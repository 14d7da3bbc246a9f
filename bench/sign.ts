// Benchmark helper: signs TransferWithAuthorization headers with native secp256k1, so a load
// generator can prepare tens of thousands of distinct payments in seconds.
import { createRequire } from "node:module";
import { bytesToHex, getAddress, hexToBytes, toHex, type Address, type Hex } from "viem";
import { domainSeparator, transferAuthorizationDigest } from "../src/chain/signature.js";
import { encodePaymentHeader } from "../src/protocol/header.js";

const require = createRequire(import.meta.url);
const secp = require("secp256k1") as { ecdsaSign(msg: Uint8Array, key: Uint8Array): { signature: Uint8Array; recid: number } };

export interface SignBodiesParameters {
  count: number;
  buyers: Array<{ address: Address; privateKey: Hex }>;
  network: string;
  chainId: number;
  token: Address;
  domain: { name: string; version: string };
  payTo: Address;
  value: bigint;
  validBefore: bigint;
}

/**
 * JSON bodies of verify/settle requests, each with a fresh random nonce, buyers used in turn: the Cronos
 * dialect's (`x402Version: 1`, a base64 `paymentHeader`) unless `dialect` is `x402v2` (a `paymentPayload`
 * as `@x402/evm`'s client writes it, with the token's domain in the requirements' `extra`).
 */
export function signBodies(p: SignBodiesParameters & { dialect?: "cronos" | "x402v2" }): string[] {
  const separator = domainSeparator({ ...p.domain, chainId: p.chainId, verifyingContract: p.token });
  const bodies: string[] = [];
  for (let i = 0; i < p.count; i++) {
    const buyer = p.buyers[i % p.buyers.length]!;
    const message = { from: getAddress(buyer.address), to: p.payTo, value: p.value, validAfter: 0n, validBefore: p.validBefore, nonce: toHex(crypto.getRandomValues(new Uint8Array(32))) };
    const { signature, recid } = secp.ecdsaSign(transferAuthorizationDigest(separator, message), hexToBytes(buyer.privateKey));
    if (p.dialect === "x402v2") {
      const requirements = {
        scheme: "exact", network: `eip155:${p.chainId}`, asset: p.token, amount: p.value.toString(), payTo: p.payTo, maxTimeoutSeconds: 300,
        extra: { name: p.domain.name, version: p.domain.version },
      };
      const authorization = { ...message, value: p.value.toString(), validAfter: "0", validBefore: p.validBefore.toString() };
      const payload = { signature: `${bytesToHex(signature)}${(27 + recid).toString(16)}`, authorization };
      bodies.push(JSON.stringify({ x402Version: 2, paymentPayload: { x402Version: 2, accepted: requirements, payload }, paymentRequirements: requirements }));
      continue;
    }
    const paymentHeader = encodePaymentHeader({
      network: p.network,
      ...message,
      value: p.value.toString(),
      signature: `${bytesToHex(signature)}${(27 + recid).toString(16)}`,
      asset: p.token,
    });
    bodies.push(
      JSON.stringify({
        x402Version: 1,
        paymentHeader,
        paymentRequirements: { scheme: "exact", network: p.network, payTo: p.payTo, asset: p.token, maxAmountRequired: p.value.toString(), maxTimeoutSeconds: 300 },
      }),
    );
  }
  return bodies;
}
