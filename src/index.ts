// Public surface of the kit (`cronos-x402-facilitator-kit`): the protocol, the seller and buyer SDKs,
// the facilitator and the ledger interface. Never the harness (`…/harness`, which needs Hardhat) or
// the conformance checks (`…/conformance`). Importing this module starts nothing.

export * from "./protocol/index.js";
export * from "./facilitator/index.js";
export * from "./seller/index.js";
export * from "./buyer/index.js";
// The token's ABI (USDC.e's EIP-3009 surface), as the facilitator calls it.
export { tokenAbi } from "./chain/token-abi.js";
