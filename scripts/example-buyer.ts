// `npm run example:buyer`: pays the example seller's `GET /weather` with x402 and shows what happened:
// the answer, the settlement from X-PAYMENT-RESPONSE, and the transaction's receipt read from the chain.
// Run `npm start` and `npm run example:seller` first.
//
// Environment:
//   SELLER_URL         the paid resource (default http://127.0.0.1:4021/weather; a bare origin gets /weather)
//   BUYER_PRIVATE_KEY  the paying key (default Hardhat account #2, the first buyer `npm start` funds:
//                      a PUBLIC test key, LOCAL-ONLY — never use it on a real network)
//   RPC_URL            JSON-RPC of the chain the seller is paid on (default http://127.0.0.1:8545, the
//                      local cronos-testnet of `npm start`)
// An empty variable counts as unset.
import { createPublicClient, formatUnits, http, parseEventLogs, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { getPaymentResponse, wrapFetchWithPayment } from "../src/buyer/index.js";
import { tokenAbi } from "../src/chain/token-abi.js";

// LOCAL-ONLY: Hardhat's public test key #2.
const DEFAULT_BUYER_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";
const MAX_AMOUNT = 1_000_000n; // pays at most 1 USDC.e per request
const DECIMALS = 6;

function fail(message: string): never {
  process.stderr.write(`error: ${message}\n`);
  process.exit(1);
}

function sellerUrl(): string {
  const raw = process.env.SELLER_URL || "http://127.0.0.1:4021/weather";
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    fail(`SELLER_URL is not a URL: "${raw}"`);
  }
  if (url.pathname === "/" && !url.search) url.pathname = "/weather";
  return url.toString();
}

const url = sellerUrl();
const rpcUrl = process.env.RPC_URL || "http://127.0.0.1:8545";
const key = (process.env.BUYER_PRIVATE_KEY || DEFAULT_BUYER_KEY) as Hex;
if (!/^0x[0-9a-fA-F]{64}$/.test(key)) fail("BUYER_PRIVATE_KEY must be a 0x-prefixed 32-byte hex key");
const buyer = privateKeyToAccount(key);

console.log(`buyer ${buyer.address} pays at most ${formatUnits(MAX_AMOUNT, DECIMALS)} USDC.e`);
console.log(`GET ${url}`);

const paidFetch = wrapFetchWithPayment(fetch, { signer: buyer, maxAmount: MAX_AMOUNT });
let response: Response;
try {
  response = await paidFetch(url);
} catch (error) {
  const cause = error instanceof Error && error.cause instanceof Error ? ` (${error.cause.message})` : "";
  fail(`${error instanceof Error ? error.message : String(error)}${cause}; is the example seller running (npm run example:seller)?`);
}

const text = await response.text();
let body: unknown = text;
try {
  body = JSON.parse(text);
} catch {
  // not JSON: shown as text
}
console.log(`\n${response.status} ${response.statusText}`);
console.log(`body: ${JSON.stringify(body, null, 2)}`);
if (response.status !== 200) fail(`not paid: the seller answered ${response.status}`);

const settlement = getPaymentResponse(response);
if (!settlement) fail("the answer carries no X-PAYMENT-RESPONSE");
console.log(`\nX-PAYMENT-RESPONSE (decoded): ${JSON.stringify(settlement, null, 2)}`);
if (settlement.event !== "payment.settled") fail(`the payment was not settled: ${settlement.error}`);

const client = createPublicClient({ transport: http(rpcUrl) });
let receipt;
try {
  receipt = await client.getTransactionReceipt({ hash: settlement.txHash as Hex });
} catch (error) {
  fail(`cannot read the receipt of ${settlement.txHash} from ${rpcUrl} (${error instanceof Error ? error.message.split("\n")[0] : String(error)}); is RPC_URL the seller's chain?`);
}
console.log(`\non-chain receipt (${rpcUrl}):`);
console.log(`  transaction  ${receipt.transactionHash}`);
console.log(`  status       ${receipt.status}`);
console.log(`  block        ${receipt.blockNumber}`);
console.log(`  gas used     ${receipt.gasUsed} (paid by the relayer ${receipt.from}, not the buyer)`);
console.log(`  token        ${receipt.to}`);
for (const log of parseEventLogs({ abi: tokenAbi, logs: receipt.logs })) {
  if (log.eventName === "AuthorizationUsed") {
    console.log(`  event AuthorizationUsed  authorizer ${log.args.authorizer}  nonce ${log.args.nonce}`);
  } else if (log.eventName === "Transfer") {
    console.log(`  event Transfer           from ${log.args.from}  to ${log.args.to}  value ${log.args.value} (${formatUnits(log.args.value, DECIMALS)} USDC.e)`);
  } else {
    console.log(`  event ${log.eventName}`);
  }
}
if (receipt.status !== "success") fail("the settlement transaction reverted");
console.log(`\npaid ${formatUnits(BigInt(settlement.value), DECIMALS)} USDC.e to ${settlement.to} in block ${settlement.blockNumber}`);
