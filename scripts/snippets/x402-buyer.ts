// docs/x402-packages.md's buyer, verbatim (test/compat checks that it is, and runs it).
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { privateKeyToAccount } from "viem/accounts";
import { cronosSpendControl } from "../../src/protocol/index.js";

/** A `fetch` that pays x402 402s with USDC.e on one Cronos network (`eip155:338` or `eip155:25`), at most $0.01 each. */
export function x402Buyer(privateKey: `0x${string}`, network: "eip155:338" | "eip155:25") {
  const client = new x402Client()
    .register(network, new ExactEvmScheme(privateKeyToAccount(privateKey)))
    // @x402/evm knows no default asset on Cronos: allow USDC.e explicitly, with a cap.
    .setSpendControls({ allowedAssets: [cronosSpendControl(network, "$0.01")] });
  return wrapFetchWithPayment(fetch, client);
}
