import { expect } from "chai";
import request from "supertest";
import { parseEther } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { HARDHAT_KEYS, makePayment, openFacilitator } from "../helpers/facilitator.js";

describe("relayer: nonce-safe settlement", () => {
  it("uses several relayer keys in turn, each with its own nonces", async () => {
    const opened = await openFacilitator("cronos-testnet", { RELAYER_PRIVATE_KEY: `${HARDHAT_KEYS.relayer},${HARDHAT_KEYS.secondRelayer}` });
    const payments = await Promise.all(Array.from({ length: 10 }, () => makePayment(opened.chain)));
    const answers = await Promise.all(payments.map((p) => request(opened.app).post("/v2/x402/settle").send(p.body)));
    expect(answers.map((a) => a.body.event)).to.deep.equal(Array(10).fill("payment.settled"));
    const senders = await Promise.all(
      answers.map(async (a) => (await opened.chain.publicClient.getTransaction({ hash: a.body.txHash })).from.toLowerCase()),
    );
    const first = privateKeyToAccount(HARDHAT_KEYS.relayer).address.toLowerCase();
    const second = privateKeyToAccount(HARDHAT_KEYS.secondRelayer).address.toLowerCase();
    expect(new Set(senders)).to.deep.equal(new Set([first, second]));
    expect(senders.filter((s) => s === first).length).to.be.within(3, 7);
  });

  it("recovers when the node disagrees with its local nonce (the key was used elsewhere) and keeps settling", async () => {
    const opened = await openFacilitator();
    const first = await makePayment(opened.chain);
    expect((await request(opened.app).post("/v2/x402/settle").send(first.body)).body.event).to.equal("payment.settled");
    // Someone else spends the relayer's next nonce behind the facilitator's back.
    const relayer = privateKeyToAccount(HARDHAT_KEYS.relayer);
    const wallet = await opened.chain.viem.getWalletClient(relayer.address);
    await wallet.sendTransaction({ to: relayer.address, value: parseEther("0.001") });
    const second = await makePayment(opened.chain);
    const answer = await request(opened.app).post("/v2/x402/settle").send(second.body);
    expect(answer.body.event).to.equal("payment.settled");
    const tx = await opened.chain.publicClient.getTransaction({ hash: answer.body.txHash });
    expect(tx.nonce).to.equal(2);
    const third = await makePayment(opened.chain);
    expect((await request(opened.app).post("/v2/x402/settle").send(third.body)).body.event).to.equal("payment.settled");
    expect(await opened.chain.contract.read.balanceOf([opened.seller.address])).to.equal(3_000_000n);
  });
});
