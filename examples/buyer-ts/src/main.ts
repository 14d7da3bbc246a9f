// The buyer on its own: pays SELLER_URL with BUYER_PRIVATE_KEY, proving the payment on RPC_URL. The names
// `cronos-x402 start --write-env` writes: `set -a; . ./.x402.env; set +a` first, on the local stack.
import { formatUnits, type Hex } from "viem";
import { payFor } from "./pay.ts";

const url = process.env.SELLER_URL ?? "http://127.0.0.1:4021/weather";
const privateKey = process.env.BUYER_PRIVATE_KEY as Hex | undefined;
if (!privateKey) {
  console.error("error: set BUYER_PRIVATE_KEY (on the local stack: its env file's, e.g. `set -a; . ./.x402.env; set +a`)");
  process.exit(1);
}
const answer = await payFor(url, { privateKey, maxAmount: 1_000_000n, rpcUrl: process.env.RPC_URL ?? "http://127.0.0.1:8545" });
console.log(`HTTP ${answer.status}`, answer.body);
if (answer.transfer) {
  console.log(`paid ${formatUnits(answer.transfer.value, 6)} USDC.e to ${answer.transfer.to} in block ${answer.transfer.blockNumber} (${answer.transaction})`);
} else if (answer.status === 200) {
  console.log("answered without a payment");
}
process.exitCode = answer.status === 200 ? 0 : 1;
