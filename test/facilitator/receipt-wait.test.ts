import { expect } from "chai";
import request from "supertest";
import { makePayment } from "../helpers/facilitator.js";
import { openProxiedChain, startFacilitatorOnProxies } from "../helpers/proxied-chain.js";

describe("facilitator settle: waiting for the receipt through RPC errors", () => {
  it("answers payment.settled, paying the payee once, when the connection drops while it waits for the receipt", async () => {
    const proxied = await openProxiedChain();
    const { chain } = proxied;
    const proxy = proxied.proxies[0]!;
    const rpcErrors: string[] = [];
    const { app } = (await startFacilitatorOnProxies(proxied, {}, { observer: { rpcError: (network) => rpcErrors.push(network) } })).facilitator;
    const payment = await makePayment(chain);
    // Two polls for the receipt, each with the transport's one retry: the connection is lost for a while
    // after the transaction was sent (viem's own receipt wait gave up at the second failed poll).
    proxy.fail({ kind: "reset", method: "eth_getTransactionReceipt", times: 4 });
    const answer = await request(app).post("/v2/x402/settle").send(payment.body);
    expect(answer.status).to.equal(200);
    expect(answer.body.event, JSON.stringify(answer.body)).to.equal("payment.settled");
    expect(proxy.faulted).to.equal(4);
    expect(proxy.batches.filter((batch) => batch.includes("eth_getTransactionReceipt")).length).to.be.greaterThan(4);
    expect(rpcErrors).to.deep.equal(["cronos-testnet", "cronos-testnet"]);
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: answer.body.txHash });
    expect(receipt.status).to.equal("success");
    expect(answer.body.blockNumber).to.equal(Number(receipt.blockNumber));
    expect(await chain.contract.read.balanceOf([payment.payTo])).to.equal(1_000_000n);
    expect(await chain.contract.read.authorizationState([payment.payer.address, payment.message.nonce])).to.equal(true);
  });
});
