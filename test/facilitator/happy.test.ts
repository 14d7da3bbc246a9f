import { expect } from "chai";
import request from "supertest";
import { parseEventLogs } from "viem";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { makePayment, openFacilitator } from "../helpers/facilitator.js";

describe("facilitator: verify and settle a valid payment", () => {
  it("verifies, settles on chain and answers every field the official client requires", async () => {
    const { chain, app, buyer, seller } = await openFacilitator();
    const payment = await makePayment(chain);
    const before = await chain.contract.read.balanceOf([buyer.address]);

    const verify = await request(app).post("/v2/x402/verify").set("X402-Version", "1").send(payment.body);
    expect(verify.status).to.equal(200);
    expect(verify.body).to.deep.equal({ isValid: true, invalidReason: null });

    const settle = await request(app).post("/v2/x402/settle").set("X402-Version", "1").send(payment.body);
    expect(settle.status).to.equal(200);
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: settle.body.txHash });
    const block = await chain.publicClient.getBlock({ blockNumber: receipt.blockNumber });
    expect(settle.body).to.deep.equal({
      x402Version: 1,
      event: "payment.settled",
      txHash: receipt.transactionHash,
      from: buyer.address,
      to: seller.address,
      value: "1000000",
      blockNumber: Number(receipt.blockNumber),
      network: "cronos-testnet",
      timestamp: new Date(Number(block.timestamp) * 1000).toISOString(),
    });
    expect(receipt.status).to.equal("success");
    const events = parseEventLogs({ abi: tokenAbi, logs: receipt.logs });
    expect(events.map((e) => e.eventName)).to.deep.equal(["AuthorizationUsed", "Transfer"]);
    expect(events[0]!.args).to.deep.equal({ authorizer: buyer.address, nonce: payment.message.nonce });
    expect(events[1]!.args).to.deep.equal({ from: buyer.address, to: seller.address, value: 1_000_000n });
    expect(await chain.contract.read.balanceOf([buyer.address])).to.equal(before - 1_000_000n);
    expect(await chain.contract.read.balanceOf([seller.address])).to.equal(1_000_000n);
    expect(await chain.contract.read.authorizationState([buyer.address, payment.message.nonce])).to.equal(true);

    // The same authorization again: no second transfer.
    const again = await request(app).post("/v2/x402/settle").send(payment.body);
    expect(again.status).to.equal(200);
    expect(again.body.event).to.equal("payment.failed");
    expect(again.body.error).to.equal("Authorization already used");
    expect(again.body.txHash).to.equal(receipt.transactionHash);
    expect(await chain.contract.read.balanceOf([seller.address])).to.equal(1_000_000n);
  });
});
