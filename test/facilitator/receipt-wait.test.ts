import { expect } from "chai";
import request from "supertest";
import { loadConfig } from "../../src/facilitator/config/index.js";
import { createFacilitator, type Facilitator } from "../../src/facilitator/server.js";
import { serveJsonRpc } from "../../src/harness/rpc-bridge.js";
import { listen, readBody } from "../helpers/http.js";
import { HARDHAT_KEYS, makePayment } from "../helpers/facilitator.js";
import { openChain } from "../helpers/token.js";

/**
 * A JSON-RPC proxy in front of a real chain that drops (destroys the connection of) the next
 * `drops` requests asking for a transaction receipt, once armed.
 */
async function droppingProxy(upstream: string) {
  const state = { drops: 0, dropped: 0, receiptRequests: 0 };
  const server = await listen((req, res) => {
    void (async () => {
      const body = await readBody(req);
      if (body.includes("eth_getTransactionReceipt")) {
        state.receiptRequests++;
        if (state.drops > 0) {
          state.drops--;
          state.dropped++;
          req.socket.destroy();
          return;
        }
      }
      const answer = await fetch(upstream, { method: "POST", headers: { "content-type": "application/json" }, body });
      res.writeHead(answer.status, { "content-type": "application/json" });
      res.end(await answer.text());
    })().catch(() => res.destroy());
  });
  return Object.assign(server, { state });
}

describe("facilitator settle: waiting for the receipt through RPC errors", () => {
  it("answers payment.settled, paying the payee once, when the connection drops while it waits for the receipt", async () => {
    const chain = await openChain("cronos-testnet");
    const bridge = await serveJsonRpc(chain.connection.provider as never, { port: 0, role: "cronos-testnet-rpc" });
    const proxy = await droppingProxy(bridge.url);
    const rpcErrors: string[] = [];
    let facilitator: Facilitator | undefined;
    try {
      facilitator = await createFacilitator(
        loadConfig({
          RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer,
          CRONOS_TESTNET_RPC_URL: proxy.url,
          RATE_LIMIT_VERIFY_PER_MINUTE: "0",
          RATE_LIMIT_SETTLE_PER_MINUTE: "0",
          POLLING_INTERVAL_MS: "20",
        }),
        { observer: { rpcError: (network) => rpcErrors.push(network) } },
      );
      const { app } = facilitator;
      const payment = await makePayment(chain);
      // Two polls for the receipt, each with the transport's one retry: the connection is lost for a while
      // after the transaction was sent (viem's own receipt wait gave up at the second failed poll).
      proxy.state.drops = 4;
      const answer = await request(app).post("/v2/x402/settle").send(payment.body);
      expect(answer.status).to.equal(200);
      expect(answer.body.event, JSON.stringify(answer.body)).to.equal("payment.settled");
      expect(proxy.state.dropped).to.equal(4);
      expect(proxy.state.receiptRequests).to.be.greaterThan(4);
      expect(rpcErrors).to.deep.equal(["cronos-testnet", "cronos-testnet"]);
      const receipt = await chain.publicClient.getTransactionReceipt({ hash: answer.body.txHash });
      expect(receipt.status).to.equal("success");
      expect(answer.body.blockNumber).to.equal(Number(receipt.blockNumber));
      expect(await chain.contract.read.balanceOf([payment.payTo])).to.equal(1_000_000n);
      expect(await chain.contract.read.authorizationState([payment.payer.address, payment.message.nonce])).to.equal(true);
    } finally {
      await facilitator?.close();
      await proxy.close();
      await bridge.close();
    }
  });
});
