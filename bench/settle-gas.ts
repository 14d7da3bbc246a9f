// Gas of honest settlements per kind of payer: `npm run bench:gas`. The figures MAX_SETTLE_GAS and
// ERC1271_GAS_LIMIT are sized from (docs/operations.md). An in-process chain (EDR) with the kit's
// token, a facilitator with the caps lifted, and for each payer two settlements through
// POST /v2/x402/settle: the first to a payee that never held the token (the dearest case: a new
// balance slot), the second to the same payee. Also the gas of the wallet's own isValidSignature call.
import request from "supertest";
import { encodeFunctionData, hashTypedData, toHex, type Address, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { erc1271Abi } from "../src/chain/token-abi.js";
import { HARDHAT_KEYS, makePayment, openFacilitator } from "../test/helpers/facilitator.js";
import { deployOwnerWallet, deploySafeLikeWallet, walletPayment, type WalletPayer } from "../test/helpers/wallets.js";

const opened = await openFacilitator("cronos-testnet", { MAX_SETTLE_GAS: "10000000", ERC1271_GAS_LIMIT: "10000000" });
const { chain, app } = opened;
const relayer = privateKeyToAccount(HARDHAT_KEYS.relayer).address;

async function settle(body: object): Promise<{ gasUsed: bigint; gasLimit: bigint }> {
  const answer = await request(app).post("/v2/x402/settle").send(body);
  if (answer.body.event !== "payment.settled") throw new Error(`not settled: ${JSON.stringify(answer.body)}`);
  const [receipt, tx] = await Promise.all([
    chain.publicClient.getTransactionReceipt({ hash: answer.body.txHash }),
    chain.publicClient.getTransaction({ hash: answer.body.txHash }),
  ]);
  return { gasUsed: receipt.gasUsed, gasLimit: tx.gas };
}

/** Gas of the `eth_call` verify makes: the wallet's isValidSignature with its owners' signature. */
async function isValidSignatureGas(wallet: WalletPayer): Promise<bigint> {
  const digest = hashTypedData({ domain: { name: "x", chainId: 338 }, types: { M: [{ name: "n", type: "uint256" }] }, primaryType: "M", message: { n: 1n } });
  const signature = await wallet.sign(digest);
  return chain.publicClient.estimateGas({
    account: relayer,
    to: wallet.address,
    data: encodeFunctionData({ abi: erc1271Abi, functionName: "isValidSignature", args: [digest, signature] }),
  });
}

const rows: Array<{ payer: string; fresh: { gasUsed: bigint; gasLimit: bigint }; again: { gasUsed: bigint; gasLimit: bigint }; erc1271?: bigint }> = [];
let payees = 0;
const freshPayee = (): Address => privateKeyToAccount(toHex(0xbe00n + BigInt(++payees), { size: 32 }) as Hex).address;

{
  const payTo = freshPayee();
  const fresh = await settle((await makePayment(chain, { payTo })).body);
  const again = await settle((await makePayment(chain, { payTo })).body);
  rows.push({ payer: "EOA (ECDSA)", fresh, again });
}
for (const wallet of [
  await deployOwnerWallet(chain),
  await deploySafeLikeWallet(chain, 2, 3),
  await deploySafeLikeWallet(chain, 3, 5),
]) {
  await chain.contract.write.mint([wallet.address, 10_000_000n]);
  const payTo = freshPayee();
  const fresh = await settle((await walletPayment(chain, wallet, { payTo })).body);
  const again = await settle((await walletPayment(chain, wallet, { payTo })).body);
  rows.push({ payer: wallet.kind, fresh, again, erc1271: await isValidSignatureGas(wallet) });
}

const n = (v: bigint | undefined) => (v === undefined ? "—" : v.toLocaleString("en-US"));
console.log(`honest settlements on the kit's token (EDR, chain 338); gas used (gas limit the relayer sent)`);
console.log("payer                                   new payee           known payee         isValidSignature eth_call");
for (const row of rows) {
  console.log(
    `${row.payer.padEnd(38)}  ${`${n(row.fresh.gasUsed)} (${n(row.fresh.gasLimit)})`.padEnd(18)}  ${`${n(row.again.gasUsed)} (${n(row.again.gasLimit)})`.padEnd(18)}  ${n(row.erc1271)}`,
  );
}
