// The reference for `npm run bench:verify`: Coinbase's `@x402/evm` exact EVM facilitator scheme (through
// `@x402/core`'s x402Facilitator), behind a minimal Express app, on the chain at BENCH_REFERENCE_RPC_URL.
// POST /verify takes the x402 v2 body `{x402Version, paymentPayload, paymentRequirements}` and answers
// the library's own verify response. Prints one JSON line `{"url": …}` when listening (port 0).
import express from "express";
import { x402Facilitator } from "@x402/core/facilitator";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { registerExactEvmScheme } from "@x402/evm/exact/facilitator";
import { createWalletClient, http, publicActions } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { cronosTestnet } from "viem/chains";
import { localAccount } from "../src/harness/accounts.js";
import { serveForBench } from "./serve.js";

const rpcUrl = process.env.BENCH_REFERENCE_RPC_URL;
if (!rpcUrl) throw new Error("BENCH_REFERENCE_RPC_URL: the local chain's RPC URL is required");
// Hardhat account #17: a PUBLIC test key, LOCAL-ONLY; verify sends nothing with it.
const account = localAccount(17);
const client = createWalletClient({ account: privateKeyToAccount(account.privateKey), chain: cronosTestnet, transport: http(rpcUrl) }).extend(publicActions);
const signer = toFacilitatorEvmSigner({
  address: account.address,
  readContract: (args) => client.readContract(args as Parameters<typeof client.readContract>[0]),
  verifyTypedData: (args) => client.verifyTypedData(args as Parameters<typeof client.verifyTypedData>[0]),
  writeContract: (args) => client.writeContract(args as Parameters<typeof client.writeContract>[0]),
  sendTransaction: (args) => client.sendTransaction(args),
  waitForTransactionReceipt: (args) => client.waitForTransactionReceipt(args),
  getCode: (args) => client.getCode(args),
});
const facilitator = new x402Facilitator();
registerExactEvmScheme(facilitator, { signer, networks: "eip155:338" });

const app = express();
app.use(express.json());
app.post("/verify", async (req, res) => {
  const { paymentPayload, paymentRequirements } = req.body as { paymentPayload: never; paymentRequirements: never };
  try {
    res.json(await facilitator.verify(paymentPayload, paymentRequirements));
  } catch (error) {
    res.status(500).json({ error: String(error) });
  }
});
serveForBench(app);
