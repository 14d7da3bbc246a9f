import type { Address, Hex } from "viem";

/**
 * Signed test vectors, computed with viem and checked byte for byte against the official Cronos
 * client (`@crypto.com/facilitator-client@1.0.4`). Signer: Hardhat account #0 (a public,
 * local-only key); payee: account #1; value 1 USDC.e; validAfter 0; validBefore 1893456000;
 * nonce 0x11…11; domain name "Bridged USDC (Stargate)".
 */
export const VECTOR_SIGNER = {
  address: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266" as Address,
  privateKey: "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80" as Hex,
};
export const VECTOR_PAYEE = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" as Address;

export const VECTOR_MESSAGE = {
  from: VECTOR_SIGNER.address,
  to: VECTOR_PAYEE,
  value: 1_000_000n,
  validAfter: 0n,
  validBefore: 1_893_456_000n,
  nonce: `0x${"11".repeat(32)}` as Hex,
};

export const VECTOR_DOMAIN_NAME = "Bridged USDC (Stargate)";

/** Vector A's terms as an x402 v2 offer on testnet (what a seller puts in `PAYMENT-REQUIRED`'s `accepts`). */
export const VECTOR_V2_OFFER = {
  scheme: "exact",
  network: "eip155:338",
  asset: "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0",
  amount: "1000000",
  payTo: VECTOR_PAYEE,
  maxTimeoutSeconds: 300,
  extra: { name: VECTOR_DOMAIN_NAME, version: "1" },
};
export const VECTOR_STRUCT_HASH = "0xef5a9d72437be8ce4f1c254f5b4c46a17d56602f29ee606ac91a4396a25c1436" as Hex;

export interface Vector {
  chainId: number;
  verifyingContract: Address;
  version: string;
  domainSeparator: Hex;
  signature: Hex;
}

export const VECTORS = {
  A: {
    chainId: 338,
    verifyingContract: "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0",
    version: "1",
    domainSeparator: "0x9abb5307ed790997036a3a26caf5fe42545a32c07b98bf7b9472d0a54fcac290",
    signature:
      "0xd73892d3c9c75e5b459b4300dc092cd2efc5a79783e3ad3d1e0e06e6125d126b6c3a588bb6c6532c6927fe5ae6c7ba80ebfe8afd6afebb9dafed416856e36f191c",
  },
  B: {
    chainId: 338,
    verifyingContract: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
    version: "1",
    domainSeparator: "0xefe587ce172416d013a774119e531b9b5fde7e9d4bad04a4c757278dc9a219f3",
    signature:
      "0xd7974b201e81df023723f806b1a188e8fab54f239150fb6f8e32c6bbaf8ef8d41311e1f69df3047393be38b3cc0a3447b37d1bd79fb6da0557e0536bbcc15d291c",
  },
  C: {
    chainId: 31337,
    verifyingContract: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
    version: "1",
    domainSeparator: "0x072c8eaecec2da99da33eb90ac85f23c6202e3cd7137087c0215234fffef3f77",
    signature:
      "0x2e7057338e03e36cfe2564b78dd04a957fd5d4b6783804e98f5273f41652d89b007cab0d6b9306ee58cac35017460d072af8e723b8c1d421cfea69ee39a994031b",
  },
  M: {
    chainId: 25,
    verifyingContract: "0xf951eC28187D9E5Ca673Da8FE6757E6f0Be5F77C",
    version: "2",
    domainSeparator: "0x06e35d4dfe04f87e5e6b9e9634fd66920746f9d71cf4fbf1263eadd476a2b85f",
    signature:
      "0xa9a71214109b08404555bbd68d3052e429c57afe8b43e62ec13fe0b928306529226f4e3e077938bba81bd041a1dff97fc7b999fe8a1840c2960181bf2b1e5b991c",
  },
} satisfies Record<string, Vector>;

/** Vector A's `X-PAYMENT` header exactly as the official client emits it. */
export const VECTOR_A_HEADER =
  "eyJ4NDAyVmVyc2lvbiI6MSwic2NoZW1lIjoiZXhhY3QiLCJuZXR3b3JrIjoiY3Jvbm9zLXRlc3RuZXQiLCJwYXlsb2FkIjp7ImZyb20iOiIweGYzOUZkNmU1MWFhZDg4RjZGNGNlNmFCODgyNzI3OWNmZkZiOTIyNjYiLCJ0byI6IjB4NzA5OTc5NzBDNTE4MTJkYzNBMDEwQzdkMDFiNTBlMGQxN2RjNzlDOCIsInZhbHVlIjoiMTAwMDAwMCIsInZhbGlkQWZ0ZXIiOjAsInZhbGlkQmVmb3JlIjoxODkzNDU2MDAwLCJub25jZSI6IjB4MTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMTExMSIsInNpZ25hdHVyZSI6IjB4ZDczODkyZDNjOWM3NWU1YjQ1OWI0MzAwZGMwOTJjZDJlZmM1YTc5NzgzZTNhZDNkMWUwZTA2ZTYxMjVkMTI2YjZjM2E1ODhiYjZjNjUzMmM2OTI3ZmU1YWU2YzdiYTgwZWJmZThhZmQ2YWZlYmI5ZGFmZWQ0MTY4NTZlMzZmMTkxYyIsImFzc2V0IjoiMHhjMDFlZkFhRjdDNUM2MWJFYkZBZWIzNThFMTE2MWI1MzdiOGJDMGUwIn19";
