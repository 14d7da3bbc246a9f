import { expect } from "chai";
import request from "supertest";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { HttpRequestError, InvalidInputRpcError, RpcRequestError, numberToHex, type Address, type Hex } from "viem";
import { isOutOfGas, isRevert, revertReason } from "../../src/chain/revert.js";
import { SettleError, VerifyReason } from "../../src/protocol/reasons.js";
import { makePayment, openFacilitator } from "../helpers/facilitator.js";
import { expectFailed, relayerNonce, settle } from "../helpers/settle.js";
import { deployGasBurnerWallet, deployOwnerWallet, deploySafeLikeWallet, walletPayment, type WalletPayer } from "../helpers/wallets.js";

type Opened = Awaited<ReturnType<typeof openFacilitator>>;

/** Keccak rounds that make the burner's isValidSignature cost over a million gas (about 316 gas a round). */
const BURN_ROUNDS = 5_000n;

const freshAddress = (): Address => privateKeyToAccount(generatePrivateKey()).address;

/** A 1-base-unit payment from `wallet` to an address of the attacker's own. */
async function selfPayment(opened: Opened, wallet: WalletPayer) {
  await opened.chain.contract.write.mint([wallet.address, 1n]);
  return walletPayment(opened.chain, wallet, { payTo: freshAddress(), amount: 1n });
}

