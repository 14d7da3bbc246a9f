import { expect } from "chai";
import type { RunningFacilitator } from "../../src/facilitator/start.js";
import { makePayment } from "../helpers/facilitator.js";
import { fetchJson } from "../helpers/http.js";
import { openProxiedChain, startFacilitatorOnProxies, type ProxiedChain } from "../helpers/proxied-chain.js";
import { waitUntil } from "../helpers/wait.js";

/** POSTs a settle to `running`; its answer's body. */
const settleOn = async (running: RunningFacilitator, body: unknown) => (await fetchJson(`${running.url}/v2/x402/settle`, { body })).body as Record<string, unknown>;

/** The methods a settle asks of the chain (the lifecycle's and the failover's own reads aside). */
const SETTLE_METHODS = new Set(["eth_getCode", "eth_estimateGas", "eth_sendRawTransaction", "eth_getTransactionReceipt", "eth_maxPriorityFeePerGas"]);

describe("settle on a remote RPC: three round trips on a chain that mines at once", function () {
  this.timeout(60_000);
  let proxied: ProxiedChain;
  let running: RunningFacilitator;
  before(async () => {
    proxied = await openProxiedChain(1);
    // A long polling interval: the fee quote is shared from the warm-up on, and no lifecycle round interleaves.
    // The state index's own block reads would run beside the settle's (verify's, test/state counts them): off here.
    running = await startFacilitatorOnProxies(proxied, { POLLING_INTERVAL_MS: "60000", STATE_INDEX: "false" });
  });
  after(async () => {
    await running?.close(0);
    await proxied?.close();
  });

  it("asks the head and the payer's state in one batch, simulates in the next, and sends with the receipt and the latest block in the third; the answer's block and time are the chain's", async () => {
    const proxy = proxied.proxies[0]!;
    // Warm-up: the relayer's first nonce, the fee quote, the token's code checks.
    expect((await settleOn(running, (await makePayment(proxied.chain)).body)).event).to.equal("payment.settled");

    const payment = await makePayment(proxied.chain, { amount: 2_500n });
    proxy.batches.length = 0;
    const answer = await settleOn(running, payment.body);
    expect(answer.event).to.equal("payment.settled");
    const settleBatches = proxy.batches.filter((batch) => batch.some((method) => SETTLE_METHODS.has(method)));
    expect(settleBatches).to.deep.equal([
      ["eth_getBlockByNumber", "eth_getCode", "eth_call", "eth_call"],
      ["eth_estimateGas"],
      ["eth_sendRawTransaction", "eth_getTransactionReceipt", "eth_getBlockByNumber"],
    ]);
    const receipt = await proxied.chain.publicClient.getTransactionReceipt({ hash: answer.txHash as `0x${string}` });
    const block = await proxied.chain.publicClient.getBlock({ blockNumber: receipt.blockNumber });
    expect(answer.blockNumber).to.equal(Number(receipt.blockNumber));
    expect(answer.timestamp).to.equal(new Date(Number(block.timestamp) * 1000).toISOString());
    expect(receipt.status).to.equal("success");
  });
});

describe("settle when the chain has not mined the transaction by the send's answer", function () {
  this.timeout(60_000);
  let proxied: ProxiedChain;
  let running: RunningFacilitator;
  before(async () => {
    proxied = await openProxiedChain(1);
    running = await startFacilitatorOnProxies(proxied, { POLLING_INTERVAL_MS: "50" });
  });
  after(async () => {
    await running?.close(0);
    await proxied?.close();
  });

  it("polls the receipt as before (each poll with the latest block), and answers with the mining block's number and time", async () => {
    const proxy = proxied.proxies[0]!;
    await proxy.chain.automine(false);
    try {
      const payment = await makePayment(proxied.chain, { amount: 3_500n });
      const settling = settleOn(running, payment.body);
      await waitUntil("the settlement in the pool", async () => (await proxy.chain.pending()).length === 1);
      // Mine once the facilitator has polled for the receipt after the send's own batch.
      const receiptPolls = () => proxy.batches.filter((batch) => batch.includes("eth_getTransactionReceipt") && !batch.includes("eth_sendRawTransaction")).length;
      await waitUntil("a receipt poll after the send", () => receiptPolls() > 0);
      await proxy.chain.mine(1);
      const answer = await settling;
      expect(answer.event).to.equal("payment.settled");
      const receipt = await proxied.chain.publicClient.getTransactionReceipt({ hash: answer.txHash as `0x${string}` });
      const block = await proxied.chain.publicClient.getBlock({ blockNumber: receipt.blockNumber });
      expect(answer.blockNumber).to.equal(Number(receipt.blockNumber));
      expect(answer.timestamp).to.equal(new Date(Number(block.timestamp) * 1000).toISOString());
      // The send's batch found no receipt; later polls asked for it with the latest block.
      const polls = proxy.batches.filter((batch) => batch.includes("eth_getTransactionReceipt") && !batch.includes("eth_sendRawTransaction"));
      expect(polls.length).to.be.greaterThan(0);
      expect(polls.every((batch) => batch.includes("eth_getBlockByNumber"))).to.equal(true);
    } finally {
      await proxy.chain.automine(true);
    }
  });
});
