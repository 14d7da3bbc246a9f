import { expect } from "chai";
import request from "supertest";
import { custom, encodeFunctionData, parseSignature, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { revertReason, settleErrorOfRevert } from "../../src/chain/revert.js";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { SettleError, type SettleErrorCode } from "../../src/protocol/reasons.js";
import { createTestFacilitator, HARDHAT_KEYS, makePayment, openFacilitator } from "../helpers/facilitator.js";
import { expectFailed, relayerNonce, settle } from "../helpers/settle.js";

type Opened = Awaited<ReturnType<typeof openFacilitator>>;

/** The `transferWithAuthorization` call a payment makes, for simulating it straight on the chain. */
function calldata(payment: Awaited<ReturnType<typeof makePayment>>, valueOverride?: bigint): Hex {
  const { r, s, v } = parseSignature(payment.signature);
  const m = payment.message;
  return encodeFunctionData({
    abi: tokenAbi,
    functionName: "transferWithAuthorization",
    args: [m.from, m.to, valueOverride ?? m.value, m.validAfter, m.validBefore, m.nonce, Number(v), r, s],
  });
}

describe("facilitator settle: every error, produced on a real chain", () => {
  let opened: Opened;
  beforeEach(async () => {
    opened = await openFacilitator();
  });

  async function balances() {
    return Promise.all([opened.chain.contract.read.balanceOf([opened.buyer.address]), opened.chain.contract.read.balanceOf([opened.seller.address])]);
  }

  it("answers Authorization expired after the chain's clock passed validBefore, and moves nothing", async () => {
    const latest = await opened.chain.publicClient.getBlock();
    const payment = await makePayment(opened.chain, { validBefore: latest.timestamp + 60n });
    await opened.chain.networkHelpers.time.increase(120);
    const before = await balances();
    expectFailed(await settle(opened, payment.body), "Authorization expired");
    expect(await balances()).to.deep.equal(before);
  });

  it("answers Authorization not yet valid before the chain reaches validAfter, then settles once it has", async () => {
    const latest = await opened.chain.publicClient.getBlock();
    const payment = await makePayment(opened.chain, { validAfter: latest.timestamp + 300n, validBefore: latest.timestamp + 3600n });
    expectFailed(await settle(opened, payment.body), "Authorization not yet valid");
    await opened.chain.networkHelpers.time.increase(400);
    expect((await settle(opened, payment.body)).event).to.equal("payment.settled");
  });

  it("answers Authorization already used for a spent nonce, with the transaction that spent it", async () => {
    const payment = await makePayment(opened.chain);
    const first = await settle(opened, payment.body);
    expect(first.event).to.equal("payment.settled");
    expectFailed(await settle(opened, payment.body), "Authorization already used", { txHash: first.txHash });
  });

  it("finds the spending transaction after a restart (a fresh facilitator on the same chain)", async () => {
    const payment = await makePayment(opened.chain);
    const first = await settle(opened, payment.body);
    const restarted = await createTestFacilitator(opened.config, { transports: { "cronos-testnet": custom(opened.chain.connection.provider) } });
    const again = await request(restarted.app).post("/v2/x402/settle").send(payment.body);
    expect(again.status).to.equal(200);
    expectFailed(again.body, "Authorization already used", { txHash: first.txHash });
  });

  it("answers ERC20: transfer amount exceeds balance when the payer cannot pay", async () => {
    const balance = await opened.chain.contract.read.balanceOf([opened.buyer.address]);
    const payment = await makePayment(opened.chain, { amount: balance + 1n });
    expectFailed(await settle(opened, payment.body), "ERC20: transfer amount exceeds balance");
    expect(await opened.chain.contract.read.balanceOf([opened.buyer.address])).to.equal(balance);
  });

  it("answers Invalid signature for a signature by another key", async () => {
    const balance = await opened.chain.contract.read.balanceOf([opened.buyer.address]);
    const payment = await makePayment(opened.chain, { signer: privateKeyToAccount(HARDHAT_KEYS.buyer2) });
    expect(payment.message.from).to.equal(opened.buyer.address);
    expectFailed(await settle(opened, payment.body), "Invalid signature");
    expect(await opened.chain.contract.read.balanceOf([opened.buyer.address])).to.equal(balance);
  });

  it("answers Invalid signature for the payer's signature over another value", async () => {
    const payment = await makePayment(opened.chain, { signedValue: 7n });
    expectFailed(await settle(opened, payment.body), "Invalid signature");
  });

  it("answers the verify reason itself where settle has no word for it", async () => {
    const payment = await makePayment(opened.chain);
    expectFailed(
      await settle(opened, { ...payment.body, paymentRequirements: { ...payment.body.paymentRequirements, payTo: privateKeyToAccount(HARDHAT_KEYS.buyer2).address } }),
      "Recipient does not match payTo address",
    );
  });

  it("answers Transaction failed on-chain when the token is paused (caught by simulation: no gas spent)", async () => {
    const payment = await makePayment(opened.chain);
    await opened.chain.contract.write.pause();
    const nonceBefore = await relayerNonce(opened);
    const before = await balances();
    expectFailed(await settle(opened, payment.body), "Transaction failed on-chain");
    expect(await relayerNonce(opened)).to.equal(nonceBefore);
    expect(await balances()).to.deep.equal(before);
  });

  it("answers Transaction failed on-chain for a blacklisted payer (caught by simulation: no gas spent)", async () => {
    const payment = await makePayment(opened.chain);
    await opened.chain.contract.write.blacklist([opened.buyer.address]);
    const nonceBefore = await relayerNonce(opened);
    const before = await balances();
    expectFailed(await settle(opened, payment.body), "Transaction failed on-chain");
    expect(await relayerNonce(opened)).to.equal(nonceBefore);
    expect(await balances()).to.deep.equal(before);
  });

  it("maps each FiatToken revert, as the chain reports it, to its settle error code", async () => {
    const relayer = privateKeyToAccount(HARDHAT_KEYS.relayer).address;
    const client = opened.chain.publicClient;
    const simulate = async (data: Hex) => {
      try {
        await client.estimateGas({ account: relayer, to: opened.chain.token, data });
        return undefined;
      } catch (error) {
        return revertReason(error);
      }
    };
    const latest = await client.getBlock();
    const expired = await makePayment(opened.chain, { validBefore: latest.timestamp - 1n });
    const early = await makePayment(opened.chain, { validAfter: latest.timestamp + 1000n });
    const good = await makePayment(opened.chain);
    const rich = await makePayment(opened.chain, { amount: 10n ** 15n });
    const cases: Array<[Hex, string, SettleErrorCode]> = [
      [calldata(expired), "FiatTokenV2: authorization is expired", "expired"],
      [calldata(early), "FiatTokenV2: authorization is not yet valid", "notYetValid"],
      [calldata(good, 5n), "FiatTokenV2: invalid signature", "invalidSignature"],
      [calldata(rich), "ERC20: transfer amount exceeds balance", "insufficientBalance"],
    ];
    for (const [data, reason, code] of cases) {
      expect(await simulate(data)).to.equal(reason);
      expect(settleErrorOfRevert(reason)).to.equal(code);
    }
    await opened.chain.publicClient.request({ method: "eth_sendTransaction" as never, params: [{ from: relayer, to: opened.chain.token, data: calldata(good) }] as never });
    expect(await simulate(calldata(good))).to.equal("FiatTokenV2: authorization is used or canceled");
    expect(settleErrorOfRevert("FiatTokenV2: authorization is used or canceled")).to.equal("alreadyUsed");
    await opened.chain.contract.write.pause();
    expect(await simulate(calldata(rich))).to.equal("Pausable: paused");
    expect(settleErrorOfRevert("Pausable: paused")).to.equal("failedOnChain");
    expect(settleErrorOfRevert("ECRecover: invalid signature 's' value")).to.equal("invalidSignature");
    expect(settleErrorOfRevert("EIP3009: invalid signature")).to.equal("invalidSignature");
    expect(settleErrorOfRevert(undefined)).to.equal("failedOnChain");
  });

  it("settles the same authorization fired five times at once exactly once", async () => {
    const payment = await makePayment(opened.chain);
    const before = await balances();
    const answers = await Promise.all(Array.from({ length: 5 }, () => request(opened.app).post("/v2/x402/settle").send(payment.body)));
    expect(answers.map((a) => a.status)).to.deep.equal(Array(5).fill(200));
    const events = answers.map((a) => a.body.event).sort();
    expect(events).to.deep.equal(["payment.failed", "payment.failed", "payment.failed", "payment.failed", "payment.settled"]);
    for (const answer of answers.filter((a) => a.body.event === "payment.failed")) {
      expect(answer.body.error).to.equal("Authorization already used");
    }
    expect(await balances()).to.deep.equal([before[0] - 1_000_000n, before[1] + 1_000_000n]);
    const logs = await opened.chain.publicClient.getContractEvents({ address: opened.chain.token, abi: tokenAbi, eventName: "AuthorizationUsed", fromBlock: 0n });
    expect(logs.filter((l) => l.args.nonce === payment.message.nonce)).to.have.length(1);
  });

  it("settles many distinct authorizations at once without relayer nonce collisions", async () => {
    const payments = await Promise.all(Array.from({ length: 12 }, () => makePayment(opened.chain)));
    const before = await balances();
    const answers = await Promise.all(payments.map((p) => request(opened.app).post("/v2/x402/settle").send(p.body)));
    expect(answers.map((a) => a.status)).to.deep.equal(Array(12).fill(200));
    expect(answers.map((a) => a.body.event)).to.deep.equal(Array(12).fill("payment.settled"));
    expect(new Set(answers.map((a) => a.body.txHash)).size).to.equal(12);
    expect(await balances()).to.deep.equal([before[0] - 12_000_000n, before[1] + 12_000_000n]);
  });
});