describe("relayer safety: gas caps (MAX_SETTLE_GAS, ERC1271_GAS_LIMIT)", () => {
  it("the attack, with the caps lifted: a wallet whose isValidSignature burns gas makes one 1-unit settle cost the relayer over a million gas", async () => {
    const opened = await openFacilitator("cronos-testnet", { MAX_SETTLE_GAS: "3000000", ERC1271_GAS_LIMIT: "3000000" });
    const burner = await deployGasBurnerWallet(opened.chain, BURN_ROUNDS);
    const answer = await settle(opened, (await selfPayment(opened, burner)).body);
    expect(answer.event).to.equal("payment.settled");
    const receipt = await opened.chain.publicClient.getTransactionReceipt({ hash: answer.txHash! });
    expect(receipt.gasUsed > 1_000_000n, `gas used ${receipt.gasUsed}`).to.equal(true);
  });

  it("refuses it by default: verify Invalid EIP-3009 signature (200), settle Invalid signature, nothing sent; the node ran no call beyond the budget", async () => {
    const opened = await openFacilitator();
    const burner = await deployGasBurnerWallet(opened.chain, BURN_ROUNDS);
    const { body } = await selfPayment(opened, burner);
    const nonce = await relayerNonce(opened);
    opened.rpc.reset();

    const verify = await request(opened.app).post("/v2/x402/verify").set("X402-Version", "1").send(body);
    expect({ status: verify.status, body: verify.body }).to.deep.equal({ status: 200, body: { isValid: false, invalidReason: VerifyReason.invalidSignature } });
    expectFailed(await settle(opened, body), SettleError.invalidSignature);

    expect(await relayerNonce(opened)).to.equal(nonce);
    expect(await opened.chain.contract.read.balanceOf([burner.address])).to.equal(1n);
    const walletCalls = opened.rpc.calls.filter((call) => call.method === "eth_call" && (call.params[0] as { to: Address }).to.toLowerCase() === burner.address.toLowerCase());
    expect(walletCalls.map((call) => (call.params[0] as { gas?: Hex }).gas)).to.deep.equal([numberToHex(150_000), numberToHex(150_000)]);
    expect(opened.rpc.count("eth_estimateGas")).to.equal(0);
  });

  it("refuses before sending a settlement whose estimate exceeds MAX_SETTLE_GAS (Transaction failed on-chain); the estimate searches no further than the cap, and a settlement under it is sent with the estimate + max(10 %, 20,000 gas), at most the cap", async () => {
    // An EOA paying a payee that never held the token needs about 97,000 gas; one that holds some, about 80,000.
    const opened = await openFacilitator("cronos-testnet", { MAX_SETTLE_GAS: "90000" });
    const payTo = freshAddress();
    const nonce = await relayerNonce(opened);
    const before = await opened.chain.contract.read.balanceOf([opened.buyer.address]);
    opened.rpc.reset();

    expectFailed(await settle(opened, (await makePayment(opened.chain, { payTo })).body), SettleError.failedOnChain);
    expect(await relayerNonce(opened)).to.equal(nonce);
    expect(await opened.chain.contract.read.balanceOf([opened.buyer.address])).to.equal(before);
    const estimates = opened.rpc.calls.filter((call) => call.method === "eth_estimateGas");
    expect(estimates.map((call) => (call.params[0] as { gas?: Hex }).gas)).to.deep.equal([numberToHex(90_000)]);

    await opened.chain.contract.write.mint([payTo, 1n]);
    const answer = await settle(opened, (await makePayment(opened.chain, { payTo })).body);
    expect(answer.event).to.equal("payment.settled");
    const tx = await opened.chain.publicClient.getTransaction({ hash: answer.txHash! });
    // The limit sent is the estimate + the larger of 10 % and 20,000 gas (Cronos charges at least half of it),
    // never above the cap: the settle's own estimate, asked again of the block it was made on.
    const asked = opened.rpc.calls.filter((call) => call.method === "eth_estimateGas").at(-1)!.params[0];
    const estimate = BigInt(await opened.chain.connection.provider.request({ method: "eth_estimateGas", params: [asked, numberToHex(tx.blockNumber! - 1n)] }) as Hex);
    const tenth = (estimate + 9n) / 10n;
    const padded = estimate + (tenth > 20_000n ? tenth : 20_000n);
    expect(tx.gas).to.equal(padded < 90_000n ? padded : 90_000n);
    expect(tx.gas > estimate).to.equal(true);
    expect(await relayerNonce(opened)).to.equal(nonce + 1);
  });

  it("settles honest payments under the default caps: an EOA, an owner wallet and Safe-like 2-of-3 and 3-of-5 wallets, each to a payee that never held the token", async () => {
    const opened = await openFacilitator();
    const wallets = [await deployOwnerWallet(opened.chain), await deploySafeLikeWallet(opened.chain, 2, 3), await deploySafeLikeWallet(opened.chain, 3, 5)];
    const bodies = [(await makePayment(opened.chain, { payTo: freshAddress() })).body];
    for (const wallet of wallets) {
      await opened.chain.contract.write.mint([wallet.address, 1_000_000n]);
      bodies.push((await walletPayment(opened.chain, wallet, { payTo: freshAddress() })).body);
    }
    for (const body of bodies) {
      const answer = await settle(opened, body);
      expect(answer.event, JSON.stringify(answer)).to.equal("payment.settled");
      const tx = await opened.chain.publicClient.getTransaction({ hash: answer.txHash! });
      expect(tx.gas <= 250_000n, `gas limit ${tx.gas}`).to.equal(true);
    }
    for (const wallet of wallets) expect(await opened.chain.contract.read.balanceOf([wallet.address])).to.equal(0n);
  });

  it("tells a node's out-of-gas answer (geth and Cronos, Hardhat) from a revert and from a transport failure", () => {
    const rpcError = (code: number, message: string, data?: string) =>
      new InvalidInputRpcError(new RpcRequestError({ body: {}, url: "http://node", error: { code, message, ...(data ? { data } : {}) } }));
    expect(isOutOfGas(rpcError(-32000, "gas required exceeds allowance (250000)"))).to.equal(true);
    expect(isOutOfGas(rpcError(-32000, "out of gas"))).to.equal(true);
    expect(isOutOfGas(rpcError(-32000, "Transaction ran out of gas"))).to.equal(true);
    const reverted = rpcError(3, "execution reverted: FiatTokenV2: invalid signature");
    expect([isOutOfGas(reverted), isRevert(reverted), revertReason(reverted)]).to.deep.equal([false, true, "FiatTokenV2: invalid signature"]);
    const down = new HttpRequestError({ url: "http://node", details: "fetch failed" });
    expect([isOutOfGas(down), isRevert(down)]).to.deep.equal([false, false]);
  });
});
